import { spawnSync } from "node:child_process";
import { describe, expect, it } from "vitest";
import { writeAdapterFixture } from "./_fixture.js";
import { describeAdapter } from "./_tests.js";
import { ROOT, runtimeBinary, sqliteFile, startProcess } from "./_utils.js";

const bun = runtimeBinary("bun");

if (bun.runnable) {
  describeAdapter("bun", () =>
    startProcess("bun", bun.bin, ["examples/bun/server.ts", "--fixture", writeAdapterFixture(), "--port", "0"]),
  );
  // The same suite with the store on a SQLite file through bun:sqlite (the example's --db).
  describeAdapter("bun on bun:sqlite", () =>
    startProcess("bun", bun.bin, [
      "examples/bun/server.ts",
      "--fixture",
      writeAdapterFixture(),
      "--db",
      sqliteFile("bun"),
      "--port",
      "0",
    ]),
  );
  describe("serveBun", () => {
    it("listens on 127.0.0.1 unless given a hostname", () => {
      const run = spawnSync(bun.bin, ["test/adapters/_serve-default.ts"], {
        cwd: ROOT,
        encoding: "utf8",
        timeout: 120_000,
      });
      expect(run.status, run.stderr).toBe(0);
      expect(JSON.parse(run.stdout)).toEqual({ hostname: "127.0.0.1", status: 200 });
    }, 180_000);
  });
  describe("example server: bun", () => {
    it("exits with code 2 and says what is wrong on a bad flag or fixture", () => {
      for (const [flags, message] of [
        [["--bogus"], "Unknown option '--bogus'"],
        [["--port", "x"], "--port must be an integer"],
        [["--fixture", "/nonexistent/space.json"], "cannot read the fixture /nonexistent/space.json"],
      ] as const) {
        const run = spawnSync(bun.bin, ["examples/bun/server.ts", ...flags], {
          cwd: ROOT,
          encoding: "utf8",
          timeout: 60_000,
        });
        expect(run.status).toBe(2);
        expect(run.stderr).toContain(message);
      }
    }, 120_000);
  });
} else {
  console.warn(`[adapters] SKIPPED the Bun adapter suite: the bun binary cannot run here (${bun.reason})`);
  describe("adapter: bun", () => it.skip(`bun cannot run on this machine: ${bun.reason}`));
}
