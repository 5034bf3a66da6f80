import { spawnSync } from "node:child_process";
import { describe, expect, it } from "vitest";
import { writeAdapterFixture } from "./_fixture.js";
import { describeAdapter } from "./_tests.js";
import { ROOT, runtimeBinary, sqliteFile, startProcess } from "./_utils.js";

const deno = runtimeBinary("deno");

/**
 * What `examples/deno/server.ts` needs: the sources import `./x.js` for `./x.ts` (sloppy imports), net, the fixture,
 * env.
 */
export const DENO_ARGS = ["run", "--sloppy-imports", "--allow-net", "--allow-read", "--allow-env"];

if (deno.runnable) {
  describeAdapter("deno", () =>
    startProcess("deno", deno.bin, [
      ...DENO_ARGS,
      "examples/deno/server.ts",
      "--fixture",
      writeAdapterFixture(),
      "--port",
      "0",
    ]),
  );
  // The same suite with the store on a SQLite file through Deno's node:sqlite (the example's --db; writing it needs
  // --allow-write).
  describeAdapter("deno on node:sqlite", () =>
    startProcess("deno", deno.bin, [
      ...DENO_ARGS,
      "--allow-write",
      "examples/deno/server.ts",
      "--fixture",
      writeAdapterFixture(),
      "--db",
      sqliteFile("deno"),
      "--port",
      "0",
    ]),
  );
  describe("serveDeno", () => {
    it("listens on 127.0.0.1 unless given a hostname, and prints no deprecation notice when it answers", () => {
      const run = spawnSync(deno.bin, [...DENO_ARGS, "test/adapters/_serve-default.ts"], {
        cwd: ROOT,
        encoding: "utf8",
        timeout: 120_000,
        env: { ...process.env, NO_COLOR: "1" },
      });
      expect(run.status, run.stderr).toBe(0);
      expect(JSON.parse(run.stdout)).toEqual({ hostname: "127.0.0.1", status: 200 });
      expect(run.stderr).not.toMatch(/legacy behavior|deprecat/i);
    }, 180_000);
  });
  describe("example server: deno", () => {
    it("exits with code 2 and says what is wrong on a bad flag or fixture", () => {
      for (const [flags, message] of [
        [["--bogus"], "Unknown option '--bogus'"],
        [["--port", "x"], "--port must be an integer"],
        [["--fixture", "/nonexistent/space.json"], "cannot read the fixture /nonexistent/space.json"],
      ] as const) {
        const run = spawnSync(deno.bin, [...DENO_ARGS, "examples/deno/server.ts", ...flags], {
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
  console.warn(`[adapters] SKIPPED the Deno adapter suite: the deno binary cannot run here (${deno.reason})`);
  describe("adapter: deno", () => it.skip(`deno cannot run on this machine: ${deno.reason}`));
}
