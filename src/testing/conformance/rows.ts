import { describe, expect, it } from "vitest";
import type { Column, Row } from "../../domain/model.js";
import type { Storage } from "../../ports/storage.js";
import type { DatasetRowsWrite, RowQuery } from "../../ports/storage/rows.js";
import type { RowCondition } from "../../domain/row-query-model.js";
import { parseAggregateQuery } from "../../domain/aggregate-query.js";
import { compareKeys, keyOf } from "../../domain/row-query-order.js";
import { type ConformanceOptions, seededStore, type StorageFactory, tick } from "./harness.js";
import { webhookFixture } from "./webhooks.js";

async function collect(rows: AsyncIterable<Row>): Promise<Row[]> {
  const out: Row[] = [];
  for await (const row of rows) out.push({ ...row });
  return out;
}

const all: RowQuery = { offset: 0, limit: null, columns: null, filters: null };
const rowsOf = async (store: Storage, datasetId: string) =>
  collect((await store.rows.readDatasetRows(datasetId, all)).rows);

const ORDERS: Row[] = [
  { order_id: "A-1", amount: 12.5, region: "EMEA" },
  { order_id: "A-2", amount: 30, region: "AMER" },
  { order_id: "A-3", amount: 7.25, region: "EMEA" },
  { order_id: "A-4", amount: 99, region: "APAC" },
  { order_id: "A-5", amount: 1, region: "EMEA" },
];
const ORDER_COLUMNS: Column[] = [
  { name: "order_id", type: "string" },
  { name: "amount", type: "number" },
  { name: "region", type: "string" },
];
const NEW_COLUMNS: Column[] = [
  { name: "order_id", type: "string" },
  { name: "amount", type: "number" },
  { name: "note", type: "string" },
];
const UPDATED_AT = "2026-11-01T12:00:00.000Z";

/** A one-shot gate: `open()` lets everything awaiting `opened` continue. */
function gate() {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  return { opened, open };
}

/**
 * Rows as a stream, each after a pause (so concurrent work interleaves). With
 * `hold`, the stream stops before row `hold.before` until the gate opens,
 * after telling `hold.reached`; with `failAfter`, it throws after that many rows.
 */
async function* stream(
  rows: readonly Row[],
  options: { hold?: { before: number; reached: () => void; until: Promise<void> }; failAfter?: number } = {},
) {
  for (let i = 0; i < rows.length; i++) {
    if (options.failAfter === i) throw new Error("the upload broke off");
    if (options.hold?.before === i) {
      options.hold.reached();
      await options.hold.until;
    }
    await tick();
    yield { ...rows[i]! };
  }
  if (options.failAfter === rows.length) throw new Error("the upload broke off");
}

/**
 * A bulk write of `rows`; `columnsCalls` records, for each call of `columns()`, whether the rows had all been read by
 * then.
 */
function bulk(
  store: Storage,
  datasetId: string,
  mode: DatasetRowsWrite["mode"],
  rows: AsyncIterable<Row>,
  columns: Column[] = NEW_COLUMNS,
) {
  const columnsCalls: boolean[] = [];
  let finished = false;
  async function* watched() {
    yield* rows;
    finished = true;
  }
  const done = store.rows.writeDatasetRows({
    datasetId,
    mode,
    rows: watched(),
    columns: () => {
      columnsCalls.push(finished);
      return columns;
    },
    updatedAt: UPDATED_AT,
  });
  return { done, columnsCalls };
}

const nb = (prefix: string, n: number): Row[] =>
  Array.from({ length: n }, (_, i) => ({ order_id: `${prefix}-${i + 1}`, amount: i + 1, note: prefix }));

/** Rows of several JSON kinds per column, for `where` and `sort` (positions 0–7). */
const MIXED: Row[] = [
  { id: "r0", amount: 10, name: "apple", flag: true, tags: ["a"] },
  { id: "r1", amount: 2.5, name: "Banana", flag: false },
  { id: "r2", amount: null, name: "cherry", flag: true },
  { id: "r3", name: "apricot" },
  { id: "r4", amount: "10", name: "", flag: null },
  { id: "r5", amount: 10, name: "éclair", flag: false, tags: { k: 1 } },
  { id: "r6", amount: -1, name: "😀 smile", flag: true },
  { id: "r7", amount: true, name: "\uffff end" },
];
const MIXED_COLUMNS: Column[] = ["id", "amount", "name", "flag", "tags"].map((name) => ({ name, type: "string" }));

/** A new upload dataset holding `rows`. */
async function datasetWith(
  store: Storage,
  id: string,
  rows: readonly Row[],
  columns: Column[] = MIXED_COLUMNS,
): Promise<void> {
  await store.catalog.putDataset({
    id,
    teamId: "team_ops",
    name: id,
    type: "upload",
    connectionId: null,
    source: null,
    columns,
    rowCount: 0,
    lastRefreshedAt: null,
    updatedAt: UPDATED_AT,
  });
  await store.rows.writeDatasetRows({
    datasetId: id,
    mode: "replace",
    rows: stream(rows),
    columns: () => columns,
    updatedAt: UPDATED_AT,
  });
}

/** The ids of a query's page on `ds_mixed`, with its total. */
async function idsOf(store: Storage, query: Partial<RowQuery>): Promise<{ total: number; ids: unknown[] }> {
  const page = await store.rows.readDatasetRows("ds_mixed", { ...all, ...query });
  return { total: page.totalRows, ids: (await collect(page.rows)).map((r) => r.id) };
}

/** Every row of a query, page by page through `lastKey` / `after`. */
async function pageThrough(store: Storage, datasetId: string, query: Partial<RowQuery>, size: number): Promise<Row[]> {
  const out: Row[] = [];
  let after: RowQuery["after"] = null;
  for (let pages = 0; pages < 10_000; pages++) {
    const page = await store.rows.readDatasetRows(datasetId, { ...all, ...query, limit: size, after });
    const rows = await collect(page.rows);
    out.push(...rows);
    if (rows.length < size) return out;
    after = page.lastKey();
  }
  throw new Error("paging did not end");
}

export function describeRowsConformance(name: string, factory: StorageFactory, options: ConformanceOptions = {}): void {
  describe.skipIf(!!options.skip)(`${name}: rows`, () => {
    const seeded = seededStore(factory, options);
    const withWebhooks = seededStore(factory, options, webhookFixture);

    it("pages rows in stored order with offset and limit pushed down", async () => {
      const store = await seeded();
      const page = await store.rows.readDatasetRows("ds_orders", { ...all, offset: 1, limit: 2 });
      expect(page.totalRows).toBe(5);
      expect(await collect(page.rows)).toEqual([
        { order_id: "A-2", amount: 30, region: "AMER" },
        { order_id: "A-3", amount: 7.25, region: "EMEA" },
      ]);
      expect(await collect((await store.rows.readDatasetRows("ds_orders", { ...all, offset: 5 })).rows)).toEqual([]);
      expect(await collect((await store.rows.readDatasetRows("ds_orders", { ...all, limit: 0 })).rows)).toEqual([]);
      expect((await collect((await store.rows.readDatasetRows("ds_orders", all)).rows)).map((r) => r.order_id)).toEqual(
        ["A-1", "A-2", "A-3", "A-4", "A-5"],
      );
    });

    it("aggregates a dataset's rows in the store: groups in order, having, a page, totals over every matching row", async () => {
      const store = await seeded();
      const query = parseAggregateQuery(
        {
          groupBy: "region",
          metrics: "count,sum(amount),avg(amount),min(order_id)",
          where: { amount: { gt: 1 } },
          having: { count: { gte: 1 } },
          sort: "-sum(amount)",
          maxRows: 2,
        },
        new Set(ORDER_COLUMNS.map((c) => c.name)),
      );
      expect(await store.rows.aggregateDatasetRows("ds_orders", query)).toEqual({
        groups: [
          { region: "APAC", count: 1, "sum(amount)": 99, "avg(amount)": 99, "min(order_id)": "A-4" },
          { region: "AMER", count: 1, "sum(amount)": 30, "avg(amount)": 30, "min(order_id)": "A-2" },
        ],
        matchedRows: 4,
        totalGroups: 3,
        totals: { count: 4, "sum(amount)": 148.75, "avg(amount)": 37.1875, "min(order_id)": "A-1" },
      });
      // Without keys: one group, there even when nothing matches (and for a dataset the store does not know).
      const none = parseAggregateQuery(
        { metrics: "count,max(amount)", filters: { region: "nowhere" } },
        new Set(["region", "amount"]),
      );
      const empty = {
        groups: [{ count: 0, "max(amount)": null }],
        matchedRows: 0,
        totalGroups: 1,
        totals: { count: 0, "max(amount)": null },
      };
      expect(await store.rows.aggregateDatasetRows("ds_orders", none)).toEqual(empty);
      expect(await store.rows.aggregateDatasetRows("ds_nope", none)).toEqual(empty);
    });

    it("filters by JSON equality and selects columns in the asked order", async () => {
      const store = await seeded();
      const page = await store.rows.readDatasetRows("ds_orders", {
        offset: 1,
        limit: 5,
        columns: ["amount", "order_id"],
        filters: { region: "EMEA" },
      });
      expect(page.totalRows).toBe(3);
      expect(await collect(page.rows)).toEqual([
        { amount: 7.25, order_id: "A-3" },
        { amount: 1, order_id: "A-5" },
      ]);
      const typed = await store.rows.readDatasetRows("ds_orders", { ...all, filters: { amount: "30" } });
      expect(typed.totalRows).toBe(0);
      const number = await store.rows.readDatasetRows("ds_orders", { ...all, filters: { amount: 30 } });
      expect((await collect(number.rows)).map((r) => r.order_id)).toEqual(["A-2"]);
    });

    it("gives rowsJson, when it offers it, as exactly the JSON of the rows it would yield", async () => {
      const store = await seeded();
      for (const query of [all, { ...all, offset: 1, limit: 2 }, { ...all, filters: { region: "EMEA" } }]) {
        const json = (await store.rows.readDatasetRows("ds_orders", query)).rowsJson;
        if (!json) continue; // optional capability
        const texts: string[] = [];
        for await (const batch of json) texts.push(...batch);
        const rows = await collect((await store.rows.readDatasetRows("ds_orders", query)).rows);
        expect(texts.map((t) => JSON.parse(t))).toEqual(rows);
        expect(texts).toEqual(rows.map((r) => JSON.stringify(r)));
      }
    });

    it("replaces a connection dataset's rows in one step", async () => {
      const store = await seeded();
      await store.rows.replaceDatasetRows("ds_stores", {
        rows: [
          { store_id: "S2", city: "Oslo", open: true },
          { store_id: "S3", city: "Rome", open: false },
        ],
        columns: [
          { name: "store_id", type: "string" },
          { name: "city", type: "string" },
          { name: "open", type: "boolean" },
        ],
        refreshedAt: "2026-11-01T00:00:00.000Z",
      });
      const dataset = await store.catalog.getDataset("ds_stores");
      expect(dataset).toMatchObject({
        rowCount: 2,
        lastRefreshedAt: "2026-11-01T00:00:00.000Z",
        updatedAt: "2026-11-01T00:00:00.000Z",
      });
      expect(dataset?.columns.map((c) => c.name)).toEqual(["store_id", "city", "open"]);
      expect(await collect((await store.rows.readDatasetRows("ds_stores", all)).rows)).toEqual([
        { store_id: "S2", city: "Oslo", open: true },
        { store_id: "S3", city: "Rome", open: false },
      ]);
    });

    it("replaces a dataset's rows from a stream: rows, columns, rowCount and updatedAt, lastRefreshedAt kept", async () => {
      const store = await seeded();
      const rows = [
        { order_id: "B-1", amount: 2, note: null },
        { order_id: "B-2", amount: 3.5, note: "x" },
      ];
      const write = bulk(store, "ds_stores", "replace", stream(rows));
      expect(await write.done).toEqual({ rowCount: 2 });
      expect(write.columnsCalls).toEqual([true]);
      expect(await rowsOf(store, "ds_stores")).toEqual(rows);
      expect(await store.catalog.getDataset("ds_stores")).toMatchObject({
        columns: NEW_COLUMNS,
        rowCount: 2,
        updatedAt: UPDATED_AT,
        lastRefreshedAt: "2026-10-03T00:00:00Z",
      });
      const none = bulk(store, "ds_stores", "replace", stream([]), []);
      expect(await none.done).toEqual({ rowCount: 0 });
      expect(await rowsOf(store, "ds_stores")).toEqual([]);
      expect(await store.catalog.getDataset("ds_stores")).toMatchObject({ columns: [], rowCount: 0 });
    });

    it("appends a stream after the stored rows", async () => {
      const store = await seeded();
      const write = bulk(store, "ds_orders", "append", stream(nb("N", 2)));
      expect(await write.done).toEqual({ rowCount: 7 });
      expect(write.columnsCalls).toEqual([true]);
      expect(await rowsOf(store, "ds_orders")).toEqual([...ORDERS, ...nb("N", 2)]);
      expect(await store.catalog.getDataset("ds_orders")).toMatchObject({
        columns: NEW_COLUMNS,
        rowCount: 7,
        updatedAt: UPDATED_AT,
        lastRefreshedAt: null,
      });
      const page = await store.rows.readDatasetRows("ds_orders", {
        offset: 4,
        limit: 2,
        columns: ["order_id"],
        filters: null,
      });
      expect([page.totalRows, await collect(page.rows)]).toEqual([7, [{ order_id: "A-5" }, { order_id: "N-1" }]]);
    });

    it("writes nothing when the stream throws, and rethrows its error", async () => {
      const store = await seeded();
      const before = await store.catalog.getDataset("ds_orders");
      for (const mode of ["replace", "append"] as const) {
        for (const failAfter of [0, 2]) {
          await expect(bulk(store, "ds_orders", mode, stream(nb("F", 3), { failAfter })).done).rejects.toThrow(
            "the upload broke off",
          );
          expect(await rowsOf(store, "ds_orders")).toEqual(ORDERS);
          expect(await store.catalog.getDataset("ds_orders")).toEqual(before);
        }
      }
    });

    it("refuses an unknown dataset and an input table, writing nothing", async () => {
      const store = await seeded();
      await expect(bulk(store, "ds_nope", "replace", stream(nb("X", 1))).done).rejects.toThrow();
      expect(await store.catalog.getDataset("ds_nope")).toBeNull();
      await expect(bulk(store, "tbl_targets", "append", stream(nb("X", 1))).done).rejects.toThrow();
      await expect(bulk(store, "tbl_targets", "replace", stream(nb("X", 1))).done).rejects.toThrow();
      expect(await store.catalog.getDataset("tbl_targets")).toMatchObject({
        type: "input_table",
        rowCount: 1,
        columns: [
          { name: "region", type: "string" },
          { name: "target", type: "number" },
        ],
      });
    });

    it("keeps __proto__ and constructor as ordinary column names in streamed rows", async () => {
      const store = await seeded();
      const row: Row = JSON.parse('{"__proto__":{"polluted":"yes"},"constructor":"c","order_id":"P-1"}');
      await bulk(store, "ds_orders", "replace", stream([row])).done;
      const [stored] = await rowsOf(store, "ds_orders");
      expect(Object.hasOwn(stored!, "__proto__")).toBe(true);
      expect(Object.getOwnPropertyDescriptor(stored, "__proto__")?.value).toEqual({ polluted: "yes" });
      expect(stored!.constructor).toBe("c");
      expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    });

    it("readers see the rows before a write or after it, never a part, even a page read across it", async () => {
      const store = await seeded();
      // A page opened before the write, two rows read.
      const early = (await store.rows.readDatasetRows("ds_orders", all)).rows[Symbol.asyncIterator]();
      const earlyRows = [(await early.next()).value, (await early.next()).value];
      const reached = gate();
      const release = gate();
      const write = bulk(
        store,
        "ds_orders",
        "replace",
        stream(nb("R", 3), { hold: { before: 2, reached: reached.open, until: release.opened } }),
      );
      await reached.opened;
      // Mid-write: the old rows, whole.
      const during = await store.rows.readDatasetRows("ds_orders", { ...all, offset: 1, limit: 2 });
      expect(during.totalRows).toBe(5);
      expect(await collect(during.rows)).toEqual(ORDERS.slice(1, 3));
      expect((await store.catalog.getDataset("ds_orders"))!.rowCount).toBe(5);
      release.open();
      expect(await write.done).toEqual({ rowCount: 3 });
      for (let next = await early.next(); !next.done; next = await early.next()) earlyRows.push(next.value);
      expect(earlyRows.map((r) => ({ ...r }))).toEqual(ORDERS);
      const after = await store.rows.readDatasetRows("ds_orders", all);
      expect(after.totalRows).toBe(3);
      expect(await collect(after.rows)).toEqual(nb("R", 3));
      expect((await store.catalog.getDataset("ds_orders"))!.rowCount).toBe(3);
    });

    it("serialises concurrent bulk writes to one dataset: the outcome of one after the other", async () => {
      const store = await seeded();
      const x = bulk(store, "ds_orders", "append", stream(nb("X", 3)));
      const y = bulk(store, "ds_orders", "append", stream(nb("Y", 3)));
      const counts = [(await x.done).rowCount, (await y.done).rowCount];
      const rows = await rowsOf(store, "ds_orders");
      const xFirst = counts[0] === 8;
      expect(counts).toEqual(xFirst ? [8, 11] : [11, 8]);
      expect(rows).toEqual(
        xFirst ? [...ORDERS, ...nb("X", 3), ...nb("Y", 3)] : [...ORDERS, ...nb("Y", 3), ...nb("X", 3)],
      );
      expect((await store.catalog.getDataset("ds_orders"))!.rowCount).toBe(11);

      const replace = bulk(store, "ds_secret", "replace", stream(nb("R", 2)));
      const append = bulk(store, "ds_secret", "append", stream(nb("A", 2)));
      const [replaced, appended] = [(await replace.done).rowCount, (await append.done).rowCount];
      expect(replaced).toBe(2);
      const final = await rowsOf(store, "ds_secret");
      // Append last: the new rows then the appended ones. Replace last: only the new rows.
      if (appended === 4) expect(final).toEqual([...nb("R", 2), ...nb("A", 2)]);
      else expect([appended, final]).toEqual([3, nb("R", 2)]);
      expect((await store.catalog.getDataset("ds_secret"))!.rowCount).toBe(final.length);
    });

    describe("row queries (where, sort, after)", () => {
      const mixed = async () => {
        const store = await seeded();
        await datasetWith(store, "ds_mixed", MIXED);
        return store;
      };
      const test = (column: string, op: string, operand: unknown) =>
        ({ kind: "test", column, op, operand }) as RowCondition;

      it("compares by JSON kind: numbers never equal strings, nulls and absent values never match ne, nin or a comparison", async () => {
        const store = await mixed();
        const cases: Array<[RowCondition, string[]]> = [
          [test("amount", "eq", 10), ["r0", "r5"]],
          [test("amount", "eq", "10"), ["r4"]],
          [test("amount", "eq", null), ["r2", "r3"]],
          [test("amount", "ne", 10), ["r1", "r4", "r6", "r7"]],
          [test("amount", "ne", null), ["r0", "r1", "r4", "r5", "r6", "r7"]],
          [test("amount", "gt", 2.5), ["r0", "r5"]],
          [test("amount", "gte", 2.5), ["r0", "r1", "r5"]],
          [test("amount", "lt", 0), ["r6"]],
          [test("amount", "lte", 10), ["r0", "r1", "r5", "r6"]],
          [test("amount", "gt", "1"), ["r4"]],
          [test("name", "gt", "b"), ["r2", "r5", "r6", "r7"]],
          [test("name", "lt", "B"), ["r4"]],
          [test("amount", "in", [10, "10"]), ["r0", "r4", "r5"]],
          [test("amount", "in", [null, 2.5]), ["r1", "r2", "r3"]],
          [test("amount", "nin", [10, null]), ["r1", "r4", "r6", "r7"]],
          [test("amount", "in", [true]), ["r7"]],
          [test("tags", "in", [["a"]]), ["r0"]],
          [test("tags", "eq", { k: 1 }), ["r5"]],
          [test("tags", "ne", ["a"]), ["r5"]],
          [test("flag", "eq", true), ["r0", "r2", "r6"]],
          [test("flag", "eq", false), ["r1", "r5"]],
          [test("flag", "isNull", true), ["r3", "r4", "r7"]],
          [test("flag", "isNull", false), ["r0", "r1", "r2", "r5", "r6"]],
          [test("name", "contains", "an"), ["r1"]],
          [test("name", "contains", "AN"), []],
          [test("name", "startsWith", "ap"), ["r0", "r3"]],
          [test("name", "startsWith", "😀"), ["r6"]],
          [test("amount", "contains", "1"), ["r4"]],
        ];
        for (const [where, ids] of cases) {
          expect({ where, ...(await idsOf(store, { where })) }).toEqual({ where, total: ids.length, ids });
        }
      });

      it("combines and/or with each other, with several operators of one column and with filters", async () => {
        const store = await mixed();
        const where: RowCondition = {
          kind: "all",
          of: [
            { kind: "any", of: [test("amount", "gt", 5), test("name", "startsWith", "ch")] },
            test("flag", "eq", true),
          ],
        };
        expect(await idsOf(store, { where })).toEqual({ total: 2, ids: ["r0", "r2"] });
        expect(
          await idsOf(store, { where: { kind: "all", of: [test("amount", "gte", 0), test("amount", "lt", 10)] } }),
        ).toEqual({ total: 1, ids: ["r1"] });
        expect(await idsOf(store, { where: { kind: "all", of: [] } })).toEqual({
          total: 8,
          ids: MIXED.map((r) => r.id),
        });
        expect(await idsOf(store, { where: test("amount", "eq", 10), filters: { flag: false } })).toEqual({
          total: 1,
          ids: ["r5"],
        });
        expect(await idsOf(store, { where: test("flag", "isNull", false), offset: 1, limit: 2 })).toEqual({
          total: 5,
          ids: ["r1", "r2"],
        });
      });

      it("sorts numbers before strings before booleans before objects and arrays, nulls last both ways, ties by stored order", async () => {
        const store = await mixed();
        const sorted = async (...sort: Array<[string, boolean]>) =>
          (await idsOf(store, { sort: sort.map(([column, descending]) => ({ column, descending })) })).ids;
        expect(await sorted(["amount", false])).toEqual(["r6", "r1", "r0", "r5", "r4", "r7", "r2", "r3"]);
        expect(await sorted(["amount", true])).toEqual(["r7", "r4", "r0", "r5", "r1", "r6", "r2", "r3"]);
        // Code point order: "B" < "a", and U+FFFF before U+1F600 (UTF-16 order would say otherwise).
        expect(await sorted(["name", false])).toEqual(["r4", "r1", "r0", "r3", "r2", "r5", "r7", "r6"]);
        expect(await sorted(["flag", false], ["name", true])).toEqual(["r5", "r1", "r6", "r2", "r0", "r7", "r3", "r4"]);
        expect(await sorted(["tags", false])).toEqual(["r0", "r5", "r1", "r2", "r3", "r4", "r6", "r7"]);
        const page = await store.rows.readDatasetRows("ds_mixed", {
          ...all,
          where: test("amount", "ne", null),
          sort: [{ column: "amount", descending: true }],
          columns: ["name"],
          offset: 1,
          limit: 3,
        });
        expect(page.totalRows).toBe(6);
        expect(await collect(page.rows)).toEqual([{ name: "" }, { name: "apple" }, { name: "éclair" }]);
        // The key of the last row: its sort value (a column not selected) and its stored position.
        expect(page.lastKey()).toEqual({ values: [10], position: expect.any(Number) });
      });

      it("continues after a key: cursor pages visit every matching row once, in order, sorted or not", async () => {
        const store = await mixed();
        const queries: Array<Partial<RowQuery>> = [
          {},
          { sort: [{ column: "amount", descending: false }] },
          {
            sort: [
              { column: "flag", descending: true },
              { column: "amount", descending: false },
            ],
          },
          { where: test("amount", "ne", null), sort: [{ column: "amount", descending: true }] },
          { where: test("name", "gt", "a"), filters: { flag: true } },
        ];
        for (const query of queries) {
          const whole = (await idsOf(store, query)).ids;
          for (const size of [1, 3]) {
            expect({ query, size, ids: (await pageThrough(store, "ds_mixed", query, size)).map((r) => r.id) }).toEqual({
              query,
              size,
              ids: whole,
            });
          }
        }
        const first = await store.rows.readDatasetRows("ds_mixed", {
          ...all,
          limit: 2,
          sort: [{ column: "name", descending: false }],
        });
        await collect(first.rows);
        const after = first.lastKey();
        expect(after?.values).toEqual(["Banana"]);
        const next = await store.rows.readDatasetRows("ds_mixed", {
          ...all,
          limit: 2,
          offset: 1,
          sort: [{ column: "name", descending: false }],
          after,
        });
        expect(next.totalRows).toBe(8);
        expect((await collect(next.rows)).map((r) => r.id)).toEqual(["r3", "r2"]);
        expect((await store.rows.readDatasetRows("ds_mixed", { ...all, limit: 0 })).lastKey()).toBeNull();
      });

      it("pages in stored order past rows appended meanwhile: no row twice, none missed", async () => {
        const store = await mixed();
        const first = await store.rows.readDatasetRows("ds_mixed", { ...all, limit: 5 });
        expect((await collect(first.rows)).map((r) => r.id)).toEqual(["r0", "r1", "r2", "r3", "r4"]);
        await bulk(store, "ds_mixed", "append", stream([{ id: "r8", amount: 3 }]), MIXED_COLUMNS).done;
        const rest = await store.rows.readDatasetRows("ds_mixed", { ...all, limit: 10, after: first.lastKey() });
        expect((await collect(rest.rows)).map((r) => r.id)).toEqual(["r5", "r6", "r7", "r8"]);
      });

      it("keeps positions growing across a replace or a refresh: reading after an older key starts at the new rows", async () => {
        const store = await mixed();
        const ids = async (query: Partial<RowQuery>) => {
          const page = await store.rows.readDatasetRows("ds_mixed", { ...all, ...query });
          return (await collect(page.rows)).map((r) => r.id);
        };
        const first = await store.rows.readDatasetRows("ds_mixed", { ...all, limit: 5 });
        expect((await collect(first.rows)).map((r) => r.id)).toEqual(["r0", "r1", "r2", "r3", "r4"]);
        const replacement = stream([{ id: "n0" }, { id: "n1" }, { id: "n2" }]);
        await bulk(store, "ds_mixed", "replace", replacement, MIXED_COLUMNS).done;
        expect(await ids({ limit: 10, after: first.lastKey() })).toEqual(["n0", "n1", "n2"]);
        const again = await store.rows.readDatasetRows("ds_mixed", { ...all, limit: 1 });
        expect((await collect(again.rows)).map((r) => r.id)).toEqual(["n0"]);
        const refresh = { rows: [{ id: "f0" }, { id: "f1" }], columns: MIXED_COLUMNS, refreshedAt: UPDATED_AT };
        await store.rows.replaceDatasetRows("ds_mixed", refresh);
        expect(await ids({ limit: 10, after: again.lastKey() })).toEqual(["f0", "f1"]);
      });

      it("streams long sorted and filtered reads in the same order as short pages", async () => {
        const store = await seeded();
        const rows: Row[] = Array.from({ length: 2600 }, (_, i) => ({
          id: i,
          g: i % 7 === 3 ? null : i % 7,
          s: `v${(i * 7919) % 1000}`,
        }));
        const columns: Column[] = ["id", "g", "s"].map((name) => ({ name, type: "string" }));
        await datasetWith(store, "ds_long", rows, columns);
        const sort = [
          { column: "g", descending: true },
          { column: "s", descending: false },
        ];
        const where = test("id", "gte", 100);
        const expected = rows
          .map((row, i) => ({ row, key: keyOf(row, i, sort) }))
          .filter(({ row }) => (row.id as number) >= 100)
          .sort((a, b) => compareKeys(a.key, b.key, sort))
          .map(({ row }) => row.id);
        const page = await store.rows.readDatasetRows("ds_long", { ...all, where, sort, offset: 5 });
        expect(page.totalRows).toBe(2500);
        const read = (await collect(page.rows)).map((r) => r.id);
        expect(read).toEqual(expected.slice(5));
        expect(page.lastKey()).toMatchObject({ values: [null, expect.any(String)] });
        const paged = (await pageThrough(store, "ds_long", { where, sort }, 1100)).map((r) => r.id);
        expect(paged).toEqual(expected);
        // Unsorted, past a cursor, longer than a batch.
        const half = await store.rows.readDatasetRows("ds_long", { ...all, limit: 1300 });
        await collect(half.rows);
        const rest = await store.rows.readDatasetRows("ds_long", { ...all, after: half.lastKey() });
        expect((await collect(rest.rows)).map((r) => r.id)).toEqual(rows.slice(1300).map((r) => r.id));
      });
    });
  });
}
