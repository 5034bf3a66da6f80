import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { createServer, type Server } from "node:net";
import { Volume } from "memfs";
import { describe, expect, it } from "vitest";
import { HelpRequested, help, parseServerArgs, StartError, usage, UsageError } from "../examples/server/cli.js";
import { startServer } from "../examples/server/server.js";
import { checkPostgres, checkRedis } from "../examples/server/shared.js";
import { parseExampleArgs } from "../examples/shared/options.js";
import { FixtureError } from "../src/fixture/load.js";
import { testFixture, TOKENS } from "./support/fixture.js";
import { watchOutput } from "./support/server-process.js";

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
      inboxSize: 1000,
      inboxDays: 7,
      inboxBodyBytes: 262144,
      appUrl: "http://127.0.0.1:8787",
      viewUrl: "http://127.0.0.1:8787",
      log: "json",
      metrics: false,
      metricsToken: null,
      apiRatePerSecond: 20,
      drainTimeoutSeconds: 10,
      storageTimeoutSeconds: 10,
      upstreamTimeoutSeconds: 15,
      rateLimitFailOpen: false,
      adminToken: null,
    });
  });

  it("takes an admin token of 24 or more printable characters, and refuses a shorter one", () => {
    expect(parseServerArgs(["--admin-token", "a".repeat(24)], defaults).adminToken).toBe("a".repeat(24));
    expect(() => parseServerArgs(["--admin-token", "a".repeat(23)], defaults)).toThrow(
      "--admin-token must be at least 24 printable characters without spaces",
    );
  });

  it("takes every flag", () => {
    const config = parseServerArgs(
      [
        "--fixture",
        "/f.json",
        "--port",
        "9000",
        "--host",
        "0.0.0.0",
        "--db",
        ":memory:",
        "--redis",
        "redis://127.0.0.1:6379",
        "--now",
        "2026-11-01T12:00:00Z",
        "--audit-lag",
        "2",
        "--webhook-rate",
        "10",
        "--app-url",
        "https://bi.example.com/",
        "--inbox-size",
        "50",
        "--inbox-days",
        "2",
        "--inbox-body-bytes",
        "1024",
        "--view-url",
        "https://view.example.com",
        "--log",
        "none",
        "--metrics",
        "--api-rate",
        "2.5",
        "--drain-timeout",
        "30",
        "--storage-timeout",
        "0",
        "--upstream-timeout",
        "0.5",
        "--rate-limit-fail-open",
        "--admin-token",
        "admin_token_of_24_chars__",
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
      inboxSize: 50,
      inboxDays: 2,
      inboxBodyBytes: 1024,
      appUrl: "https://bi.example.com",
      viewUrl: "https://view.example.com",
      log: "none",
      metrics: true,
      metricsToken: null,
      apiRatePerSecond: 2.5,
      drainTimeoutSeconds: 30,
      storageTimeoutSeconds: 0,
      upstreamTimeoutSeconds: 0.5,
      rateLimitFailOpen: true,
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
      [["--inbox-size", "0"], /--inbox-size must be between 1 and 1000000, got 0/],
      [["--inbox-days", "400"], /--inbox-days must be between 1 and 365, got 400/],
      [["--inbox-body-bytes", "1.5"], /--inbox-body-bytes must be an integer, got 1.5/],
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

  it("asks for the usage with --help (not a usage error), worded for the command that runs it", () => {
    expect(() => parseServerArgs(["--help"], defaults)).toThrow(HelpRequested);
    expect(() => parseServerArgs(["--port", "1", "--help"], defaults)).not.toThrow(UsageError);
    expect(usage("npx dataport")).toMatch(
      /^usage: npx dataport \[--fixture FILE\] \[--port 8787\] \[--host 127\.0\.0\.1\]\n {20}\[--db PATH/,
    );
    expect(usage("npm start --")).toContain("[--admin-token TOKEN] [--help]");
  });

  it("--help says what every flag does and its default", () => {
    const text = help("npx dataport", { fixture: "/pkg/demo/space.json", db: ":memory:" });
    const flags = [...new Set([...usage("npx dataport").matchAll(/--[a-z-]+/g)].map((m) => m[0]))];
    const described = text.split("\n").filter((line) => /^  --/.test(line));
    // One line per flag of the usage, each with a description (and a default, but for --help).
    expect(described.map((line) => line.trim().split(" ")[0])).toEqual(flags);
    for (const line of described)
      if (!line.includes("--help")) expect(line, line).toMatch(/^  --\S+(?: \S+)?\s+\S.* \(default: .+\)$/);
    expect(text).toMatch(/--port N\s+the port to listen on; 0 picks a free one \(default: 8787\)/);
    expect(text).toMatch(/--host ADDRESS\s+.* \(default: 127\.0\.0\.1 \(this machine only\)\)/);
    expect(text).toContain("(default: /pkg/demo/space.json)");
    expect(text).toMatch(/--db .* \(default: :memory:\)/);
  });

  it("refuses a --db URL of a scheme it cannot open, quoting the scheme but never the URL", () => {
    const refused: Array<[string, string]> = [
      [
        "postgress://ada:s3cret@db.example.com/app",
        "--db does not know the scheme postgress:// (did you mean postgres://?); give a SQLite file path, :memory:, or a postgres:// URL",
      ],
      [
        "mysql://ada:s3cret@db.example.com/app",
        "--db does not know the scheme mysql://; give a SQLite file path, :memory:, or a postgres:// URL",
      ],
      ["sqlite://data.db", "--db does not know the scheme sqlite:// (for SQLite, give the file path itself); give"],
      ["pg://localhost/app", "--db does not know the scheme pg:// (did you mean postgres://?)"],
    ];
    for (const [db, message] of refused) {
      let error: unknown;
      try {
        parseServerArgs(["--db", db], defaults);
      } catch (caught) {
        error = caught;
      }
      expect(error, db).toBeInstanceOf(UsageError);
      expect((error as Error).message).toContain(message);
      expect((error as Error).message).not.toContain("s3cret");
    }
    for (const db of [
      ":memory:",
      "./data/app.sqlite",
      "/var/lib/dataport.sqlite",
      "postgres://u@h/db",
      "postgresql://u@h/db?schema=x",
      "C:\\data\\dataport.sqlite",
    ]) {
      expect(parseServerArgs(["--db", db], defaults).db, db).toBe(db);
    }
    // A scheme in capitals is still PostgreSQL, and the store is chosen by the lower-case form.
    expect(parseServerArgs(["--db", "POSTGRES://u@h/db"], defaults).db).toBe("postgres://u@h/db");
  });

  it("checks --host itself, so a bad host is not reported as a bad --app-url", () => {
    for (const host of ["bad host", "http://localhost", "localhost:8787", "exa_mple.com", "dash-.example.com"]) {
      expect(() => parseServerArgs(["--host", host], defaults), host).toThrow(
        `--host must be an IP address or a host name (127.0.0.1, 0.0.0.0, ::1, localhost), got ${JSON.stringify(host)}`,
      );
    }
    for (const host of ["127.0.0.1", "0.0.0.0", "::1", "::", "localhost", "api.example.com", "fe80::1"]) {
      expect(parseServerArgs(["--host", host], defaults).host, host).toBe(host);
    }
    expect(parseServerArgs(["--host", "::1", "--port", "9"], defaults).appUrl).toBe("http://[::1]:9");
  });
});

describe("example server", () => {
  const io = (files: Record<string, string>) => ({ fs: Volume.fromJSON(files) as never, env: {} });

  it("serves a fixture read through the injected fs, with --now and --view-url applied", async () => {
    const config = {
      ...parseServerArgs(["--db", ":memory:", "--port", "0", "--now", "2026-11-01T12:00:00Z"], {
        fixture: "/space.json",
        db: ":memory:",
      }),
    };
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

  const memory = (...flags: string[]) =>
    parseServerArgs(["--db", ":memory:", "--log", "none", ...flags], { fixture: "/space.json", db: ":memory:" });
  const demo = () => io({ "/space.json": JSON.stringify(testFixture()) });

  it("says which flag to change when the port is busy", async () => {
    const busy = await listen(createServer());
    try {
      const port = String(portOf(busy));
      const error = await startServer(memory("--port", port), demo()).catch((caught: unknown) => caught);
      expect(error).toBeInstanceOf(StartError);
      expect((error as Error).message).toBe(
        `port ${port} is in use; pass --port (another port, or 0 for any free one)`,
      );
    } finally {
      busy.close();
    }
  });

  it("says which flag to change when the host is not this machine's or does not resolve", async () => {
    // 203.0.113.1 is TEST-NET-3: never an address of this machine.
    await expect(startServer(memory("--port", "0", "--host", "203.0.113.1"), demo())).rejects.toThrow(
      new StartError(
        "203.0.113.1 is not an address of this machine; pass --host (127.0.0.1: this machine only, 0.0.0.0: every interface)",
      ),
    );
    await expect(startServer(memory("--port", "0", "--host", "no-such-host.invalid"), demo())).rejects.toThrow(
      /^the host name no-such-host\.invalid does not resolve; pass --host/,
    );
  });

  it("refuses to start when Redis or PostgreSQL cannot be reached, naming the flag and leaving the password out", async () => {
    const port = await freePort();
    await expect(
      startServer(memory("--port", "0", "--redis", `redis://:hunter2@127.0.0.1:${port}?prefix=x`), demo()),
    ).rejects.toThrow(
      new StartError(
        `cannot reach Redis at redis://127.0.0.1:${port} (--redis): connect ECONNREFUSED 127.0.0.1:${port}`,
      ),
    );
    const config = { ...memory("--port", "0"), db: `postgres://ada:hunter2@127.0.0.1:${port}/test?schema=x` };
    await expect(startServer(config, demo())).rejects.toThrow(
      new StartError(
        `cannot reach PostgreSQL at postgres://127.0.0.1:${port}/test (--db): connect ECONNREFUSED 127.0.0.1:${port}`,
      ),
    );
  });

  it("gives up on a Redis or PostgreSQL that accepts the connection but never answers, after the check's timeout", async () => {
    const silent = await listen(createServer(() => {}));
    try {
      const port = portOf(silent);
      const started = Date.now();
      await expect(checkRedis(`redis://127.0.0.1:${port}`, 300)).rejects.toThrow(
        new StartError(`cannot reach Redis at redis://127.0.0.1:${port} (--redis): no answer within 0.3 s`),
      );
      await expect(checkPostgres(`postgres://u@127.0.0.1:${port}/db`, 300)).rejects.toThrow(
        new StartError(`cannot reach PostgreSQL at postgres://127.0.0.1:${port}/db (--db): no answer within 0.3 s`),
      );
      expect(Date.now() - started).toBeLessThan(3_000);
    } finally {
      silent.close();
    }
  });

  it("passes the check of the Redis and PostgreSQL of this machine", async () => {
    await expect(checkRedis("redis://127.0.0.1:6379?prefix=check")).resolves.toBeUndefined();
    await expect(checkPostgres("postgres://postgres@127.0.0.1:5432/test?schema=check")).resolves.toBeUndefined();
  });

  it("refuses a bad fixture before listening", async () => {
    const fixture = testFixture();
    fixture.apiKeys[0]!.allowlist.tables.push("tbl_missing");
    const config = parseServerArgs(["--db", ":memory:", "--port", "0"], { fixture: "/space.json", db: ":memory:" });
    await expect(startServer(config, io({ "/space.json": JSON.stringify(fixture) }))).rejects.toThrow(FixtureError);
    await expect(startServer(config, io({ "/space.json": JSON.stringify(fixture) }))).rejects.toThrow(
      "$.apiKeys[0].allowlist.tables[1]",
    );
  });
});

describe("example server process", () => {
  function run(args: string[]) {
    const child = spawn(process.execPath, ["--import", "tsx", "examples/server/main.ts", ...args], {
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d) => (stdout += d));
    child.stderr.on("data", (d) => (stderr += d));
    const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
    return { child, exited, out: () => stdout, err: () => stderr };
  }

  it("prints the usage on stdout and exits 0 with --help", async () => {
    const help = run(["--help"]);
    expect(await help.exited).toBe(0);
    expect(help.out()).toMatch(/^usage: npm start -- \[--fixture FILE\]/);
    expect(help.out()).toMatch(/--api-rate PER_SECOND +requests per second per credential .* \(default: 20\)/);
    expect(help.err()).toBe("");
  });

  it("exits 2 on a --db scheme it cannot open (nothing created), and 1 with the flag to change on a busy port", async () => {
    for (const [db, message] of [
      [
        "postgress://ada:s3cret@127.0.0.1/test",
        "dataport: --db does not know the scheme postgress:// (did you mean postgres://?)",
      ],
      ["mysql://127.0.0.1/test", "dataport: --db does not know the scheme mysql://;"],
    ]) {
      const refused = run(["--db", db!]);
      expect(await refused.exited, db).toBe(2);
      expect(refused.err()).toContain(message);
      expect(refused.err()).not.toContain("s3cret");
    }
    // Before, the misspelt URL became a SQLite file: a folder "postgress:" appeared in the working directory.
    expect(existsSync("postgress:")).toBe(false);
    expect(existsSync("mysql:")).toBe(false);
    const busy = await listen(createServer());
    try {
      const port = String(portOf(busy));
      const server = run(["--db", ":memory:", "--port", port]);
      expect(await server.exited).toBe(1);
      expect(server.err()).toBe(
        `dataport: port ${port} is in use; pass --port (another port, or 0 for any free one)\n`,
      );
    } finally {
      busy.close();
    }
  });

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
    const res = await fetch(`${url}/api/v1/me`, {
      headers: { authorization: "Bearer dp_demo_full_access_0000000000001" },
    });
    expect((await res.json()).name).toBe("Warehouse sync");
    server.child.kill("SIGTERM");
    expect(await server.exited).toBe(0);
  });

  it("stops on SIGTERM to npm start (npm's shell does not pass it on; the server sees the shell go)", async () => {
    const npm = spawn("npm", ["start", "--", "--db", ":memory:", "--port", "0", "--log", "none"], {
      stdio: ["ignore", "pipe", "pipe"],
    });
    const { url, output, closed } = watchOutput(npm, { timeoutMs: 20_000 });
    const base = await url;
    expect(
      (await fetch(`${base}/api/v1/me`, { headers: { authorization: "Bearer dp_demo_full_access_0000000000001" } }))
        .status,
    ).toBe(200);
    npm.kill("SIGTERM");
    await closed; // npm, its shell and the server held the output pipe: all have exited
    expect(output()).toContain("dataport: npm stopped, draining");
    expect(output()).toContain("dataport: drained, store closed");
    await expect(fetch(`${base}/api/v1/me`)).rejects.toThrow();
  });
});

describe("the examples on the runtime each names", () => {
  function node(script: string, args: string[] = []) {
    const child = spawn(process.execPath, ["--import", "tsx", script, ...args], { stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d) => (stdout += d));
    child.stderr.on("data", (d) => (stderr += d));
    return new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) =>
      child.on("close", (code) => resolve({ code, stdout, stderr })),
    );
  }

  it("says which runtime an example needs when started on Node, and exits 2", async () => {
    const runs = await Promise.all([
      node("examples/hono/server.ts"),
      node("examples/bun/server.ts"),
      node("examples/deno/server.ts"),
    ]);
    expect(runs.map((r) => [r.code, r.stderr.trim()])).toEqual([
      [2, "dataport: this example runs on Bun: npx bun examples/hono/server.ts"],
      [2, "dataport: this example runs on Bun: npx bun examples/bun/server.ts"],
      [
        2,
        "dataport: this example runs on Deno: npx deno run --sloppy-imports --allow-net --allow-read --allow-env examples/deno/server.ts",
      ],
    ]);
  });

  it("gives the Express example (Node) --help and flag errors like the others", async () => {
    const [help, bad] = await Promise.all([
      node("examples/express/server.ts", ["--help"]),
      node("examples/express/server.ts", ["--port", "x"]),
    ]);
    expect([help.code, help.stdout.split("\n")[0]]).toEqual([
      0,
      "usage: npx tsx examples/express/server.ts [--fixture FILE] [--db FILE] [--port 8787] [--host 127.0.0.1] [--now ISO_INSTANT]",
    ]);
    expect([bad.code, bad.stderr.trim()]).toEqual([2, "dataport: --port must be an integer, got x"]);
  });
});

/** Listen on a free port of 127.0.0.1. */
function listen(server: Server): Promise<Server> {
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve(server)));
}

function portOf(server: Server): number {
  return (server.address() as { port: number }).port;
}

/** A port nothing listens on (taken, then released). */
async function freePort(): Promise<number> {
  const server = await listen(createServer());
  const port = portOf(server);
  await new Promise((resolve) => server.close(resolve));
  return port;
}
