/**
 * Reads that scan run off the event loop (reader threads), and the storage
 * deadline ends them: the request answers 503 with Retry-After while the
 * event loop goes on answering others.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { ApiError } from "../../src/base/api-error.js";
import type { RowQuery } from "../../src/ports/storage/rows.js";
import { createSqliteStorage, type SqliteStorage } from "../../src/sqlite/index.js";
import { setup } from "../support/api.js";
import { TOKENS } from "../support/fixture.js";
import { fillRows } from "./support/filled-dataset.js";
import { liveWhile } from "./support/live-probe.js";

const dir = mkdtempSync(join(tmpdir(), "dataport-sqlite-off-loop-"));
let n = 0;
const stores: SqliteStorage[] = [];
afterAll(async () => {
  await Promise.all(stores.map((s) => s.close()));
  rmSync(dir, { recursive: true, force: true });
});

function store(options: Partial<Parameters<typeof createSqliteStorage>[0]> = {}): SqliteStorage {
  const storage = createSqliteStorage({ path: join(dir, `store-${++n}.db`), ...options });
  stores.push(storage);
  return storage;
}

/**
 * Rows enough that sorting them by an unindexed column takes far longer than the deadlines below, on every driver: 600,000
 * took about 400 ms warm on better-sqlite3 but under 250 ms on bun:sqlite on a quiet 2-core machine, which then answered
 * a read that had to be ended.
 */
const MANY = 1_000_000;
/** The deadline of the reads that must be ended (a sort finishing within it would answer 200). */
const DEADLINE_MS = 250;
const SORTED = "/api/v1/datasets/ds_orders/rows?sort=name&maxRows=100";

const sortedBy = (column: string): RowQuery => ({
  offset: 0,
  limit: 5,
  columns: null,
  filters: null,
  sort: [{ column, descending: false }],
});

/**
 * The reader threads started (from the TypeScript sources a thread takes a while): a read that goes off the loop
 * answers.
 */
async function threadsStarted(storage: SqliteStorage, datasetId: string): Promise<void> {
  for (let tries = 0; ; tries++) {
    try {
      await storage.rows.readDatasetRows(datasetId, { ...sortedBy("id"), limit: 1 });
      return;
    } catch (error) {
      if (tries > 50 || !(error instanceof ApiError && error.status === 503)) throw error;
    }
  }
}

describe("sqlite: reads that scan run on reader threads", () => {
  it("a sort past callTimeoutMs is ended with 503 and Retry-After while the event loop answers /api/health/live", async () => {
    // One reader thread, and every read with a sort sent to it: the thread must be free again right after the 503.
    const storage = store({ callTimeoutMs: DEADLINE_MS, readerThreads: 1, loopBudgetMs: 0 });
    const { call } = await setup({ storage });
    fillRows(storage, "ds_orders", MANY);
    await threadsStarted(storage, "ds_stores");

    const slow = call("GET", SORTED, { token: TOKENS.sync });
    const answered = await liveWhile(call, slow);
    const res = await slow;
    expect(res.status).toBe(503);
    expect(res.json.error.code).toBe("storage_unavailable");
    expect(res.headers.get("retry-after")).toBe("1");
    // The event loop answered while the sort ran on its thread (on the loop, none would have come back before it
    // ended).
    expect(answered).toBeGreaterThanOrEqual(2);

    // The statement was interrupted at its deadline, not left running: the same read at the store says so, and the
    // one thread answers the next read at once (ds_stores, a few rows, sorted: on the thread too).
    const ended = await storage.rows.readDatasetRows("ds_orders", sortedBy("name")).then(
      () => null,
      (error: unknown) => error,
    );
    expect(ended).toBeInstanceOf(ApiError);
    expect(((ended as ApiError).cause as Error).message).toBe("the statement was ended at its deadline");
    const next = await call("GET", "/api/v1/datasets/ds_stores/rows?sort=city&maxRows=2", { token: TOKENS.sync });
    expect(next.status).toBe(200);
  }, 60_000);

  it("an input-table page sorted past callTimeoutMs is ended with 503 too, and the loop answers meanwhile", async () => {
    const storage = store({ callTimeoutMs: DEADLINE_MS });
    const { call } = await setup({ storage });
    // tbl_targets without declared columns (so without row indexes); its rows straight into the file (the API writes
    // them one by one).
    const targets = (await storage.tables.getTable("tbl_targets"))!;
    await storage.tables.putTable({ ...targets, columns: [] });
    storage.db
      .prepare(
        `WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i + 1 < ?)
         INSERT INTO table_rows (table_id, row_id, data) SELECT 'tbl_targets', 'big_' || i, json_object('_id', 'big_' || i, 'name', 'n' || ((i * 7919) % 1000003)) FROM n`,
      )
      .run(MANY);
    const slow = call("GET", "/api/v1/tables/tbl_targets/rows?sort=name&maxRows=10", { token: TOKENS.sync });
    const answered = await liveWhile(call, slow);
    const res = await slow;
    expect([res.status, res.json.error?.code, res.headers.get("retry-after")]).toEqual([
      503,
      "storage_unavailable",
      "1",
    ]);
    expect(answered).toBeGreaterThanOrEqual(2);
  }, 60_000);

  it("a read with conditions on a large dataset goes to a reader thread and answers what the event loop would", async () => {
    const threads = store();
    const loop = store({ readerThreads: 0 });
    for (const storage of [threads, loop]) {
      await setup({ storage });
      fillRows(storage, "ds_orders", 200_000);
    }
    const queries: RowQuery[] = [
      { offset: 3, limit: 4, columns: ["id", "name"], filters: null, sort: [{ column: "name", descending: true }] },
      {
        offset: 0,
        limit: 3,
        columns: null,
        filters: null,
        where: { kind: "test", column: "amount", op: "lt", operand: 50 },
      },
      // Streamed (more than one page), with a JSON filter only JS can check, after a cursor.
      {
        offset: 2,
        limit: 1500,
        columns: null,
        filters: { name: "n7919" },
        sort: [{ column: "amount", descending: false }],
      },
      {
        offset: 0,
        limit: null,
        columns: null,
        filters: null,
        where: { kind: "test", column: "id", op: "gte", operand: 199_000 },
        after: { values: [], position: 199_500 },
      },
    ];
    for (const query of queries) {
      const read = async (storage: SqliteStorage) => {
        const page = await storage.rows.readDatasetRows("ds_orders", query);
        const rows = [];
        for await (const row of page.rows) rows.push(row);
        return { totalRows: page.totalRows, rows, lastKey: page.lastKey() };
      };
      const [off, on] = await Promise.all([read(threads), read(loop)]);
      expect(off, JSON.stringify(query)).toEqual(on);
    }
    // The same answers with a count remembered (a cursor's next page does not count again).
    const again = await threads.rows.readDatasetRows("ds_orders", queries[1]!);
    expect(again.totalRows).toBe((await loop.rows.readDatasetRows("ds_orders", queries[1]!)).totalRows);
  }, 60_000);

  it("on :memory: (no reader threads) a read past callTimeoutMs is ended on the event loop with 503", async () => {
    const storage = createSqliteStorage({ path: ":memory:", callTimeoutMs: 200 });
    stores.push(storage);
    const { call } = await setup({ storage });
    fillRows(storage, "ds_orders", MANY);
    const res = await call("GET", SORTED, { token: TOKENS.sync });
    expect(res.status).toBe(503);
    expect(res.json.error.code).toBe("storage_unavailable");
    expect(res.headers.get("retry-after")).toBe("1");
    // The store goes on: a short read answers.
    expect(
      (await call("GET", "/api/v1/datasets/ds_orders/rows?maxRows=2", { token: TOKENS.sync })).json.data,
    ).toHaveLength(2);
  }, 60_000);

  it("a reader thread that cannot open the file (deleted under the store) answers 503, not a 500", async () => {
    const path = join(dir, `gone-${++n}.db`);
    const logged: string[] = [];
    const storage = createSqliteStorage({
      path,
      loopBudgetMs: 0,
      log: (message, error) => logged.push(`${message} ${String(error)}`),
    });
    stores.push(storage);
    const { call } = await setup({ storage });
    rmSync(path);
    const res = await call("GET", "/api/v1/datasets/ds_orders/rows?sort=amount&maxRows=2", { token: TOKENS.sync });
    expect(res.status).toBe(503);
    expect(res.json.error.code).toBe("storage_unavailable");
    expect(res.headers.get("retry-after")).toBe("10");
    expect(logged).toEqual([
      "SQLite cannot write (the file failed); answering 503 storage_unavailable until a write succeeds SQLITE_CANTOPEN: unable to open database file",
    ]);
  }, 60_000);
});
