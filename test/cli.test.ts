import { spawn } from "node:child_process";
import { Volume } from "memfs";
import { describe, expect, it } from "vitest";
import { parseServerArgs, UsageError } from "../examples/server/cli.js";
import { startServer } from "../examples/server/server.js";
import { parseExampleArgs } from "../examples/shared/options.js";
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
      log: "json",
      metrics: false,
      metricsToken: null,
      apiRatePerSecond: 20,
      drainTimeoutSeconds: 10,
      storageTimeoutSeconds: 10,
      upstreamTimeoutSeconds: 15,
      adminToken: null,
    });
  });

  it("takes an admin token of 24 or more printable characters, and refuses a shorter one", () => {
    expect(parseServerArgs(["--admin-token", "a".repeat(24)], defaults).adminToken).toBe("a".repeat(24));
    expect(() => parseServerArgs(["--admin-token", "a".repeat(23)], defaults)).toThrow("--admin-token must be at least 24 printable characters without spaces");
  });

  it("takes every flag", () => {
    const config = parseServerArgs(
      [
        "--fixture", "/f.json", "--port", "9000", "--host", "0.0.0.0", "--db", ":memory:", "--redis", "redis://127.0.0.1:6379",
        "--now", "2026-11-01T12:00:00Z", "--audit-lag", "2", "--webhook-rate", "10", "--app-url", "https://bi.example.com/",
        "--view-url", "https://view.example.com", "--log", "none", "--metrics", "--api-rate", "2.5", "--drain-timeout", "30",
        "--storage-timeout", "0", "--upstream-timeout", "0.5", "--admin-token", "admin_token_of_24_chars__",
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
      log: "none",
      metrics: true,
      metricsToken: null,
      apiRatePerSecond: 2.5,
      drainTimeoutSeconds: 30,
      storageTimeoutSeconds: 0,
      upstreamTimeoutSeconds: 0.5,
      adminToken: "admin_token_of_24_chars__",
    });
  });

  it("turns metrics on with --metrics-token", () => {
    const config = parseServerArgs(["--metrics-token", "0123456789abcdef-token"], defaults);
    expect([config.metrics, config.metricsToken]).toEqual([true, "0123456789abcdef-token"]);
  });

  it("keeps the operations flags to npm start: the Bun and Deno examples refuse them", () => {
    expect(parseExampleArgs(["--port", "0"], "/f.json").port).toBe(0);
    for (const flag of [["--metrics"], ["--api-rate", "5"], ["--log", "none"], ["--drain-timeout", "1"]]) {
      expect(() => parseExampleArgs(flag, "/f.json")).toThrow(`${flag[0]} is for npm start`);
    }
  });

  it("refuses bad flags with a message", () => {
    const bad: Array<[string[], RegExp]> = [
      [["--port", "http"], /--port must be an integer/],
      [["--port", "70000"], /--port must be between/],
      [["--now", "yesterday"], /--now must be an ISO 8601 instant/],
      [["--audit-lag", "1.5"], /--audit-lag must be an integer/],
      [["--webhook-rate=-1"], /--webhook-rate must be a number of at least 0/],
      [["--app-url", "ftp://x"], /--app-url must be an http\(s\) URL/],
      [["--redis", "localhost"], /--redis must be a redis:\/\/ URL/],
      [["--log", "xml"], /--log must be json or none/],
      [["--api-rate=-1"], /--api-rate must be a number of at least 0/],
      [["--drain-timeout", "soon"], /--drain-timeout must be a number of at least 0/],
      [["--storage-timeout", ""], /--storage-timeout must be a number of at least 0/],
      [["--metrics-token", "short"], /--metrics-token must be at least 16 printable characters/],
      [["--metrics-token", "has a space in it, 123456"], /--metrics-token must be at least 16 printable characters/],
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
