/**
 * Graceful drain of the example server (issue 10 §4): on SIGTERM it stops
 * accepting connections, lets a request already in flight finish — here a
 * webhook whose body is still arriving — and exits 0 with the row committed.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Volume } from "memfs";
import { afterAll, describe, expect, it } from "vitest";
import { parseServerArgs } from "../../examples/server/cli.js";
import { startServer } from "../../examples/server/server.js";
import type { Row } from "../../src/domain/model.js";
import { createSqliteStorage } from "../../src/sqlite/index.js";
import { testFixture } from "../support/fixture.js";

const root = new URL("../..", import.meta.url).pathname;
const dir = mkdtempSync(join(tmpdir(), "dataport-drain-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

interface Server {
  child: ChildProcess;
  url: string;
  port: number;
  output(): string;
  exited: Promise<number | null>;
}

async function start(args: string[]): Promise<Server> {
  const child = spawn(
    process.execPath,
    ["--import", "tsx", join(root, "examples/server/main.ts"), "--port", "0", "--log", "none", ...args],
    {
      cwd: root,
      stdio: ["ignore", "pipe", "pipe"],
    },
  );
  let output = "";
  child.stdout!.on("data", (d: Buffer) => (output += d.toString()));
  child.stderr!.on("data", (d: Buffer) => (output += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  const url = await waitFor(
    () => /listening on (http:\/\/\S+)/.exec(output)?.[1],
    30_000,
    () => `server did not start:\n${output}`,
  );
  return { child, url, port: Number(new URL(url).port), output: () => output, exited };
}

async function waitFor<T>(
  probe: () => T | undefined | Promise<T | undefined>,
  timeoutMs: number,
  message: () => string,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const found = await probe();
    if (found !== undefined) return found;
    if (Date.now() > deadline) throw new Error(message());
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** A webhook POST whose headers and first body bytes are sent now, the rest when `finish` is called. */
function slowDelivery(port: number, body: string, splitAt: number) {
  const socket = net.connect(port, "127.0.0.1");
  let received = "";
  socket.on("data", (d) => (received += d.toString()));
  const closed = new Promise<void>((resolve) => socket.once("close", () => resolve()));
  socket.on("error", () => {});
  socket.write(
    `POST /api/webhooks/wh_demo_shop_events HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n` +
      `Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body.slice(0, splitAt)}`,
  );
  return {
    connected: new Promise<void>((resolve) => socket.once("connect", () => resolve())),
    finish: () => socket.write(body.slice(splitAt)),
    response: () => received,
    closed,
  };
}

async function refusesConnections(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const probe = net.connect(port, "127.0.0.1");
    probe.once("connect", () => {
      probe.destroy();
      resolve(false);
    });
    probe.once("error", (error: NodeJS.ErrnoException) => resolve(error.code === "ECONNREFUSED"));
  });
}

async function storedRows(db: string): Promise<Row[]> {
  const store = createSqliteStorage({ path: db });
  try {
    const page = await store.rows.readDatasetRows("ds_shop_events", {
      offset: 0,
      limit: null,
      columns: null,
      filters: null,
    });
    const rows: Row[] = [];
    for await (const row of page.rows) rows.push({ ...row });
    return rows;
  } finally {
    await store.close();
  }
}

describe("graceful drain of the example server on SIGTERM", () => {
  it("stops accepting connections, finishes a webhook in flight, commits it and exits 0", async () => {
    const db = join(dir, "drain.sqlite");
    const server = await start(["--db", db, "--drain-timeout", "20"]);
    const body = JSON.stringify({ drain_probe: "in-flight-during-sigterm", padding: "x".repeat(200) });
    const delivery = slowDelivery(server.port, body, 20);
    await delivery.connected;
    // Let the server start on the request (headers parsed, body being read) before the signal.
    await new Promise((r) => setTimeout(r, 300));
    server.child.kill("SIGTERM");
    await waitFor(
      () => (/SIGTERM, draining/.test(server.output()) ? true : undefined),
      10_000,
      () => `no drain line:\n${server.output()}`,
    );
    // New connections are refused while the in-flight request still runs.
    expect(
      await waitFor(
        async () => ((await refusesConnections(server.port)) ? true : undefined),
        5_000,
        () => "still accepting",
      ),
    ).toBe(true);
    expect(server.child.exitCode).toBeNull();

    delivery.finish();
    await delivery.closed;
    const response = delivery.response();
    expect(response).toMatch(/^HTTP\/1\.1 200 /);
    const ack = JSON.parse(response.slice(response.indexOf("\r\n\r\n") + 4)) as {
      ok: boolean;
      id: string;
      duplicate: boolean;
    };
    expect(ack).toMatchObject({ ok: true, duplicate: false });
    expect(await server.exited).toBe(0);
    expect(server.output()).toContain("drained, store closed");

    const rows = await storedRows(db);
    const stored = rows.filter((r) => r._id === ack.id);
    expect(stored).toHaveLength(1);
    expect(stored[0]!.drain_probe).toBe("in-flight-during-sigterm");
  }, 60_000);

  it("cuts a request that outlives --drain-timeout and still exits 0", async () => {
    const server = await start(["--db", ":memory:", "--drain-timeout", "1"]);
    const delivery = slowDelivery(server.port, JSON.stringify({ never: "finished" }), 5);
    await delivery.connected;
    await new Promise((r) => setTimeout(r, 300));
    const signalled = Date.now();
    server.child.kill("SIGTERM");
    expect(await server.exited).toBe(0);
    const took = Date.now() - signalled;
    expect(took).toBeGreaterThanOrEqual(900);
    expect(took).toBeLessThan(10_000);
    await delivery.closed;
    expect(delivery.response()).toBe("");
  }, 60_000);
});

describe("the example server's close()", () => {
  it("turns readiness to 503 draining as soon as the drain starts", async () => {
    const config = parseServerArgs(["--db", ":memory:", "--port", "0", "--log", "none", "--drain-timeout", "5"], {
      fixture: "/space.json",
      db: ":memory:",
    });
    const running = await startServer(config, {
      fs: Volume.fromJSON({ "/space.json": JSON.stringify(testFixture()) }) as never,
      env: {},
    });
    const before = await running.api.fetch(new Request("http://x/api/health/ready"));
    expect(before.status).toBe(200);
    const closing = running.close();
    expect(running.api.draining).toBe(true);
    const during = await running.api.fetch(new Request("http://x/api/health/ready"));
    expect(during.status).toBe(503);
    expect(await during.json()).toEqual({
      status: "draining",
      checks: { storage: "ok", rateLimiter: "ok", cache: "ok" },
    });
    await closing;
  });
});
