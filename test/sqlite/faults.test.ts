/**
 * A SQLite store that cannot write says so: another process holding the
 * write lock past busyTimeoutMs, a full disk, a connection that refuses
 * writes answer 503 `storage_unavailable` with Retry-After (never 500, never
 * a blocked event loop), readiness reports the store unavailable until a
 * write commits again, and the store recovers alone.
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { closeSync, mkdirSync, mkdtempSync, openSync, rmSync, writeSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import type { Row } from "../../src/domain/model.js";
import { createSqliteStorage, type SqliteStorage } from "../../src/sqlite/index.js";
import { webhookFixture } from "../../src/testing/conformance/webhooks.js";
import { setup as baseSetup } from "../support/api.js";
import { TOKENS } from "../support/fixture.js";
import { liveWhile } from "./support/live-probe.js";
import { OPEN_FILE } from "./support/other-process.js";

const root = new URL("../..", import.meta.url).pathname;
const dir = mkdtempSync(join(tmpdir(), "dataport-sqlite-faults-"));
const stores: SqliteStorage[] = [];
const children: ChildProcess[] = [];
const mounts: string[] = [];
afterAll(async () => {
  for (const child of children) if (child.exitCode === null) child.kill("SIGKILL");
  await Promise.all(stores.map((s) => s.close().catch(() => {})));
  for (const mount of mounts) execFileSync("umount", [mount]);
  rmSync(dir, { recursive: true, force: true });
});

let n = 0;
function store(path: string, options: Partial<Parameters<typeof createSqliteStorage>[0]> = {}): SqliteStorage {
  const storage = createSqliteStorage({ path, log: (message) => logged.push(message), ...options });
  stores.push(storage);
  return storage;
}

/** What the API logs (a usage record or an audit event that could not be stored), kept out of the test output. */
const logged: string[] = [];
const setup = (storage: SqliteStorage) =>
  baseSetup({ storage, fixture: webhookFixture(), logger: (message) => logged.push(message) });
type Call = Awaited<ReturnType<typeof setup>>["call"];

const writeRow = (call: Call, region = "EMEA") =>
  call("POST", "/api/v1/tables/tbl_targets/rows", { token: TOKENS.sync, body: { region, target: 1 } });
const deliver = (call: Call) => call("POST", "/api/webhooks/hook-open", { body: { n: 1 } });
const ready = (call: Call) => call("GET", "/api/health/ready");

function expectUnavailable(
  res: { status: number; json: { error: { code: string } }; headers: Headers },
  retryAfter: string,
) {
  expect([res.status, res.json.error.code, res.headers.get("retry-after")]).toEqual([
    503,
    "storage_unavailable",
    retryAfter,
  ]);
}

/** Another process on the file holding SQLite's write lock (an open IMMEDIATE transaction) until `release()`. */
async function holdWriteLock(path: string): Promise<{ release(): Promise<void> }> {
  const script = `${OPEN_FILE}
    const db = open(process.argv[process.argv.length - 1]);
    db.exec("BEGIN IMMEDIATE");
    console.log("locked");
    process.stdin.once("data", () => { db.exec("COMMIT"); db.close(); process.exit(0); });`;
  const child = spawn(process.execPath, ["-e", script, path], { cwd: root, stdio: ["pipe", "pipe", "inherit"] });
  children.push(child);
  await new Promise<void>((resolve, reject) => {
    child.stdout!.on("data", (chunk: Buffer) => chunk.toString().includes("locked") && resolve());
    child.once("exit", (code) => reject(new Error(`the lock holder exited with ${code}`)));
  });
  return {
    release: async () => {
      const exited = new Promise((resolve) => child.once("exit", resolve));
      child.stdin!.write("go\n");
      await exited;
    },
  };
}

/**
 * A directory on a file system of `bytes` (a tmpfs of its own, so a full
 * disk is a real one), or null where this process may not mount one.
 */
function smallDisk(bytes: number): string | null {
  const mount = join(dir, `disk-${++n}`);
  mkdirSync(mount);
  try {
    execFileSync("mount", ["-t", "tmpfs", "-o", `size=${bytes}`, "tmpfs", mount], { stdio: "ignore" });
  } catch {
    return null;
  }
  mounts.push(mount);
  return mount;
}

/** Takes every free byte of the file system `mountDir` is on, in a file `release` deletes. */
function fillDisk(mountDir: string): { release(): void } {
  const filler = join(mountDir, "filler");
  const fd = openSync(filler, "w");
  const chunk = Buffer.alloc(64 * 1024, 1);
  try {
    for (let size = chunk.length; size >= 1;) {
      try {
        writeSync(fd, chunk, 0, size);
      } catch {
        size = Math.floor(size / 2);
      }
    }
  } finally {
    closeSync(fd);
  }
  return { release: () => rmSync(filler) };
}

/** Rows for a replace: enough for several staging transactions. */
function* many(count: number): Generator<Row> {
  for (let i = 0; i < count; i++) yield { id: i, note: `row ${i} of a replace that does not fit on the disk` };
}
const replace = (storage: SqliteStorage, count: number) =>
  storage.rows.writeDatasetRows({
    datasetId: "ds_orders",
    mode: "replace",
    rows: (async function* () {
      yield* many(count);
    })(),
    columns: () => [
      { name: "id", type: "number" },
      { name: "note", type: "string" },
    ],
    updatedAt: "2026-11-01T00:00:00.000Z",
  });

describe("sqlite: a store that cannot write says so", () => {
  it("another process holding the write lock: writes wait without blocking the event loop, then 503; ready says so until it goes", async () => {
    const path = join(dir, `locked-${++n}.db`);
    logged.length = 0;
    const storage = store(path, { busyTimeoutMs: 600 });
    const { call } = await setup(storage);
    const lock = await holdWriteLock(path);

    const write = writeRow(call);
    const answered = await liveWhile(call, write);
    expectUnavailable(await write, "1");
    // The wait was a backoff between other requests, not a busy wait on the loop.
    expect(answered).toBeGreaterThanOrEqual(3);
    expectUnavailable(await deliver(call), "1");
    const notReady = await ready(call);
    expect([notReady.status, notReady.json.checks.storage]).toEqual([503, "error"]);
    // Reads go on meanwhile (WAL: the lock is the writers').
    expect((await call("GET", "/api/v1/datasets/ds_orders/rows?maxRows=1", { token: TOKENS.sync })).status).toBe(200);

    await lock.release();
    expect((await ready(call)).status).toBe(200);
    expect((await writeRow(call)).status).toBe(201);
    expect((await deliver(call)).status).toBe(200);
    // The operator reads it once, and once that it is over.
    expect(logged.filter((line) => line.startsWith("SQLite"))).toEqual([
      "SQLite cannot write (another process held the write lock for 600 ms); answering 503 storage_unavailable until a write succeeds",
      "SQLite writes again",
    ]);
  }, 60_000);

  it("a write that meets the lock commits once it is released within busyTimeoutMs", async () => {
    const path = join(dir, `released-${++n}.db`);
    const storage = store(path, { busyTimeoutMs: 10_000 });
    const { call } = await setup(storage);
    const lock = await holdWriteLock(path);
    const write = writeRow(call, "written once the lock was released");
    const delivery = deliver(call);
    await new Promise((resolve) => setTimeout(resolve, 300));
    await lock.release();
    expect((await write).status).toBe(201);
    expect((await delivery).status).toBe(200);
    const rows = await call("GET", "/api/v1/tables/tbl_targets/rows", { token: TOKENS.sync });
    expect(
      rows.json.data.filter((r: { region?: string }) => r.region === "written once the lock was released"),
    ).toHaveLength(1);
  }, 60_000);

  it("a full disk: writes, deliveries and replaces answer 503 at once, ready says so, and all recover when space comes back", async () => {
    const disk = smallDisk(32 * 1024 * 1024);
    const path = disk ? join(disk, "full.db") : join(dir, `full-${++n}.db`);
    const storage = store(path);
    const { call } = await setup(storage);
    // Where no disk can be mounted, SQLite's page limit makes the same SQLITE_FULL.
    const full = disk ? fillDisk(disk) : pageLimit(storage);
    if (!disk) console.info("sqlite faults: no tmpfs could be mounted here; SQLITE_FULL comes from max_page_count");

    expectUnavailable(await writeRow(call), "10");
    expectUnavailable(await deliver(call), "10");
    const notReady = await ready(call);
    expect([notReady.status, notReady.json.checks.storage]).toEqual([503, "error"]);
    // A replace fails fast, and so does the next (it does not wait for the first one's claim to expire).
    for (let attempt = 0; attempt < 2; attempt++) {
      const started = performance.now();
      const failed = await replace(storage, 30_000).catch((error: unknown) => error);
      expect((failed as { status?: number; code?: string }).code).toBe("storage_unavailable");
      expect(performance.now() - started).toBeLessThan(10_000);
    }
    // The rows as they were.
    expect((await call("GET", "/api/v1/datasets/ds_orders", { token: TOKENS.sync })).json.rowCount).toBeGreaterThan(0);

    full.release();
    expect((await ready(call)).status).toBe(200);
    expect((await writeRow(call)).status).toBe(201);
    expect((await deliver(call)).status).toBe(200);
    expect(await replace(storage, 30_000)).toEqual({ rowCount: 30_000 });
  }, 120_000);

  it("the calls of every request report their own faults: a closed store answers 503 there too", async () => {
    const storage = store(join(dir, `closed-${++n}.db`));
    await setup(storage);
    storage.db.close();
    for (const call of [
      () => storage.credentials.findApiKeyWithTeam!("a-token-hash"),
      () => storage.catalog.getDataset("ds_orders"),
      () => storage.rows.readDatasetRows("ds_orders", { offset: 0, limit: 10, columns: null, filters: null }),
      () =>
        storage.rows.readDatasetRows("ds_orders", {
          offset: 0,
          limit: 10,
          columns: null,
          filters: null,
          sort: [{ column: "id", descending: true }],
        }),
      () => storage.webhooks.getWebhookEndpoint("hook-open"),
    ]) {
      const failed = await call().then(
        () => null,
        (error: unknown) => error,
      );
      expect(failed, String(call)).toMatchObject({ status: 503, code: "storage_unavailable" });
    }
  }, 60_000);

  it("a connection that refuses writes (SQLITE_READONLY): 503 and not ready until it writes again", async () => {
    const storage = store(join(dir, `readonly-${++n}.db`));
    const { call } = await setup(storage);
    storage.db.pragma("query_only = 1");
    expectUnavailable(await writeRow(call), "10");
    expectUnavailable(await deliver(call), "10");
    expect((await ready(call)).status).toBe(503);
    storage.db.pragma("query_only = 0");
    expect((await ready(call)).status).toBe(200);
    expect((await writeRow(call)).status).toBe(201);
  }, 60_000);
});

/** No page beyond those the file has: a write that needs one fails with SQLITE_FULL until `release()`. */
function pageLimit(storage: SqliteStorage): { release(): void } {
  const pages = storage.db.pragma("page_count", { simple: true }) as number;
  storage.db.pragma(`max_page_count = ${pages}`);
  return { release: () => storage.db.pragma("max_page_count = 4294967294") };
}
