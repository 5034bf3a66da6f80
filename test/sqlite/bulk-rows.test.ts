/**
 * writeDatasetRows on SQLite: rows staged in batches above the window, made
 * visible in one transaction; readers (this connection and another on the
 * file) see the old rows or the new ones, never a mix or a part.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import type { Column, Row } from "../../src/domain/model.js";
import { parseFixture } from "../../src/fixture/load.js";
import type { DatasetRowsWrite } from "../../src/ports/storage.js";
import { rowKey } from "../../src/sqlite/db.js";
import { createSqliteStorage, migrate, MIGRATIONS, type SqliteStorage } from "../../src/sqlite/index.js";
import { conformanceFixture } from "../../src/testing/conformance/fixture.js";

const dir = mkdtempSync(join(tmpdir(), "dataport-sqlite-bulk-"));
let n = 0;
const open: SqliteStorage[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((s) => s.close()));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function file(): string {
  return join(dir, `db-${++n}.sqlite`);
}

function store(path: string): SqliteStorage {
  const s = createSqliteStorage({ path });
  open.push(s);
  return s;
}

async function seeded(path = file()): Promise<SqliteStorage> {
  const s = store(path);
  const fixture = conformanceFixture() as ReturnType<typeof conformanceFixture> & { connections: unknown[] };
  fixture.connections.push({
    id: "conn_hook",
    teamId: "team_ops",
    name: "Shop events",
    type: "webhook",
    config: { endpointId: "ep_shop", signingSecret: null, retainRows: 1_000_000 },
    createdAt: "2026-09-01T00:00:00Z",
  });
  await s.seed(parseFixture(fixture));
  return s;
}

const COLUMNS: Column[] = [
  { name: "v", type: "string" },
  { name: "i", type: "number" },
];

function rowsWrite(
  datasetId: string,
  mode: "replace" | "append",
  rows: AsyncIterable<Row> | Iterable<Row>,
): DatasetRowsWrite {
  return {
    datasetId,
    mode,
    rows: rows as AsyncIterable<Row>,
    columns: () => COLUMNS,
    updatedAt: "2026-11-02T00:00:00.000Z",
  };
}

async function* generate(
  count: number,
  v: string,
  options: { pauseEvery?: number; throwAt?: number; onRow?: (i: number) => Promise<void> | void } = {},
): AsyncGenerator<Row> {
  for (let i = 0; i < count; i++) {
    if (options.throwAt === i) throw new Error(`upstream broke at row ${i}`);
    if (options.pauseEvery && i % options.pauseEvery === 0) await new Promise((r) => setImmediate(r));
    await options.onRow?.(i);
    yield { v, i };
  }
}

async function collect(rows: AsyncIterable<Row>): Promise<Row[]> {
  const out: Row[] = [];
  for await (const row of rows) out.push({ ...row });
  return out;
}

async function all(s: SqliteStorage, datasetId: string): Promise<Row[]> {
  return collect(
    (await s.rows.readDatasetRows(datasetId, { offset: 0, limit: null, columns: null, filters: null })).rows,
  );
}

function seqOf(s: SqliteStorage, datasetId: string): number {
  return (s.db.prepare("SELECT seq FROM datasets WHERE id = ?").get(datasetId) as { seq: number }).seq;
}

/** Every row stored for the dataset at any position (window, staged or not yet swept). */
function storedRows(s: SqliteStorage, datasetId: string): number {
  const seq = seqOf(s, datasetId);
  return (
    s.db
      .prepare("SELECT count(*) AS n FROM dataset_rows WHERE row_key >= ? AND row_key < ?")
      .get(rowKey(seq, 0), rowKey(seq + 1, 0)) as { n: number }
  ).n;
}

/**
 * Runs `check` on the first turn of the event loop at which the dataset has
 * `rowCount` rows: right after the write is published, while its old rows
 * are still being swept (the sweep yields a turn every 10,000 rows).
 */
function onPublished(s: SqliteStorage, datasetId: string, rowCount: number, check: () => Promise<void>): Promise<void> {
  return (async () => {
    for (;;) {
      await new Promise((r) => setImmediate(r));
      if ((await s.catalog.getDataset(datasetId))?.rowCount === rowCount) return check();
    }
  })();
}

function staging(s: SqliteStorage): unknown[] {
  return s.db.prepare("SELECT * FROM dataset_stagings").all();
}

describe("sqlite: streamed bulk row writes", () => {
  it("a streamed replace of 200,000 rows while readers page (here and on another connection) shows the old rows or the new ones, never a mix", async () => {
    const path = file();
    const s = await seeded(path);
    const other = store(path);
    const OLD = 12_000; // more than one sweep transaction deletes: readers also run while old rows are swept
    const NEW = 200_000;
    await s.rows.writeDatasetRows(rowsWrite("ds_orders", "replace", generate(OLD, "old")));
    expect((await s.catalog.getDataset("ds_orders"))?.rowCount).toBe(OLD);

    let done = false;
    const seen = { old: 0, new: 0 };
    let stagedWhileStreaming = -1;
    const page = async (reader: SqliteStorage, k: number) => {
      const offset = (k * 7919) % 2990;
      const result = await reader.rows.readDatasetRows("ds_orders", {
        offset,
        limit: 10,
        columns: null,
        filters: null,
      });
      const rows = await collect(result.rows);
      const v = result.totalRows === OLD ? "old" : "new";
      expect([OLD, NEW]).toContain(result.totalRows);
      expect(rows).toEqual(Array.from({ length: 10 }, (_, j) => ({ v, i: offset + j })));
      const count = (await reader.catalog.getDataset("ds_orders"))!.rowCount;
      expect([OLD, NEW]).toContain(count);
      seen[v]++;
      if (k % 4 !== 0) return;
      // Exactly one row has i = 5, old or new, also while staged rows exist.
      const filtered = await reader.rows.readDatasetRows("ds_orders", {
        offset: 0,
        limit: 10,
        columns: ["i"],
        filters: { i: 5 },
      });
      expect(filtered.totalRows).toBe(1);
      expect(await collect(filtered.rows)).toEqual([{ i: 5 }]);
    };
    const readers = [s, other].map(async (reader) => {
      for (let k = 0; !done; k++) {
        await page(reader, k);
        await new Promise((r) => setImmediate(r));
      }
      await page(reader, 0);
    });

    // A large read on the other connection that starts during the write holds its snapshot: all old.
    const longRead = (
      await other.rows.readDatasetRows("ds_orders", { offset: 1000, limit: null, columns: ["v"], filters: null })
    ).rows[Symbol.asyncIterator]();
    let longFirst: IteratorResult<Row> | null = null;
    // One created during the write but first pulled after it: it reads the window of its snapshot, the new rows
    // (not the old positions, being swept).
    let lateRead: AsyncIterable<Row> | null = null;

    const rows = generate(NEW, "new", {
      pauseEvery: 500,
      onRow: async (i) => {
        if (i === 50_000) longFirst = await longRead.next();
        if (i === 60_000)
          lateRead = (
            await other.rows.readDatasetRows("ds_orders", { offset: 1000, limit: null, columns: ["v"], filters: null })
          ).rows;
        // Rows are written as they come, not collected until the end.
        if (i === 150_000) stagedWhileStreaming = storedRows(other, "ds_orders") - OLD;
      },
    });
    // Old rows not swept yet are not counted: the last old one (swept last) has a twin among the new.
    let unswept = 0;
    const whileSweeping = onPublished(other, "ds_orders", NEW, async () => {
      unswept = storedRows(other, "ds_orders") - NEW;
      const filtered = await other.rows.readDatasetRows("ds_orders", {
        offset: 0,
        limit: 10,
        columns: null,
        filters: { i: OLD - 1 },
      });
      expect(filtered.totalRows).toBe(1);
      expect(await collect(filtered.rows)).toEqual([{ v: "new", i: OLD - 1 }]);
    });
    const result = await s.rows.writeDatasetRows(rowsWrite("ds_orders", "replace", rows));
    done = true;
    await Promise.all([...readers, whileSweeping]);
    expect(unswept).toBe(OLD - 10_000);

    expect(result).toEqual({ rowCount: NEW });
    expect(stagedWhileStreaming).toBeGreaterThanOrEqual(149_000);
    expect(seen.old).toBeGreaterThan(0);
    expect(seen.new).toBeGreaterThan(0);
    expect(longFirst).toEqual({ done: false, value: { v: "old" } });
    const rest: Row[] = [];
    for (let next = await longRead.next(); !next.done; next = await longRead.next()) rest.push(next.value);
    expect(rest).toHaveLength(OLD - 1000 - 1);
    expect(rest.at(-1)).toEqual({ v: "old" });
    const late = await collect(lateRead!);
    expect(late).toHaveLength(NEW - 1000);
    expect(late.every((r) => r.v === "new")).toBe(true);
    expect(rest.every((r) => r.v === "old")).toBe(true);

    expect(await other.catalog.getDataset("ds_orders")).toMatchObject({
      rowCount: NEW,
      columns: COLUMNS,
      updatedAt: "2026-11-02T00:00:00.000Z",
    });
    const tail = await collect(
      (await other.rows.readDatasetRows("ds_orders", { offset: NEW - 2, limit: 5, columns: null, filters: null })).rows,
    );
    expect(tail).toEqual([
      { v: "new", i: NEW - 2 },
      { v: "new", i: NEW - 1 },
    ]);
    // The old rows were swept, nothing is left staged.
    expect(storedRows(s, "ds_orders")).toBe(NEW);
    expect(staging(s)).toEqual([]);
  }, 120_000);

  for (const throwAt of [10, 5500]) {
    it(`an iterator that throws (at row ${throwAt}) leaves the old rows and nothing staged`, async () => {
      const s = await seeded();
      const before = await all(s, "ds_orders");
      const dataset = await s.catalog.getDataset("ds_orders");
      let asked = 0;
      const failing = rowsWrite("ds_orders", "replace", generate(10_000, "new", { throwAt }));
      failing.columns = () => {
        asked++;
        return COLUMNS;
      };
      await expect(s.rows.writeDatasetRows(failing)).rejects.toThrow(`upstream broke at row ${throwAt}`);
      expect(asked).toBe(0);
      expect(await all(s, "ds_orders")).toEqual(before);
      expect(await s.catalog.getDataset("ds_orders")).toEqual(dataset);
      expect(storedRows(s, "ds_orders")).toBe(before.length);
      expect(staging(s)).toEqual([]);
      expect(s.db.prepare("SELECT stage_from FROM datasets WHERE id = 'ds_orders'").get()).toEqual({
        stage_from: null,
      });
      // The dataset takes the next write.
      expect(await s.rows.writeDatasetRows(rowsWrite("ds_orders", "append", generate(3, "more")))).toEqual({
        rowCount: before.length + 3,
      });
    });
  }

  it("asks for the columns once, after the last row, and appends after the stored rows", async () => {
    const s = await seeded();
    const before = await all(s, "ds_orders");
    let consumed = 0;
    const calls: number[] = [];
    const write = rowsWrite("ds_orders", "append", generate(2500, "added", { onRow: () => void consumed++ }));
    write.columns = () => {
      calls.push(consumed);
      return [{ name: "order_id", type: "string" }, ...COLUMNS];
    };
    expect(await s.rows.writeDatasetRows(write)).toEqual({ rowCount: before.length + 2500 });
    expect(calls).toEqual([2500]);
    const after = await all(s, "ds_orders");
    expect(after.slice(0, before.length)).toEqual(before);
    expect(after.slice(before.length)).toEqual(Array.from({ length: 2500 }, (_, i) => ({ v: "added", i })));
    expect((await s.catalog.getDataset("ds_orders"))?.columns.map((c) => c.name)).toEqual(["order_id", "v", "i"]);
  });

  it("refuses an unknown dataset or an input table without reading a row", async () => {
    const s = await seeded();
    let started = false;
    const rows = (async function* () {
      started = true;
      yield { a: 1 };
    })();
    await expect(s.rows.writeDatasetRows(rowsWrite("nope", "replace", rows))).rejects.toThrow(/unknown dataset nope/);
    await expect(s.rows.writeDatasetRows(rowsWrite("tbl_targets", "replace", rows))).rejects.toThrow(/input table/);
    expect(started).toBe(false);
  });

  it("webhook deliveries during a bulk append land before the appended rows; during a replace, old dedup keys are forgotten", async () => {
    const s = await seeded();
    const hook = (i: number, dedupKey: string | null) => ({
      datasetId: "ds_conn_hook",
      dedupKey,
      row: { _id: `hook_${i}`, v: "hook", i },
      columns: [{ name: "_id", type: "string" as const }],
      retainRows: 1_000_000,
      receivedAt: "2026-11-01T00:00:00.000Z",
    });
    for (let i = 0; i < 3; i++) await s.webhooks.ingestWebhookRow(hook(i, `k${i}`));
    // Deliveries at rows 1500 and 2500 of the bulk write: each reaches the staged range and moves it.
    const rows = generate(6000, "bulk", {
      onRow: async (i) => {
        if (i === 1500 || i === 2500 || i === 5999)
          expect(await s.webhooks.ingestWebhookRow(hook(i, `k${i}`))).toEqual({ id: `hook_${i}`, duplicate: false });
      },
    });
    expect(await s.rows.writeDatasetRows(rowsWrite("ds_conn_hook", "append", rows))).toEqual({ rowCount: 6006 });
    const appended = await all(s, "ds_conn_hook");
    expect(appended.slice(0, 6).map((r) => r.i)).toEqual([0, 1, 2, 1500, 2500, 5999]);
    expect(appended.slice(6)).toEqual(Array.from({ length: 6000 }, (_, i) => ({ v: "bulk", i })));
    expect(storedRows(s, "ds_conn_hook")).toBe(6006);
    expect(await s.webhooks.ingestWebhookRow(hook(99, "k1500"))).toEqual({ id: "hook_1500", duplicate: true });

    // 30,000 more keyed deliveries: the replace's old rows take three sweep transactions.
    await Promise.all(Array.from({ length: 30_000 }, (_, i) => s.webhooks.ingestWebhookRow(hook(10_000 + i, `m${i}`))));
    const replacement = generate(3000, "fresh", {
      onRow: async (i) => {
        if (i === 2000) await s.webhooks.ingestWebhookRow(hook(2000, "during"));
      },
    });
    // The replaced rows' keys go with them at once, before the rows are swept: the same deliveries are new again
    // (m29999 is the last old row, swept last).
    const whileSweeping = onPublished(s, "ds_conn_hook", 3000, async () => {
      expect(storedRows(s, "ds_conn_hook")).toBeGreaterThan(3000);
      expect(await s.webhooks.ingestWebhookRow(hook(100, "m29999"))).toEqual({ id: "hook_100", duplicate: false });
    });
    expect(await s.rows.writeDatasetRows(rowsWrite("ds_conn_hook", "replace", replacement))).toEqual({
      rowCount: 3000,
    });
    await whileSweeping;
    expect(await s.webhooks.ingestWebhookRow(hook(101, "during"))).toEqual({ id: "hook_101", duplicate: false });
    expect(await s.webhooks.ingestWebhookRow(hook(102, "k1500"))).toEqual({ id: "hook_102", duplicate: false });
    const stored = await all(s, "ds_conn_hook");
    expect(stored.slice(0, 3000)).toEqual(Array.from({ length: 3000 }, (_, i) => ({ v: "fresh", i })));
    expect(stored.slice(3000).map((r) => r._id)).toEqual(["hook_100", "hook_101", "hook_102"]);
    // The old window (6,006 + 30,001 rows) stays from the oldest row an insert change names (a delivery's) up, until
    // the change log's retention removes those changes.
    expect(storedRows(s, "ds_conn_hook")).toBe(3003 + 6006 + 30_001);
    await s.rows.trimDatasetChanges(Date.parse("2100-01-01T00:00:00.000Z"));
    expect(storedRows(s, "ds_conn_hook")).toBe(3003);
    expect((await all(s, "ds_conn_hook")).length).toBe(3003);
  });

  it("serialises bulk writes to one dataset, in this process and across connections on the file", async () => {
    const path = file();
    const s = await seeded(path);
    const other = store(path);
    const base = (await s.catalog.getDataset("ds_orders"))!.rowCount;
    const results = await Promise.all([
      s.rows.writeDatasetRows(rowsWrite("ds_orders", "append", generate(3000, "a", { pauseEvery: 100 }))),
      other.rows.writeDatasetRows(rowsWrite("ds_orders", "append", generate(3000, "b", { pauseEvery: 100 }))),
      s.rows.writeDatasetRows(rowsWrite("ds_orders", "append", generate(2000, "c", { pauseEvery: 100 }))),
    ]);
    const added = (await all(other, "ds_orders")).slice(base);
    expect(added).toHaveLength(8000);
    // Each write's rows are one block, in order; a and c (one process) in the order they were called.
    const blocks: string[] = [];
    for (const row of added) if (blocks.at(-1) !== row.v) blocks.push(row.v as string);
    expect([...blocks].sort()).toEqual(["a", "b", "c"]);
    expect(blocks.indexOf("a")).toBeLessThan(blocks.indexOf("c"));
    const sizes: Record<string, number> = { a: 3000, b: 3000, c: 2000 };
    for (const v of blocks)
      expect(added.filter((r) => r.v === v).map((r) => r.i)).toEqual(Array.from({ length: sizes[v]! }, (_, i) => i));
    // Each write returned the count right after it: the blocks before it plus its own.
    const countAfter = (v: string) =>
      base + blocks.slice(0, blocks.indexOf(v) + 1).reduce((sum, b) => sum + sizes[b]!, 0);
    expect(results.map((r) => r.rowCount)).toEqual(["a", "b", "c"].map(countAfter));
    expect(staging(s)).toEqual([]);
  });

  it("takes over the claim of a process that died while staging, and deletes what it staged", async () => {
    const s = await seeded();
    const seq = seqOf(s, "ds_orders");
    const { next_position: next } = s.db.prepare("SELECT next_position FROM datasets WHERE seq = ?").get(seq) as {
      next_position: number;
    };
    s.db
      .prepare(
        "INSERT INTO dataset_stagings (dataset_seq, owner, from_position, end_position, heartbeat_ms) VALUES (?, 'dead', ?, ?, 0)",
      )
      .run(seq, next, next + 2);
    s.db.prepare("UPDATE datasets SET stage_from = ? WHERE seq = ?").run(next, seq);
    const insert = s.db.prepare("INSERT INTO dataset_rows (row_key, dataset_seq, position, data) VALUES (?, ?, ?, ?)");
    for (const p of [next, next + 1]) insert.run(rowKey(seq, p), seq, p, '{"v":"orphan"}');

    expect(await s.rows.writeDatasetRows(rowsWrite("ds_orders", "append", [{ v: "new", i: 0 }]))).toEqual({
      rowCount: 6,
    });
    expect((await all(s, "ds_orders")).map((r) => r.v ?? r.order_id)).toEqual([
      "A-1",
      "A-2",
      "A-3",
      "A-4",
      "A-5",
      "new",
    ]);
    expect(storedRows(s, "ds_orders")).toBe(6);
    expect(staging(s)).toEqual([]);
  });

  it("a dataset deleted while its rows are staged: the write fails and leaves nothing", async () => {
    const s = await seeded();
    const seq = seqOf(s, "ds_orders");
    const rows = generate(5000, "x", {
      onRow: async (i) => {
        if (i === 3000) expect(await s.catalog.deleteDataset("ds_orders")).toBe(true);
      },
    });
    await expect(s.rows.writeDatasetRows(rowsWrite("ds_orders", "replace", rows))).rejects.toThrow(
      /deleted or its claim taken over/,
    );
    expect(await s.catalog.getDataset("ds_orders")).toBeNull();
    expect(s.db.prepare("SELECT count(*) AS n FROM dataset_rows WHERE dataset_seq = ?").get(seq)).toEqual({ n: 0 });
    expect(staging(s)).toEqual([]);
  });

  it("replaceDatasetRows (a refresh) goes the same way and sets lastRefreshedAt", async () => {
    const s = await seeded();
    const rows = Array.from({ length: 2500 }, (_, i) => ({ store_id: `S${i}` }));
    await s.rows.replaceDatasetRows("ds_stores", {
      rows,
      columns: [{ name: "store_id", type: "string" }],
      refreshedAt: "2026-11-03T00:00:00.000Z",
    });
    expect(await s.catalog.getDataset("ds_stores")).toMatchObject({
      rowCount: 2500,
      lastRefreshedAt: "2026-11-03T00:00:00.000Z",
      updatedAt: "2026-11-03T00:00:00.000Z",
    });
    expect((await all(s, "ds_stores")).at(-1)).toEqual({ store_id: "S2499" });
    // A bulk write keeps lastRefreshedAt.
    await s.rows.writeDatasetRows(rowsWrite("ds_stores", "replace", [{ v: "x", i: 0 }]));
    expect(await s.catalog.getDataset("ds_stores")).toMatchObject({
      rowCount: 1,
      lastRefreshedAt: "2026-11-03T00:00:00.000Z",
      updatedAt: "2026-11-02T00:00:00.000Z",
    });
    expect(storedRows(s, "ds_stores")).toBe(1);
  });
});

describe("sqlite: migration 3", () => {
  it("gives existing sessions the fixture's id form and no expiry, and audit event ids to the first event of each id", () => {
    const path = file();
    const old = new Database(path);
    migrate(
      old,
      MIGRATIONS.filter((m) => m.version <= 2),
    );
    old.prepare("INSERT INTO sessions (token_hash, user_id) VALUES (?, ?)").run("ab".repeat(32), "usr_ada");
    const event = (id: string, action: string) =>
      JSON.stringify({ id, teamId: "team_ops", time: "2026-11-01T00:00:00Z", category: "audit", action });
    const audit = old.prepare(
      "INSERT INTO audit_events (team_id, category, time_ms, stored_at, event) VALUES ('team_ops', 'audit', 0, 0, ?)",
    );
    for (const [id, action] of [
      ["e1", "first"],
      ["e2", "only"],
      ["e1", "copy"],
    ])
      audit.run(event(id!, action!));
    old.close();

    const s = store(path);
    expect(s.db.prepare("SELECT id, token_hash, user_id, expires_at FROM sessions").all()).toEqual([
      { id: `sess_${"ab".repeat(12)}`, token_hash: "ab".repeat(32), user_id: "usr_ada", expires_at: null },
    ]);
    expect(
      s.db
        .prepare("SELECT position, event_id, event ->> '$.action' AS action FROM audit_events ORDER BY position")
        .all(),
    ).toEqual([
      { position: 1, event_id: "e1", action: "first" },
      { position: 2, event_id: "e2", action: "only" },
      { position: 3, event_id: null, action: "copy" },
    ]);
  });

  it("refuses an audit event id already stored; appendAuditEvents stores the new ones at consecutive positions", async () => {
    const s = await seeded();
    const e = (id: string) => ({
      id,
      teamId: "team_ops",
      time: "2026-11-01T00:00:00.000Z",
      category: "audit" as const,
      action: "t",
      actor: null,
      target: null,
      outcome: "success",
      ip: null,
      userAgent: null,
    });
    await s.audit.appendAuditEvent(e("x1"), 10);
    await expect(s.audit.appendAuditEvent(e("x1"), 11)).rejects.toThrow(/UNIQUE/);
    expect(await s.audit.appendAuditEvents([e("x1"), e("x2"), e("x2"), e("x3")], 12)).toBe(2);
    const page = await s.audit.readAuditEvents({
      teamIds: ["team_ops"],
      categories: ["audit"],
      after: null,
      since: null,
      storedBefore: 100,
      limit: 100,
    });
    const mine = page.events.filter((p) => p.event.id.startsWith("x"));
    expect(mine.map((p) => p.event.id)).toEqual(["x1", "x2", "x3"]);
    expect(Number(mine[2]!.position) - Number(mine[1]!.position)).toBe(1);
  });
});

describe("sqlite: staging batches of a dataset with indexed columns", () => {
  it("grow toward what stages in 40 ms, within 1,000 and 10,000 rows; a short last batch changes nothing", async () => {
    const { nextBatchSize } = await import("../../src/sqlite/bulk-row-writes.js");
    expect(nextBatchSize(1000, 1000, 10)).toBe(4000);
    expect(nextBatchSize(4000, 4000, 20)).toBe(8000);
    expect(nextBatchSize(8000, 8000, 4)).toBe(10_000);
    expect(nextBatchSize(4000, 4000, 80)).toBe(2000);
    expect(nextBatchSize(2000, 2000, 400)).toBe(1000);
    expect(nextBatchSize(4000, 1200, 1)).toBe(4000);
  });
});
