import { spawn } from "node:child_process";
import { Volume } from "memfs";
import { describe, expect, it } from "vitest";
import { parseServerArgs, UsageError } from "../examples/server/cli.js";
import { startServer } from "../examples/server/server.js";
import { FixtureError } from "../src/fixture/load.js";
import { testFixture, TOKENS } from "./support/fixture.js";

const defaults = { fixture: "/demo.json", db: ".data/dataport.sqlite" };

describe("example server flags", () => {
  it("has the documented defaults", () => {
    expect(parseServerArgs([], defaults)).toEqual({
      fixture: "/demo.json",
      port: 8787,
      host: "127.0.0.1",
      db: ".data/dataport.sqlite",
      redis: null,
      now: null,
      auditLagSeconds: 5,
      webhookRatePerSecond: 50,
      appUrl: "http://127.0.0.1:8787",
      viewUrl: "http://127.0.0.1:8787",
    });
  });

  it("takes every flag", () => {
    const config = parseServerArgs(
      [
        "--fixture", "/f.json", "--port", "9000", "--host", "0.0.0.0", "--db", ":memory:", "--redis", "redis://127.0.0.1:6379",
        "--now", "2026-11-01T12:00:00Z", "--audit-lag", "2", "--webhook-rate", "10", "--app-url", "https://bi.example.com/",
        "--view-url", "https://view.example.com",
      ],
      defaults,
    );
    expect(config).toEqual({
      fixture: "/f.json",
      port: 9000,
      host: "0.0.0.0",
      db: ":memory:",
      redis: "redis://127.0.0.1:6379",
      now: Date.parse("2026-11-01T12:00:00Z"),
      auditLagSeconds: 2,
      webhookRatePerSecond: 10,
      appUrl: "https://bi.example.com",
      viewUrl: "https://view.example.com",
    });
  });

  it("refuses bad flags with a message", () => {
    const bad: Array<[string[], RegExp]> = [
      [["--port", "http"], /--port must be an integer/],
      [["--port", "70000"], /--port must be between/],
      [["--now", "yesterday"], /--now must be an ISO 8601 instant/],
      [["--audit-lag", "1.5"], /--audit-lag must be an integer/],
      [["--webhook-rate", "0"], /--webhook-rate must be a positive number/],
      [["--app-url", "ftp://x"], /--app-url must be an http\(s\) URL/],
      [["--redis", "localhost"], /--redis must be a redis:\/\/ URL/],
      [["--frobnicate"], /Unknown option '--frobnicate'/],
    ];
    for (const [argv, message] of bad) {
      expect(() => parseServerArgs(argv, defaults)).toThrow(UsageError);
      expect(() => parseServerArgs(argv, defaults)).toThrow(message);
    }
  });
});

describe("example server", () => {
  const io = (files: Record<string, string>) => ({ fs: Volume.fromJSON(files) as never, env: {} });

  it("serves a fixture read through the injected fs, with --now and --view-url applied", async () => {
    const config = { ...parseServerArgs(["--db", ":memory:", "--port", "0", "--now", "2026-11-01T12:00:00Z"], { fixture: "/space.json", db: ":memory:" }) };
    const running = await startServer(config, io({ "/space.json": JSON.stringify(testFixture()) }));
    try {
      const res = await fetch(`${running.url}/api/v1/me`, { headers: { authorization: `Bearer ${TOKENS.sync}` } });
      expect(res.status).toBe(200);
      expect((await res.json()).name).toBe("Warehouse sync");
      expect(Math.abs(running.api.ports.clock.now() - Date.parse("2026-11-01T12:00:00Z"))).toBeLessThan(5_000);
    } finally {
      await running.close();
    }
  });

  it("refuses a bad fixture before listening", async () => {
    const fixture = testFixture();
    fixture.apiKeys[0]!.allowlist.tables.push("tbl_missing");
    const config = parseServerArgs(["--db", ":memory:", "--port", "0"], { fixture: "/space.json", db: ":memory:" });
    await expect(startServer(config, io({ "/space.json": JSON.stringify(fixture) }))).rejects.toThrow(FixtureError);
    await expect(startServer(config, io({ "/space.json": JSON.stringify(fixture) }))).rejects.toThrow("$.apiKeys[0].allowlist.tables[1]");
  });
});

describe("example server process", () => {
  function run(args: string[]) {
    const child = spawn(process.execPath, ["--import", "tsx", "examples/server/main.ts", ...args], { stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d) => (stdout += d));
    child.stderr.on("data", (d) => (stderr += d));
    const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
    return { child, exited, out: () => stdout, err: () => stderr };
  }

  it("exits 2 on a bad flag and on a bad fixture", async () => {
    const flag = run(["--port", "nope"]);
    expect(await flag.exited).toBe(2);
    expect(flag.err()).toContain("--port must be an integer");
    const fixture = run(["--fixture", "/nonexistent/space.json", "--db", ":memory:"]);
    expect(await fixture.exited).toBe(2);
    expect(fixture.err()).toContain("cannot read /nonexistent/space.json");
  });

  it("prints the listening line, serves the demo and stops cleanly on SIGTERM", async () => {
    const server = run(["--db", ":memory:", "--port", "0"]);
    const url = await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no listening line: ${server.err()}`)), 15_000);
      server.child.stdout.on("data", () => {
        const match = /listening on (http:\/\/\S+)/.exec(server.out());
        if (match) {
          clearTimeout(timer);
          resolve(match[1]!);
        }
      });
    });
    const res = await fetch(`${url}/api/v1/me`, { headers: { authorization: "Bearer dp_demo_full_access_0000000000001" } });
    expect((await res.json()).name).toBe("Warehouse sync");
    server.child.kill("SIGTERM");
    expect(await server.exited).toBe(0);
  });
});
