import { parseAggregateQuery } from "../../domain/aggregate-query.js";
import { describe, expect, it } from "vitest";
import type { Actor, AuditEvent, Row, TableRecord } from "../../domain/model.js";
import type { RowCondition } from "../../domain/row-query-model.js";
import type { Storage } from "../../ports/storage.js";
import { type ConformanceOptions, readAllPages, seededStore, type StorageFactory } from "./harness.js";

const NOW = Date.parse("2026-11-01T12:00:00.000Z");
const iso = (ms: number) => new Date(ms).toISOString();
const KEY: Actor = { type: "api-key", id: "key_sync", name: "Warehouse sync" };
const USER: Actor = { type: "user", id: "usr_ada", email: "ada@northwind.test" };
const ROW_1 = {
  _id: "row_1",
  region: "EMEA",
  target: 120000,
  _createdAt: "2026-10-01T00:00:00Z",
  _updatedAt: "2026-10-01T00:00:00Z",
};

let events = 0;
function event(action: string, rowId: string, actor: Actor = KEY): AuditEvent {
  return {
    id: `evt_conformance_${++events}`,
    teamId: "team_ops",
    time: iso(NOW),
    category: "audit",
    action,
    actor,
    target: { type: "table_row", id: rowId },
    outcome: "success",
    ip: null,
    userAgent: null,
    details: { tableId: "tbl_targets", rowId },
  };
}

function insert(store: Storage, rowId: string, values: Row, now = NOW, actor: Actor = KEY) {
  return store.tables.insertTableRow({
    tableId: "tbl_targets",
    rowId,
    values,
    actor,
    now,
    auditEvent: event("table.row.created", rowId, actor),
  });
}

function update(
  store: Storage,
  patch: Row,
  options: { rowId?: string; expectedUpdatedAt?: string | null; now?: number } = {},
) {
  const rowId = options.rowId ?? "row_1";
  return store.tables.updateTableRow({
    tableId: "tbl_targets",
    rowId,
    patch,
    expectedUpdatedAt: options.expectedUpdatedAt ?? null,
    actor: KEY,
    now: options.now ?? NOW,
    auditEvent: event("table.row.updated", rowId),
  });
}

const remove = (store: Storage, rowId: string) =>
  store.tables.deleteTableRow({
    tableId: "tbl_targets",
    rowId,
    actor: USER,
    now: NOW,
    auditEvent: event("table.row.deleted", rowId, USER),
  });

const allRows = async (store: Storage) =>
  (await store.tables.listTableRows("tbl_targets", { offset: 0, limit: 1000 })).rows;

/** Input-table rows, the edit log and writes under an Idempotency-Key (`TableStore`). */
export function describeTablesConformance(
  name: string,
  factory: StorageFactory,
  options: ConformanceOptions = {},
): void {
  describe.skipIf(!!options.skip)(`${name}: tables`, () => {
    const seeded = seededStore(factory, options);

    it("aggregates a table's rows in the store, its stamps among the columns", async () => {
      const store = await seeded();
      const columns = new Set(["region", "target", "_id", "_createdAt", "_updatedAt"]);
      const query = parseAggregateQuery(
        { groupBy: "region,month(_createdAt)", metrics: "count,sum(target),max(_updatedAt)" },
        columns,
      );
      expect(await store.tables.aggregateTableRows("tbl_targets", query)).toEqual({
        groups: [
          {
            region: "EMEA",
            "month(_createdAt)": "2026-10",
            count: 1,
            "sum(target)": 120000,
            "max(_updatedAt)": "2026-10-01T00:00:00Z",
          },
        ],
        matchedRows: 1,
        totalGroups: 1,
        totals: { count: 1, "sum(target)": 120000, "max(_updatedAt)": "2026-10-01T00:00:00Z" },
      });
    });

    it("gets a table, its rows in creation order and one row by id", async () => {
      const store = await seeded();
      expect(await store.tables.getTable("tbl_targets")).toEqual({
        id: "tbl_targets",
        teamId: "team_ops",
        name: "Quarterly targets",
        columns: [
          { name: "region", type: "string" },
          { name: "target", type: "number" },
        ],
        rowCount: 1,
        updatedAt: "2026-10-01T00:00:00Z",
      });
      expect(await store.tables.getTable("tbl_nope")).toBeNull();
      expect(await store.tables.getTableRow("tbl_targets", "row_1")).toEqual(ROW_1);
      expect(await store.tables.getTableRow("tbl_targets", "row_nope")).toBeNull();
      expect(await store.tables.listTableRows("tbl_targets", { offset: 0, limit: 10 })).toMatchObject({
        totalRows: 1,
        rows: [ROW_1],
      });
    });

    it("inserts with both stamps at now, keeps creation order and the table's rowCount", async () => {
      const store = await seeded();
      const a = await insert(store, "row_a", { region: "AMER", target: 1 });
      expect(a).toEqual({ _id: "row_a", region: "AMER", target: 1, _createdAt: iso(NOW), _updatedAt: iso(NOW) });
      await insert(store, "row_b", { region: "APAC", nested: { list: [1, "two", null] } }, NOW + 5);
      await insert(store, "row_c", { region: "LATAM" }, NOW - 60_000);
      expect((await allRows(store)).map((r) => r._id)).toEqual(["row_1", "row_a", "row_b", "row_c"]);
      expect(await store.tables.getTableRow("tbl_targets", "row_b")).toMatchObject({
        nested: { list: [1, "two", null] },
      });
      const page = await store.tables.listTableRows("tbl_targets", { offset: 1, limit: 2 });
      expect([page.totalRows, page.rows.map((r) => r._id)]).toEqual([4, ["row_a", "row_b"]]);
      expect(await store.tables.getTable("tbl_targets")).toMatchObject({ rowCount: 4 });
    });

    it("stores __proto__ and constructor as own data properties", async () => {
      const store = await seeded();
      const values: Row = JSON.parse('{"__proto__":{"polluted":"yes"},"constructor":"c","plain":1}');
      await insert(store, "row_p", values);
      const row = (await store.tables.getTableRow("tbl_targets", "row_p"))!;
      expect(Object.hasOwn(row, "__proto__")).toBe(true);
      expect(Object.getOwnPropertyDescriptor(row, "__proto__")?.value).toEqual({ polluted: "yes" });
      expect(Object.getOwnPropertyDescriptor(row, "constructor")?.value).toBe("c");
      expect(({} as Record<string, unknown>).polluted).toBeUndefined();
      const result = await update(store, JSON.parse('{"__proto__":{"polluted":"again"}}'), { rowId: "row_p" });
      expect(result.status).toBe("ok");
      const updated = (await store.tables.getTableRow("tbl_targets", "row_p"))!;
      expect(Object.getOwnPropertyDescriptor(updated, "__proto__")?.value).toEqual({ polluted: "again" });
      expect(updated.plain).toBe(1);
    });

    it("merges a patch, keeps other columns and strictly increases _updatedAt within one millisecond", async () => {
      const store = await seeded();
      const first = await update(store, { target: 1 });
      expect(first).toEqual({ status: "ok", row: { ...ROW_1, target: 1, _updatedAt: iso(NOW) } });
      const second = await update(store, { region: "AMER", extra: null });
      const third = await update(store, { target: 3 });
      expect(second).toEqual({
        status: "ok",
        row: { ...ROW_1, region: "AMER", target: 1, extra: null, _updatedAt: iso(NOW + 1) },
      });
      expect(third.status === "ok" && third.row._updatedAt).toBe(iso(NOW + 2));
      // A clock that goes backwards still cannot make _updatedAt go backwards.
      const earlier = await update(store, { target: 4 }, { now: NOW - 1000 });
      expect(earlier.status === "ok" && earlier.row._updatedAt).toBe(iso(NOW + 3));
      expect(await store.tables.getTable("tbl_targets")).toMatchObject({ rowCount: 1 });
    });

    it("compares expectedUpdatedAt as an instant: later row → conflict with the current row, same instant → applies", async () => {
      const store = await seeded();
      const moved = await update(store, { target: 2 });
      if (moved.status !== "ok") throw new Error("update failed");
      expect(await update(store, { target: 3 }, { expectedUpdatedAt: ROW_1._updatedAt })).toEqual({
        status: "conflict",
        current: moved.row,
      });
      expect(await store.tables.getTableRow("tbl_targets", "row_1")).toEqual(moved.row);
      const sameInstant = await update(store, { target: 4 }, { expectedUpdatedAt: "2026-11-01T13:00:00+01:00" });
      expect(sameInstant).toMatchObject({ status: "ok", row: { target: 4, _updatedAt: iso(NOW + 1) } });
      const later = await update(store, { target: 5 }, { expectedUpdatedAt: iso(NOW + 60_000) });
      expect(later).toMatchObject({ status: "ok", row: { target: 5 } });
      expect(await update(store, { target: 1 }, { rowId: "row_nope" })).toEqual({ status: "not_found" });
    });

    it("lets exactly one of 20 concurrent compare-and-set updates win", async () => {
      const store = await seeded();
      const results = await Promise.all(
        Array.from({ length: 20 }, (_, i) => update(store, { target: i }, { expectedUpdatedAt: ROW_1._updatedAt })),
      );
      const ok = results.filter((r) => r.status === "ok");
      expect(ok).toHaveLength(1);
      expect(results.filter((r) => r.status === "conflict")).toHaveLength(19);
      expect(await store.tables.getTableRow("tbl_targets", "row_1")).toEqual(ok[0]!.row);
      expect(await store.tables.listEditLog("tbl_targets")).toHaveLength(1);
    });

    it("deletes a row once and returns it; the table's rowCount follows", async () => {
      const store = await seeded();
      expect(await remove(store, "row_1")).toEqual({ status: "ok", row: ROW_1 });
      expect(await remove(store, "row_1")).toEqual({ status: "not_found" });
      expect(await allRows(store)).toEqual([]);
      expect(await store.tables.getTable("tbl_targets")).toMatchObject({ rowCount: 0 });
    });

    it("deletes with expectedUpdatedAt as a compare-and-set: a later row → conflict, nothing deleted or logged; the same instant → deleted", async () => {
      const store = await seeded();
      const moved = await update(store, { target: 2 });
      if (moved.status !== "ok") throw new Error("update failed");
      const conditional = (expectedUpdatedAt: string) =>
        store.tables.deleteTableRow({
          tableId: "tbl_targets",
          rowId: "row_1",
          expectedUpdatedAt,
          actor: USER,
          now: NOW,
          auditEvent: event("table.row.deleted", "row_1", USER),
        });
      expect(await conditional(ROW_1._updatedAt as string)).toEqual({ status: "conflict", current: moved.row });
      expect(await store.tables.getTableRow("tbl_targets", "row_1")).toEqual(moved.row);
      expect((await store.tables.listEditLog("tbl_targets")).map((e) => e.op)).toEqual(["update"]);
      expect(await conditional(moved.row._updatedAt as string)).toEqual({ status: "ok", row: moved.row });
      expect(await store.tables.getTable("tbl_targets")).toMatchObject({ rowCount: 0 });
    });

    it("lets one of a compare-and-set update and delete racing on one version win, never both", async () => {
      const store = await seeded();
      const [updated, deleted] = await Promise.all([
        update(store, { target: 7 }, { expectedUpdatedAt: ROW_1._updatedAt }),
        store.tables.deleteTableRow({
          tableId: "tbl_targets",
          rowId: "row_1",
          expectedUpdatedAt: ROW_1._updatedAt as string,
          actor: USER,
          now: NOW,
          auditEvent: event("table.row.deleted", "row_1", USER),
        }),
      ]);
      // The update first: the delete's version is gone (conflict). The delete first: the update finds no row.
      expect([updated.status, deleted.status].sort().join(",")).toMatch(/^(conflict,ok|not_found,ok)$/);
      const left = await store.tables.getTableRow("tbl_targets", "row_1");
      expect(left === null ? deleted.status : updated.status).toBe("ok");
      expect(await store.tables.listEditLog("tbl_targets")).toHaveLength(1);
    });

    it("keeps an edit log per table, oldest first, with actor, time, before and after; refused writes log nothing", async () => {
      const store = await seeded();
      const created = await insert(store, "row_a", { region: "AMER" });
      const updated = await update(store, { target: 9 });
      await update(store, { target: 10 }, { expectedUpdatedAt: ROW_1._updatedAt });
      await update(store, { target: 10 }, { rowId: "row_nope" });
      await remove(store, "row_a");
      await remove(store, "row_a");
      if (updated.status !== "ok") throw new Error("update failed");
      const log = await store.tables.listEditLog("tbl_targets");
      expect(log).toEqual([
        {
          tableId: "tbl_targets",
          rowId: "row_a",
          op: "create",
          actor: KEY,
          at: iso(NOW),
          before: null,
          after: created,
        },
        {
          tableId: "tbl_targets",
          rowId: "row_1",
          op: "update",
          actor: KEY,
          at: iso(NOW),
          before: ROW_1,
          after: updated.row,
        },
        {
          tableId: "tbl_targets",
          rowId: "row_a",
          op: "delete",
          actor: USER,
          at: iso(NOW),
          before: created,
          after: null,
        },
      ]);
      expect(await store.tables.listEditLog("tbl_targets", { offset: 1, limit: 1 })).toEqual([log[1]]);
      expect(await store.tables.listEditLog("tbl_other")).toEqual([]);
    });

    it("stores each write's audit event with it", async ({ skip }) => {
      const store = await seeded();
      const read = () =>
        store.audit.readAuditEvents({
          teamIds: ["team_ops"],
          categories: ["audit"],
          after: null,
          since: null,
          storedBefore: NOW,
          limit: 100,
        });
      const before = await read().catch((error: unknown) => error);
      if (before instanceof Error && /not implemented/.test(before.message))
        skip("readAuditEvents is not implemented by this store yet");
      await insert(store, "row_a", { region: "AMER" });
      await update(store, { target: 1 });
      await update(store, { target: 2 }, { expectedUpdatedAt: ROW_1._updatedAt });
      await remove(store, "row_a");
      const stored = (await read()).events.filter((e) => e.event.action.startsWith("table.row."));
      expect(stored.map((e) => [e.event.action, e.event.target, e.storedAt])).toEqual([
        ["table.row.created", { type: "table_row", id: "row_a" }, NOW],
        ["table.row.updated", { type: "table_row", id: "row_1" }, NOW],
        ["table.row.deleted", { type: "table_row", id: "row_a" }, NOW],
      ]);
      expect(stored[2]!.event.actor).toEqual(USER);
    });

    it("writes nothing when a row write's audit event id is already stored (one transaction)", async () => {
      const store = await seeded();
      const taken = event("table.row.created", "row_a");
      await store.tables.insertTableRow({
        tableId: "tbl_targets",
        rowId: "row_a",
        values: { region: "AMER" },
        actor: KEY,
        now: NOW,
        auditEvent: taken,
      });
      const log = await store.tables.listEditLog("tbl_targets");
      await expect(
        store.tables.insertTableRow({
          tableId: "tbl_targets",
          rowId: "row_b",
          values: { region: "APAC" },
          actor: KEY,
          now: NOW,
          auditEvent: taken,
        }),
      ).rejects.toThrow();
      await expect(
        store.tables.updateTableRow({
          tableId: "tbl_targets",
          rowId: "row_1",
          patch: { target: 1 },
          expectedUpdatedAt: null,
          actor: KEY,
          now: NOW,
          auditEvent: taken,
        }),
      ).rejects.toThrow();
      await expect(
        store.tables.deleteTableRow({
          tableId: "tbl_targets",
          rowId: "row_a",
          actor: KEY,
          now: NOW,
          auditEvent: taken,
        }),
      ).rejects.toThrow();
      expect(await store.tables.getTableRow("tbl_targets", "row_b")).toBeNull();
      expect(await store.tables.getTableRow("tbl_targets", "row_1")).toEqual(ROW_1);
      expect((await allRows(store)).map((r) => r._id)).toEqual(["row_1", "row_a"]);
      expect(await store.tables.getTable("tbl_targets")).toMatchObject({ rowCount: 2 });
      expect(await store.tables.listEditLog("tbl_targets")).toEqual(log);
    });

    it("reads rows by where and sort, _id and stamps included, and pages after the last key", async () => {
      const store = await seeded();
      await insert(store, "row_2", { region: "AMER", target: 50000 }, NOW + 1000);
      await insert(store, "row_3", { region: "APAC", target: null }, NOW + 2000);
      await insert(store, "row_4", { region: "EMEA", target: 50000 }, NOW + 3000);
      const ids = (rows: Row[]) => rows.map((r) => r._id);
      const test = (column: string, op: string, operand: unknown) =>
        ({ kind: "test", column, op, operand }) as RowCondition;
      const targets = await store.tables.listTableRows("tbl_targets", {
        offset: 0,
        limit: 10,
        where: test("target", "lt", 100000),
      });
      expect({ total: targets.totalRows, ids: ids(targets.rows) }).toEqual({ total: 2, ids: ["row_2", "row_4"] });
      const byId = await store.tables.listTableRows("tbl_targets", {
        offset: 0,
        limit: 10,
        where: test("_id", "in", ["row_3", "row_1", "row_9"]),
      });
      expect(ids(byId.rows)).toEqual(["row_1", "row_3"]);
      const since = await store.tables.listTableRows("tbl_targets", {
        offset: 0,
        limit: 10,
        where: test("_createdAt", "gt", "2026-10-01T00:00:00Z"),
      });
      expect(ids(since.rows)).toEqual(["row_2", "row_3", "row_4"]);
      const sort = [
        { column: "target", descending: false },
        { column: "_createdAt", descending: true },
      ];
      const sorted = await store.tables.listTableRows("tbl_targets", { offset: 0, limit: 10, sort });
      expect({ total: sorted.totalRows, ids: ids(sorted.rows) }).toEqual({
        total: 4,
        ids: ["row_4", "row_2", "row_1", "row_3"],
      });
      const first = await store.tables.listTableRows("tbl_targets", { offset: 0, limit: 2, sort });
      expect(first.lastKey?.values).toEqual([50000, first.rows[1]!._createdAt]);
      const next = await store.tables.listTableRows("tbl_targets", { offset: 0, limit: 2, sort, after: first.lastKey });
      expect({ total: next.totalRows, ids: ids(next.rows) }).toEqual({ total: 4, ids: ["row_1", "row_3"] });
      const plain = await store.tables.listTableRows("tbl_targets", { offset: 0, limit: 3 });
      const rest = await store.tables.listTableRows("tbl_targets", { offset: 0, limit: 3, after: plain.lastKey });
      expect(ids(rest.rows)).toEqual(["row_4"]);
    });

    it("answers the same rows and keys without counting when the caller needs no totalRows (count: false: -1 or the count)", async () => {
      const store = await seeded();
      await insert(store, "row_2", { region: "AMER", target: 50000 }, NOW + 1000);
      await insert(store, "row_3", { region: "APAC", target: null }, NOW + 2000);
      const sort = [{ column: "region", descending: true }];
      for (const query of [
        { offset: 0, limit: 2 },
        { offset: 0, limit: 2, sort },
      ]) {
        const counted = await store.tables.listTableRows("tbl_targets", query);
        const uncounted = await store.tables.listTableRows("tbl_targets", { ...query, count: false });
        expect(uncounted.rows).toEqual(counted.rows);
        expect(uncounted.lastKey).toEqual(counted.lastKey);
        expect([-1, 3]).toContain(uncounted.totalRows);
        const after = await store.tables.listTableRows("tbl_targets", {
          ...query,
          after: counted.lastKey,
          count: false,
        });
        expect(after.rows.map((r) => r._id)).toEqual(
          (await store.tables.listTableRows("tbl_targets", { ...query, after: counted.lastKey })).rows.map(
            (r) => r._id,
          ),
        );
      }
    });

    it("pages by key, not index: deleting rows before the cursor skips or repeats none; no position is given twice", async () => {
      const store = await seeded();
      for (let i = 2; i <= 7; i++) await insert(store, `row_${i}`, { region: "EMEA", target: 100 * i }, NOW + i * 1000);
      const ids = (rows: Row[]) => rows.map((r) => r._id);
      const first = await store.tables.listTableRows("tbl_targets", { offset: 0, limit: 3 });
      expect(ids(first.rows)).toEqual(["row_1", "row_2", "row_3"]);
      await remove(store, "row_1");
      await remove(store, "row_3");
      const second = await store.tables.listTableRows("tbl_targets", { offset: 0, limit: 3, after: first.lastKey });
      expect(ids(second.rows)).toEqual(["row_4", "row_5", "row_6"]);
      const sort = [{ column: "target", descending: true }];
      const top = await store.tables.listTableRows("tbl_targets", { offset: 0, limit: 2, sort });
      expect(ids(top.rows)).toEqual(["row_7", "row_6"]);
      await remove(store, "row_7");
      const rest = await store.tables.listTableRows("tbl_targets", { offset: 0, limit: 10, sort, after: top.lastKey });
      expect(ids(rest.rows)).toEqual(["row_5", "row_4", "row_2"]);
      // The last row read is deleted and a row inserted: the new row's position is a new one, after the cursor.
      const whole = await store.tables.listTableRows("tbl_targets", { offset: 0, limit: 10 });
      expect(ids(whole.rows)).toEqual(["row_2", "row_4", "row_5", "row_6"]);
      await remove(store, "row_6");
      await insert(store, "row_8", { region: "APAC", target: 1 }, NOW + 9000);
      const more = await store.tables.listTableRows("tbl_targets", { offset: 0, limit: 10, after: whole.lastKey });
      expect(ids(more.rows)).toEqual(["row_8"]);
    });

    describe("table writes", () => {
      const table = (id: string, over: Partial<TableRecord> = {}): TableRecord => ({
        id,
        teamId: "team_ops",
        name: `Table ${id}`,
        columns: [{ name: "n", type: "number" }],
        rowCount: 0,
        updatedAt: "2026-11-01T00:00:00Z",
        ...over,
      });

      it("puts a new table without rows, whatever rowCount it is given", async () => {
        const store = await seeded();
        expect(await store.tables.putTable(table("tbl_new", { rowCount: 42 }))).toBe("created");
        expect(await store.tables.getTable("tbl_new")).toEqual(table("tbl_new"));
        expect(await store.tables.listTableRows("tbl_new", { offset: 0, limit: 10 })).toEqual({
          totalRows: 0,
          rows: [],
          lastKey: null,
        });
        expect(await store.tables.listEditLog("tbl_new")).toEqual([]);
      });

      it("replaces a table keeping its rows, its edit log and its own rowCount", async () => {
        const store = await seeded();
        const created = await insert(store, "row_a", { region: "AMER", target: 1 });
        const replaced = table("tbl_targets", {
          name: "Targets 2027",
          columns: [],
          rowCount: 99,
          updatedAt: "2026-11-02T00:00:00Z",
        });
        expect(await store.tables.putTable(replaced)).toBe("updated");
        expect(await store.tables.getTable("tbl_targets")).toEqual({ ...replaced, rowCount: 2 });
        expect(await allRows(store)).toEqual([ROW_1, created]);
        expect((await store.tables.listEditLog("tbl_targets")).map((e) => [e.op, e.rowId])).toEqual([
          ["create", "row_a"],
        ]);
        // Row writes go on as before.
        await insert(store, "row_b", { anything: true });
        expect(await store.tables.getTable("tbl_targets")).toMatchObject({ rowCount: 3 });
      });

      it("reshapes every stored row in the put's transaction; a throw writes nothing", async () => {
        const store = await seeded();
        const created = await insert(store, "row_a", { region: "AMER", target: 1 });
        const renamed = table("tbl_targets", { name: "Reshaped", columns: [{ name: "region", type: "string" }] });
        await expect(
          store.tables.putTable(renamed, (row) => {
            if (row._id === "row_a") throw new Error("refused");
            return row;
          }),
        ).rejects.toThrow("refused");
        expect(await store.tables.getTable("tbl_targets")).toMatchObject({
          name: expect.not.stringMatching("Reshaped"),
        });
        expect(await allRows(store)).toEqual([ROW_1, created]);
        const keepRegion = (row: Row): Row => ({
          _id: row._id,
          _createdAt: row._createdAt,
          _updatedAt: row._updatedAt,
          region: row.region,
        });
        expect(await store.tables.putTable(renamed, keepRegion)).toBe("updated");
        expect(await allRows(store)).toEqual([keepRegion(ROW_1), keepRegion(created)]);
        expect(await store.tables.getTable("tbl_targets")).toMatchObject({ name: "Reshaped", rowCount: 2 });
        expect((await store.tables.listEditLog("tbl_targets")).map((e) => e.op)).toEqual(["create"]);
      });

      it("deletes a table with its rows and edit log; false when unknown", async () => {
        const store = await seeded();
        await insert(store, "row_a", { region: "AMER" });
        expect(await store.tables.deleteTable("tbl_targets")).toBe(true);
        expect(await store.tables.getTable("tbl_targets")).toBeNull();
        expect(await store.tables.getTableRow("tbl_targets", "row_1")).toBeNull();
        expect(await store.tables.listTableRows("tbl_targets", { offset: 0, limit: 10 })).toEqual({
          totalRows: 0,
          rows: [],
          lastKey: null,
        });
        expect(await store.tables.listEditLog("tbl_targets")).toEqual([]);
        expect(await store.tables.deleteTable("tbl_targets")).toBe(false);
        expect(await store.tables.deleteTable("tbl_nope")).toBe(false);
        // Put back under the same id, it starts empty: nothing of the old table is left behind.
        expect(await store.tables.putTable(table("tbl_targets"))).toBe("created");
        expect(await store.tables.getTable("tbl_targets")).toEqual(table("tbl_targets"));
        expect(await store.tables.listTableRows("tbl_targets", { offset: 0, limit: 10 })).toEqual({
          totalRows: 0,
          rows: [],
          lastKey: null,
        });
        expect(await store.tables.listEditLog("tbl_targets")).toEqual([]);
      });

      it("lists every input table by id (binary order), a page at a time", async () => {
        const store = await seeded();
        for (const id of ["tbl_z", "TBL_A", "tbl_a", "tbl_10"])
          await store.tables.putTable(table(id, { teamId: "team_mkt" }));
        expect((await store.tables.listTables({ after: null, limit: 2 })).map((t) => t.id)).toEqual([
          "TBL_A",
          "tbl_10",
        ]);
        expect((await store.tables.listTables({ after: "tbl_10", limit: 2 })).map((t) => t.id)).toEqual([
          "tbl_a",
          "tbl_targets",
        ]);
        expect(await store.tables.listTables({ after: "tbl_targets", limit: 2 })).toEqual([
          table("tbl_z", { teamId: "team_mkt" }),
        ]);
        expect(await store.tables.listTables({ after: "tbl_z", limit: 2 })).toEqual([]);
        expect((await store.tables.listTables({ after: "tbl_b", limit: 1 }))[0]).toEqual(
          await store.tables.getTable("tbl_targets"),
        );
        await store.tables.deleteTable("tbl_a");
        expect((await readAllPages((page) => store.tables.listTables(page), 2)).map((t) => t.id)).toEqual([
          "TBL_A",
          "tbl_10",
          "tbl_targets",
          "tbl_z",
        ]);
      });
    });

    describe("writes under an Idempotency-Key", () => {
      const use = (input: { scope?: string; key?: string; fingerprint?: string; status?: number } = {}) => ({
        scope: input.scope ?? "s1",
        key: input.key ?? "k1",
        fingerprint: input.fingerprint ?? "f1",
        status: input.status ?? 201,
        ttlMs: 1000,
      });
      type OnceOptions = { now?: number; key?: string; scope?: string; fingerprint?: string };
      const insertOnce = (store: Storage, rowId: string, options: OnceOptions = {}) =>
        store.tables.insertTableRowOnce({
          tableId: "tbl_targets",
          rowId,
          values: { region: rowId },
          actor: KEY,
          now: options.now ?? NOW,
          auditEvent: event("table.row.created", rowId),
          idempotency: use(options),
        });
      type UpdateOptions = { expectedUpdatedAt?: string | null; rowId?: string; now?: number; key?: string };
      const updateOnce = (store: Storage, patch: Row, options: UpdateOptions = {}) =>
        store.tables.updateTableRowOnce({
          tableId: "tbl_targets",
          rowId: options.rowId ?? "row_1",
          patch,
          expectedUpdatedAt: options.expectedUpdatedAt ?? null,
          actor: KEY,
          now: options.now ?? NOW,
          auditEvent: event("table.row.updated", options.rowId ?? "row_1"),
          idempotency: use({ key: options.key ?? "u1", status: 200 }),
        });

      it("stores one row for 20 concurrent inserts with one key; the others get its answer", async () => {
        const store = await seeded();
        const attempts = Array.from({ length: 20 }, (_, i) => insertOnce(store, `row_c${i}`, { fingerprint: `f${i}` }));
        const outcomes = await Promise.all(attempts);
        const written = outcomes.flatMap((o, i) => (o.state === "written" ? [i] : []));
        expect(written).toHaveLength(1);
        const winner = outcomes[written[0]!] as { state: "written"; result: Row };
        expect(winner.result).toMatchObject({ _id: `row_c${written[0]}`, region: `row_c${written[0]}` });
        for (const o of outcomes) {
          const response = { status: 201, body: winner.result };
          if (o.state !== "written") expect(o).toEqual({ state: "completed", fingerprint: `f${written[0]}`, response });
        }
        expect((await allRows(store)).map((r) => r._id)).toEqual(["row_1", `row_c${written[0]}`]);
        expect(await store.tables.getTable("tbl_targets")).toMatchObject({ rowCount: 2 });
        expect(await store.tables.listEditLog("tbl_targets")).toHaveLength(1);
      });

      it("replays the answer until the key expires by the clock, and keeps scopes and keys apart", async () => {
        const store = await seeded();
        const first = await insertOnce(store, "row_a");
        expect(first).toMatchObject({ state: "written", result: { _id: "row_a" } });
        const body = (first as { result: Row }).result;
        expect(await insertOnce(store, "row_b", { fingerprint: "other", now: NOW + 999 })).toEqual({
          state: "completed",
          fingerprint: "f1",
          response: { status: 201, body },
        });
        const wrote = (rowId: string) => ({ state: "written", result: { _id: rowId } });
        expect(await insertOnce(store, "row_s2", { scope: "s2" })).toMatchObject(wrote("row_s2"));
        expect(await insertOnce(store, "row_k2", { key: "k2" })).toMatchObject(wrote("row_k2"));
        // Expired: written afresh, and answered from then on.
        expect(await insertOnce(store, "row_c", { fingerprint: "f2", now: NOW + 1000 })).toMatchObject(wrote("row_c"));
        expect(await insertOnce(store, "row_d", { now: NOW + 1001 })).toMatchObject({
          state: "completed",
          fingerprint: "f2",
          response: { body: { _id: "row_c" } },
        });
        expect((await allRows(store)).map((r) => r._id)).toEqual(["row_1", "row_a", "row_s2", "row_k2", "row_c"]);
      });

      it("records nothing for a refused update (not found, a conflict); the right request writes", async () => {
        const store = await seeded();
        const missing = await updateOnce(store, { target: 1 }, { rowId: "row_nope" });
        expect(missing).toEqual({ state: "written", result: { status: "not_found" } });
        expect(await updateOnce(store, { target: 2 }, { expectedUpdatedAt: "2026-09-01T00:00:00.000Z" })).toEqual({
          state: "written",
          result: { status: "conflict", current: ROW_1 },
        });
        expect(await store.tables.listEditLog("tbl_targets")).toEqual([]);
        const done = await updateOnce(store, { target: 3 }, { expectedUpdatedAt: ROW_1._updatedAt });
        expect(done).toMatchObject({ state: "written", result: { status: "ok", row: { _id: "row_1", target: 3 } } });
        const row = (done as { result: { row: Row } }).result.row;
        // The key is checked before the row: the retry gets the first answer, not the conflict its write would now be.
        expect(await updateOnce(store, { target: 3 }, { expectedUpdatedAt: ROW_1._updatedAt, now: NOW + 5 })).toEqual({
          state: "completed",
          fingerprint: "f1",
          response: { status: 200, body: row },
        });
        expect(await store.tables.getTableRow("tbl_targets", "row_1")).toEqual(row);
        expect(await store.tables.listEditLog("tbl_targets")).toHaveLength(1);
      });

      it("records no key for a write that fails: the retry writes", async () => {
        const store = await seeded();
        const taken = event("table.row.created", "row_a");
        const row = { tableId: "tbl_targets", rowId: "row_a", values: { region: "AMER" }, actor: KEY, now: NOW };
        await store.tables.insertTableRow({ ...row, auditEvent: taken });
        const failing = store.tables.insertTableRowOnce({
          tableId: "tbl_targets",
          rowId: "row_b",
          values: { region: "APAC" },
          actor: KEY,
          now: NOW,
          auditEvent: taken,
          idempotency: use(),
        });
        await expect(failing).rejects.toThrow();
        expect(await insertOnce(store, "row_c")).toMatchObject({ state: "written", result: { _id: "row_c" } });
        expect((await allRows(store)).map((r) => r._id)).toEqual(["row_1", "row_a", "row_c"]);
      });
    });
  });
}
