import { describe, expect, it } from "vitest";
import type { Change } from "../../domain/changes.js";
import type { Actor, AuditEvent, Row } from "../../domain/model.js";
import type { Storage } from "../../ports/storage.js";
import type { ChangesPage, StoredChange } from "../../ports/storage/changes.js";
import { type ConformanceOptions, seededStore, type StorageFactory } from "./harness.js";
import { webhookFixture } from "./webhooks.js";

const NOW = Date.parse("2026-11-01T12:00:00.000Z");
const iso = (ms: number) => new Date(ms).toISOString();
const KEY: Actor = { type: "api-key", id: "key_sync", name: "Warehouse sync" };
const TABLE = "tbl_targets";

let events = 0;
function event(action: string, rowId: string): AuditEvent {
  return {
    id: `evt_changes_${process.pid}_${++events}`,
    teamId: "team_ops",
    time: iso(NOW),
    category: "audit",
    action,
    actor: KEY,
    target: { type: "table_row", id: rowId },
    outcome: "success",
    ip: null,
    userAgent: null,
    details: { tableId: TABLE, rowId },
  };
}

const insert = (store: Storage, rowId: string, values: Row, now = NOW) =>
  store.tables.insertTableRow({
    tableId: TABLE,
    rowId,
    values,
    actor: KEY,
    now,
    auditEvent: event("table.row.created", rowId),
  });
const update = (store: Storage, rowId: string, patch: Row, now = NOW) =>
  store.tables.updateTableRow({
    tableId: TABLE,
    rowId,
    patch,
    expectedUpdatedAt: null,
    actor: KEY,
    now,
    auditEvent: event("table.row.updated", rowId),
  });
const remove = (store: Storage, rowId: string, now = NOW) =>
  store.tables.deleteTableRow({
    tableId: TABLE,
    rowId,
    actor: KEY,
    now,
    auditEvent: event("table.row.deleted", rowId),
  });

/** Every change of a table's feed after `after`, `limit` at a time, checking the page rules on the way. */
async function follow(
  read: (after: string, limit: number) => Promise<ChangesPage>,
  after: string,
  limit = 2,
): Promise<StoredChange[]> {
  const out: StoredChange[] = [];
  for (let cursor = after, pages = 0; pages < 10_000; pages++) {
    const page = await read(cursor, limit);
    expect(page.expired).toBe(false);
    expect(page.changes.length).toBeLessThanOrEqual(limit);
    out.push(...page.changes);
    if (page.changes.length > 0) cursor = page.changes.at(-1)!.position;
    if (!page.hasMore) return out;
  }
  throw new Error("the feed did not end");
}

const HOOK = "ds_conn_hook_open";
const T0 = Date.parse("2026-11-01T12:00:00.000Z");

function deliver(store: Storage, id: string, retainRows = 100, dedupKey: string | null = null, at = T0) {
  const row: Row = { _id: id, n: Number(id.replace(/\D/g, "")) };
  return store.webhooks.ingestWebhookRow({
    datasetId: HOOK,
    dedupKey,
    row,
    columns: [
      { name: "_id", type: "string" },
      { name: "n", type: "number" },
    ],
    retainRows,
    receivedAt: iso(at),
  });
}

/** A copy of a dataset kept by applying its changes as ../shared/changes.md says. */
function applyChanges(mirror: Row[], changes: readonly StoredChange[]): Row[] {
  let rows = [...mirror];
  for (const { change } of changes) {
    if (change.op === "insert" || change.op === "update") {
      const at = rows.findIndex((r) => r._id === change.rowId);
      if (at >= 0 && change.rowId !== null) rows[at] = change.row;
      else rows.push(change.row);
    } else if (change.op === "delete") rows = rows.filter((r) => r._id !== change.rowId);
    else if (change.op === "trim") {
      const at = rows.findIndex((r) => r._id === change.upTo);
      if (at >= 0) rows = rows.slice(at + 1);
    } else rows = [];
  }
  return rows;
}

async function datasetRows(store: Storage, datasetId: string): Promise<Row[]> {
  const out: Row[] = [];
  const page = await store.rows.readDatasetRows(datasetId, { offset: 0, limit: null, columns: null, filters: null });
  for await (const row of page.rows) out.push({ ...row });
  return out;
}

const datasetFeed =
  (store: Storage, datasetId = HOOK) =>
  (after: string, limit: number) =>
    store.rows.readDatasetChanges(datasetId, { after, limit });

const tableFeed = (store: Storage) => (after: string, limit: number) =>
  store.tables.readTableChanges(TABLE, { after, limit });
const ops = (changes: readonly StoredChange[]) =>
  changes.map(({ change }) => [change.op, "rowId" in change ? change.rowId : "upTo" in change ? change.upTo : null]);

function increasing(changes: readonly StoredChange[]): boolean {
  return changes.every((c, i) => i === 0 || BigInt(c.position) > BigInt(changes[i - 1]!.position));
}

/**
 * The change feeds of input tables and datasets (`ChangeFeedReads` in
 * ports/storage/changes.ts): every row write's change once, in order, in
 * the same commit as the write; keyset pages; a head to hand a rows read
 * over; retention.
 */
export function describeChangesConformance(
  name: string,
  factory: StorageFactory,
  options: ConformanceOptions = {},
): void {
  describe.skipIf(!!options.skip)(`${name}: changes`, () => {
    const seeded = seededStore(factory, options, webhookFixture);

    it("records a table's inserts, updates and deletes with the whole row, in order, after the head", async () => {
      const store = await seeded();
      const head = await store.tables.tableChangesHead(TABLE);
      expect(head).toMatch(/^\d+$/);
      const created = await insert(store, "row_2", { region: "APAC", target: 5 }, NOW + 1000);
      const updated = await update(store, "row_2", { target: 6 }, NOW + 2000);
      expect(updated.status).toBe("ok");
      await remove(store, "row_1", NOW + 3000);
      // A refused write records nothing.
      expect((await update(store, "row_missing", { target: 1 })).status).toBe("not_found");
      const changes = await follow(tableFeed(store), head);
      expect(changes.map((c) => c.change)).toEqual<Change[]>([
        { op: "insert", rowId: "row_2", row: created, at: iso(NOW + 1000) },
        { op: "update", rowId: "row_2", row: updated.status === "ok" ? updated.row : {}, at: iso(NOW + 2000) },
        { op: "delete", rowId: "row_1", at: iso(NOW + 3000) },
      ]);
      expect(increasing(changes)).toBe(true);
      expect(BigInt(changes[0]!.position)).toBeGreaterThan(BigInt(head));
      // The update carries the whole row after it, the stamps included.
      expect(changes[1]!.change).toMatchObject({ row: { _id: "row_2", region: "APAC", target: 6 } });
      // After the last change: nothing more, and the head has moved past it.
      expect(await store.tables.readTableChanges(TABLE, { after: changes.at(-1)!.position, limit: 10 })).toMatchObject({
        changes: [],
        hasMore: false,
      });
      expect(BigInt(await store.tables.tableChangesHead(TABLE))).toBeGreaterThanOrEqual(
        BigInt(changes.at(-1)!.position),
      );
    });

    it("pages with hasMore exactly when more is there, and keeps feeds apart", async () => {
      const store = await seeded();
      const head = await store.tables.tableChangesHead(TABLE);
      for (let i = 0; i < 5; i++) await insert(store, `row_p${i}`, { region: `R${i}`, target: i });
      // Another feed's changes (a webhook dataset) never show in this one.
      await store.webhooks.ingestWebhookRow({
        datasetId: "ds_conn_hook_open",
        dedupKey: null,
        row: { _id: "wh_1", a: 1 },
        columns: [
          { name: "_id", type: "string" },
          { name: "a", type: "number" },
        ],
        retainRows: 100,
        receivedAt: iso(NOW),
      });
      const first = await store.tables.readTableChanges(TABLE, { after: head, limit: 2 });
      expect(ops(first.changes)).toEqual([
        ["insert", "row_p0"],
        ["insert", "row_p1"],
      ]);
      expect(first.hasMore).toBe(true);
      const rest = await follow(tableFeed(store), first.changes.at(-1)!.position, 3);
      expect(ops(rest)).toEqual([
        ["insert", "row_p2"],
        ["insert", "row_p3"],
        ["insert", "row_p4"],
      ]);
      const exact = await store.tables.readTableChanges(TABLE, { after: rest[1]!.position, limit: 1 });
      expect(exact.hasMore).toBe(false);
      // A feed nobody wrote to is empty from its start.
      expect(await store.tables.readTableChanges("tbl_nothing", { after: "0", limit: 10 })).toMatchObject({
        changes: [],
        hasMore: false,
        expired: false,
      });
    });

    it("records a reset when a put rewrote the table's rows, and forgets a deleted table's changes", async () => {
      const store = await seeded();
      const head = await store.tables.tableChangesHead(TABLE);
      const table = (await store.tables.getTable(TABLE))!;
      const at = "2026-11-02T08:00:00.000Z";
      await store.tables.putTable({ ...table, updatedAt: at }, (row) => ({ ...row, target: Number(row.target) * 2 }));
      // A put that rewrites nothing is no change of the rows.
      await store.tables.putTable({ ...table, updatedAt: at });
      expect((await follow(tableFeed(store), head)).map((c) => c.change)).toEqual([{ op: "reset", at }]);
      await store.tables.deleteTable(TABLE);
      expect((await store.tables.readTableChanges(TABLE, { after: "0", limit: 10 })).changes).toEqual([]);
    });

    it("gives every change of concurrent writers once, in order, to a reader following meanwhile", async () => {
      const store = await seeded();
      const head = await store.tables.tableChangesHead(TABLE);
      const writers = Array.from({ length: 4 }, async (_, w) => {
        for (let i = 0; i < 15; i++) {
          const rowId = `row_w${w}_${i}`;
          await insert(store, rowId, { region: `W${w}`, target: i });
          if (i % 3 === 2) await update(store, rowId, { target: i * 10 });
        }
      });
      const seen: StoredChange[] = [];
      let done = false;
      const all = Promise.all(writers).finally(() => (done = true));
      const reader = (async () => {
        let cursor = head;
        for (;;) {
          const finished = done;
          const page = await store.tables.readTableChanges(TABLE, { after: cursor, limit: 7 });
          seen.push(...page.changes);
          if (page.changes.length > 0) cursor = page.changes.at(-1)!.position;
          if (finished && !page.hasMore) return;
          if (page.changes.length === 0) await new Promise((resolve) => setTimeout(resolve, 5));
        }
      })();
      await all;
      await reader;
      expect(increasing(seen)).toBe(true);
      expect(seen).toHaveLength(4 * 15 + 4 * 5);
      expect(new Set(seen.map((c) => c.position)).size).toBe(seen.length);
      // Per row: its insert before its update; per writer: its rows in the order written.
      for (let w = 0; w < 4; w++) {
        const mine = seen.filter((c) => "rowId" in c.change && String(c.change.rowId).startsWith(`row_w${w}_`));
        const expected: unknown[] = [];
        for (let i = 0; i < 15; i++) {
          expected.push(["insert", `row_w${w}_${i}`]);
          if (i % 3 === 2) expected.push(["update", `row_w${w}_${i}`]);
        }
        expect(ops(mine)).toEqual(expected);
      }
    });

    it("records each webhook delivery's insert and the trims of retention, duplicates none", async () => {
      const store = await seeded();
      const head = await store.rows.datasetChangesHead(HOOK);
      await deliver(store, "wh1", 2, "k1", T0 + 1000);
      await deliver(store, "wh2", 2, null, T0 + 2000);
      // A duplicate stores nothing and records nothing.
      expect(await deliver(store, "wh9", 2, "k1", T0 + 2500)).toEqual({ id: "wh1", duplicate: true });
      await deliver(store, "wh3", 2, null, T0 + 3000);
      const changes = await follow(datasetFeed(store), head);
      expect(changes.map((c) => c.change)).toEqual<Change[]>([
        { op: "insert", rowId: "wh1", row: { _id: "wh1", n: 1 }, at: iso(T0 + 1000) },
        { op: "insert", rowId: "wh2", row: { _id: "wh2", n: 2 }, at: iso(T0 + 2000) },
        { op: "insert", rowId: "wh3", row: { _id: "wh3", n: 3 }, at: iso(T0 + 3000) },
        { op: "trim", upTo: "wh1", at: iso(T0 + 3000) },
      ]);
      // Lowering the retention trims at once, and says so.
      await store.webhooks.updateWebhookSettings("conn_hook_open", { retainRows: 1 });
      const more = await follow(datasetFeed(store), changes.at(-1)!.position);
      expect(more.map((c) => ({ ...c.change, at: "" }))).toEqual([{ op: "trim", upTo: "wh2", at: "" }]);
      expect(applyChanges([], [...changes, ...more])).toEqual(await datasetRows(store, HOOK));
    });

    it("hands a page read with changesHead over to the feed: its head is the feed's, later writes follow it", async () => {
      const store = await seeded();
      const page = async (limit: number | null) => {
        const read = await store.rows.readDatasetRows(HOOK, {
          offset: 0,
          limit,
          columns: null,
          filters: null,
          changesHead: true,
        });
        const rows: Row[] = [];
        for await (const row of read.rows) rows.push({ ...row });
        return { head: read.changesHead, rows };
      };
      for (let i = 1; i <= 3; i++) await deliver(store, `wh${i}`, 10);
      // Asked again (a store may answer the second from what it remembers), and whole.
      const first = await page(2);
      expect(first.rows.map((r) => r._id)).toEqual(["wh1", "wh2"]);
      expect(first.head).toBe(await store.rows.datasetChangesHead(HOOK));
      expect((await page(2)).head).toBe(first.head);
      const whole = await page(null);
      expect(whole.head).toBe(first.head);
      // A write to another feed (an input table's row) and a delivery: the head moves past both.
      await insert(store, "row_head", { name: "x" });
      await deliver(store, "wh4", 10);
      const later = await page(2);
      expect(later.head).toBe(await store.rows.datasetChangesHead(HOOK));
      expect(later.head).not.toBe(first.head);
      const changes = await follow(datasetFeed(store), first.head!);
      expect(changes.map((c) => c.change)).toEqual<Change[]>([
        { op: "insert", rowId: "wh4", row: { _id: "wh4", n: 4 }, at: iso(T0) },
      ]);
      expect(applyChanges(whole.rows, changes)).toEqual(await datasetRows(store, HOOK));
      // From the later head, nothing yet.
      expect(await follow(datasetFeed(store), later.head!)).toEqual([]);
    });

    it("keeps a copy equal to a webhook dataset whose concurrent deliveries retention trims", async () => {
      const store = await seeded();
      const head = await store.rows.datasetChangesHead(HOOK);
      for (let i = 1; i <= 3; i++) await deliver(store, `wh${i}`, 4);
      // Deliveries arriving together (one group commit on the SQL stores), trimming as they go.
      await Promise.all(
        Array.from({ length: 12 }, (_, i) => deliver(store, `wh${10 + i}`, 4, i % 2 === 0 ? `key${i}` : null)),
      );
      const changes = await follow(datasetFeed(store), head, 5);
      expect(increasing(changes)).toBe(true);
      expect(changes.filter((c) => c.change.op === "insert")).toHaveLength(15);
      const final = await datasetRows(store, HOOK);
      expect(final.map((r) => r._id)).toEqual(["wh18", "wh19", "wh20", "wh21"]);
      expect(applyChanges([], changes)).toEqual(final);
    });

    it("records an append's rows as inserts (no rowId) and a replace or refresh as a reset, in the write's commit", async () => {
      const store = await seeded();
      const head = await store.rows.datasetChangesHead("ds_orders");
      const columns = [
        { name: "order_id", type: "string" as const },
        { name: "amount", type: "number" as const },
      ];
      async function* rows(...ids: string[]) {
        for (const id of ids) yield { order_id: id, amount: 1 };
      }
      const write = (mode: "append" | "replace", updatedAt: string, ...ids: string[]) =>
        store.rows.writeDatasetRows({
          datasetId: "ds_orders",
          mode,
          rows: rows(...ids),
          columns: () => columns,
          updatedAt,
        });
      await write("append", "2026-11-01T13:00:00.000Z", "N-1", "N-2");
      await write("replace", "2026-11-01T14:00:00.000Z", "R-1");
      await store.rows.replaceDatasetRows("ds_orders", {
        rows: [{ order_id: "F-1", amount: 2 }],
        columns,
        refreshedAt: "2026-11-01T15:00:00.000Z",
      });
      const changes = await follow(datasetFeed(store, "ds_orders"), head);
      expect(changes.map((c) => c.change)).toEqual<Change[]>([
        { op: "insert", rowId: null, row: { order_id: "N-1", amount: 1 }, at: "2026-11-01T13:00:00.000Z" },
        { op: "insert", rowId: null, row: { order_id: "N-2", amount: 1 }, at: "2026-11-01T13:00:00.000Z" },
        { op: "reset", at: "2026-11-01T14:00:00.000Z" },
        { op: "reset", at: "2026-11-01T15:00:00.000Z" },
      ]);
      // A write that fails writes no change either.
      async function* failing() {
        yield { order_id: "X-1", amount: 1 };
        throw new Error("the upload broke off");
      }
      await expect(
        store.rows.writeDatasetRows({
          datasetId: "ds_orders",
          mode: "append",
          rows: failing(),
          columns: () => columns,
          updatedAt: "2026-11-01T16:00:00.000Z",
        }),
      ).rejects.toThrow();
      expect(
        (await store.rows.readDatasetChanges("ds_orders", { after: changes.at(-1)!.position, limit: 10 })).changes,
      ).toEqual([]);
    });

    it("forgets a deleted dataset's changes with it", async () => {
      const store = await seeded();
      await deliver(store, "wh1");
      expect((await store.rows.readDatasetChanges(HOOK, { after: null, limit: 10 })).changes).toHaveLength(1);
      expect(await store.catalog.deleteConnection("conn_hook_open")).toBe(true);
      expect(await store.rows.readDatasetChanges(HOOK, { after: null, limit: 10 })).toEqual({
        changes: [],
        hasMore: false,
        expired: false,
      });
    });

    it("answers expired for a cursor older than retention kept, and serves what is kept", async () => {
      const store = await seeded();
      const head = await store.tables.tableChangesHead(TABLE);
      await insert(store, "row_old", { region: "OLD", target: 1 }, NOW);
      await insert(store, "row_new", { region: "NEW", target: 2 }, NOW + 60_000);
      const before = await follow(tableFeed(store), head);
      expect(ops(before)).toEqual([
        ["insert", "row_old"],
        ["insert", "row_new"],
      ]);
      await store.tables.trimTableChanges(NOW + 30_000);
      // A cursor from before the removed change has missed it: expired, never a page with a gap.
      expect(await store.tables.readTableChanges(TABLE, { after: head, limit: 10 })).toEqual({
        changes: [],
        hasMore: false,
        expired: true,
      });
      expect((await store.tables.readTableChanges(TABLE, { after: "0", limit: 10 })).expired).toBe(true);
      // No cursor: from the oldest change kept.
      const oldest = await store.tables.readTableChanges(TABLE, { after: null, limit: 10 });
      expect({ ...oldest, changes: ops(oldest.changes) }).toEqual({
        changes: [["insert", "row_new"]],
        hasMore: false,
        expired: false,
      });
      // From the removed change on, what is kept is whole.
      expect(ops(await follow(tableFeed(store), before[0]!.position))).toEqual([["insert", "row_new"]]);
      // A read made now hands over from the head, which is not expired.
      const fresh = await store.tables.tableChangesHead(TABLE);
      await insert(store, "row_newer", { region: "NEW", target: 3 }, NOW + 61_000);
      expect(ops(await follow(tableFeed(store), fresh))).toEqual([["insert", "row_newer"]]);
      // A feed retention did not touch still reads from its start.
      expect((await store.tables.readTableChanges("tbl_other", { after: "0", limit: 1 })).expired).toBe(false);
    });
  });
}
