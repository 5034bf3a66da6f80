import { describe, expect, it, vi } from "vitest";
import type { Column, DatasetRecord, Row } from "../src/domain/model.js";
import { parseSort, parseWhere } from "../src/domain/row-query-model.js";
import type { PostgresStorage } from "../src/postgres/index.js";
import type { RowQuery } from "../src/ports/storage/rows.js";
import { indexBuildsSettled } from "../src/postgres/row-indexes.js";
import { postgresStores } from "./support/postgres-stores.js";
import { postgresSkipReason } from "./support/services.js";
import { uploadDataset, writeRows } from "./support/datasets.js";

// Row indexes on PostgreSQL (issue #29): declared columns get partial btree
// indexes on their sort terms; sorted pages, cursor pages, lookups and
// counts on them are index scans, planned with the statement's own
// parameters as the pool sends it (an unnamed statement: a custom plan).
const skip = await postgresSkipReason();
const { store } = postgresStores({ prefix: "dp_rowidx", maxConnections: 4 });

const COLUMNS: Column[] = [
  { name: "id", type: "number" },
  { name: "code", type: "string" },
  { name: "amount", type: "number" },
];
const NAMES = new Set(COLUMNS.map((c) => c.name));
const ROWS = 30_000;

function dataset(declared: boolean, columns = COLUMNS): DatasetRecord {
  return uploadDataset("ds_idx", "indexed", columns, declared);
}

async function fill(s: PostgresStorage, rows: Iterable<Row>): Promise<void> {
  await writeRows(s, "ds_idx", "replace", rows, COLUMNS);
}

function* generated(n: number): Generator<Row> {
  for (let i = 0; i < n; i++) yield { id: i, code: `c${i % 300}`, amount: (i * 7919) % 10_007 };
}

async function indexNames(s: PostgresStorage): Promise<string[]> {
  const rows = await s.db.query<{ name: string }>(
    "select indexname as name from pg_indexes where schemaname = $1 and indexname like 'rx1%' order by 1",
    [s.db.schema.slice(1, -1)],
  );
  return rows.map((r) => r.name);
}

async function read(s: PostgresStorage, query: Partial<RowQuery>) {
  const page = await s.rows.readDatasetRows("ds_idx", { offset: 0, limit: 5, columns: null, filters: null, ...query });
  const rows: Row[] = [];
  for await (const row of page.rows) rows.push({ ...row });
  return { total: page.totalRows, rows, lastKey: page.lastKey() };
}

/** The plan of the statement the read sends, with its parameters. */
async function planOf(s: PostgresStorage, query: Partial<RowQuery>): Promise<string> {
  const spy = vi.spyOn(s.db.pool, "query");
  await read(s, query);
  const [text, params] = spy.mock.calls.at(-1)! as unknown as [string, unknown[]];
  spy.mockRestore();
  const plan = await s.db.query<{ "QUERY PLAN": string }>(`explain ${text}`, params);
  return plan.map((r) => r["QUERY PLAN"]).join("\n");
}

describe.skipIf(!!skip)("postgres row indexes", () => {
  it("declared columns get their indexes; dropping the declaration or the dataset drops them", async () => {
    const s = await store(undefined, false);
    await s.catalog.putDataset(dataset(true));
    expect(await indexNames(s)).toHaveLength(6);
    await s.catalog.putDataset(dataset(true, COLUMNS.slice(0, 1)));
    expect(await indexNames(s)).toHaveLength(2);
    await s.catalog.putDataset(dataset(false));
    expect(await indexNames(s)).toEqual([]);
    await s.catalog.putDataset(dataset(true));
    await s.catalog.deleteDataset("ds_idx");
    expect(await indexNames(s)).toEqual([]);
  });

  it("a declaration answers without waiting out a long index build, which goes on and completes", async () => {
    const s = await store(undefined, false);
    // A transaction holding the lock an index build needs keeps the build waiting, as a large table would.
    const blocker = await s.db.pool.connect();
    try {
      await blocker.query("begin");
      await blocker.query(`lock table ${s.db.t("dataset_rows")} in share update exclusive mode`);
      const started = performance.now();
      expect(await s.catalog.putDataset(dataset(true))).toBe("created");
      const waited = performance.now() - started;
      expect(waited).toBeGreaterThanOrEqual(1900);
      expect(waited).toBeLessThan(8000);
      expect((await s.catalog.getDataset("ds_idx"))?.columnsDeclared).toBe(true);
      expect(await indexNames(s)).toEqual([]);
      await blocker.query("commit");
    } finally {
      blocker.release();
    }
    await indexBuildsSettled(s.db);
    expect(await indexNames(s)).toHaveLength(6);
  });

  it("sorted pages, cursor pages, lookups and counts on a declared column are index scans", async () => {
    const s = await store(undefined, false);
    await s.catalog.putDataset(dataset(true));
    await fill(s, generated(ROWS));
    await s.db.query(`analyze ${s.db.t("dataset_rows")}`);
    const desc = parseSort("-amount", NAMES);
    const asc = parseSort("amount", NAMES);
    const deepDesc = await read(s, { sort: desc, offset: 27_000, limit: 1 });
    const deepAsc = await read(s, { sort: asc, offset: 27_000, limit: 1 });
    const cases: Array<[string, Partial<RowQuery>, RegExp]> = [
      ["sort asc", { sort: asc }, /Index Scan using rx1_\w+_a on dataset_rows/],
      ["sort desc", { sort: desc }, /Index Scan Backward using rx1_\w+_d on dataset_rows/],
      [
        "cursor asc",
        { sort: asc, after: deepAsc.lastKey },
        /Index Scan using rx1_\w+_a on dataset_rows[^\n]*\n\s*Index Cond: \(ROW\(/,
      ],
      [
        "cursor desc",
        { sort: desc, after: deepDesc.lastKey },
        /Index Scan Backward using rx1_\w+_d on dataset_rows[^\n]*\n\s*Index Cond: \(ROW\(/,
      ],
      [
        "eq",
        { where: parseWhere({ code: { eq: "c7" } }, NAMES) },
        /Index Scan using rx1_\w+ on dataset_rows|Bitmap Index Scan on rx1_/,
      ],
      [
        "range count",
        { where: parseWhere({ amount: { gte: 10_000 } }, NAMES), limit: 0 },
        /Index (Only )?Scan using rx1_\w+ on dataset_rows|Bitmap Index Scan on rx1_/,
      ],
    ];
    for (const [label, query, expected] of cases) {
      const plan = await planOf(s, query);
      expect(plan, `${label}:\n${plan}`).toMatch(expected);
      expect(plan, `${label}:\n${plan}`).not.toMatch(/Seq Scan on dataset_rows|Sort Key: \(CASE/);
    }
    // Sorted by one indexed column under a condition on another that matches most rows (counted first):
    // the same rows, page after page, as the offsets give.
    const broad = { sort: desc, where: parseWhere({ code: { gte: "c" } }, NAMES) };
    const broadFirst = await read(s, { ...broad, limit: 4 });
    expect(broadFirst.total).toBe(ROWS);
    expect(broadFirst.rows).toEqual((await read(s, { sort: desc, limit: 4 })).rows);
    expect((await read(s, { ...broad, after: broadFirst.lastKey, limit: 3 })).rows).toEqual(
      (await read(s, { sort: desc, offset: 4, limit: 3 })).rows,
    );
    // The cursor pages continue where an offset would.
    expect((await read(s, { sort: desc, after: deepDesc.lastKey, limit: 3 })).rows).toEqual(
      (await read(s, { sort: desc, offset: 27_001, limit: 3 })).rows,
    );
    expect((await read(s, { sort: asc, after: deepAsc.lastKey, limit: 3 })).rows).toEqual(
      (await read(s, { sort: asc, offset: 27_001, limit: 3 })).rows,
    );
    expect(
      (await read(s, { where: parseWhere({ code: { eq: "c7" } }, NAMES), limit: 3 })).rows.map((r) => r.id),
    ).toEqual([7, 307, 607]);
    expect((await read(s, { where: parseWhere({ code: { eq: "c7" } }, NAMES), limit: 0 })).total).toBe(100);
  });

  it("a row PostgreSQL cannot take apart is written (the indexes leave it out), and its window is read without them", async () => {
    const s = await store(undefined, false);
    await s.catalog.putDataset(dataset(true));
    await fill(s, [
      { id: 1, code: "a\u0000b", amount: 1 },
      { id: 2, code: "b", amount: 2 },
    ]);
    expect((await read(s, {})).rows).toEqual([
      { id: 1, code: "a\u0000b", amount: 1 },
      { id: 2, code: "b", amount: 2 },
    ]);
    // Sorted, it is read as before the indexes (not through their condition, which would leave the row out).
    const spy = vi.spyOn(s.db.pool, "query");
    await read(s, { sort: parseSort("-amount", NAMES) }).catch(() => {
      // PostgreSQL's ->> fails on that row, as it did before row indexes.
    });
    const [text] = spy.mock.calls.at(-1)! as unknown as [string];
    spy.mockRestore();
    expect(text).toContain("order by");
    expect(text).not.toContain("!~");
    // The unparsable row is found without a scan.
    const probe = await s.db.query<{ "QUERY PLAN": string }>(
      `explain select 1 from ${s.db.t("dataset_rows")} where dataset_id = $1 and row::text ~ '\\\\u(0000|[dD][89abcdefABCDEF])'`,
      ["ds_idx"],
    );
    expect(probe.map((r) => r["QUERY PLAN"]).join("\n")).toContain("dataset_rows_unparsable");
  });

  it("a repeated count is answered without counting while the dataset is unchanged, and counted again after any change", async () => {
    const s = await store(undefined, false);
    await s.catalog.putDataset(dataset(false));
    await fill(s, generated(3000));
    const where = parseWhere({ code: { ne: "c1" } }, NAMES);
    const total = async () => (await read(s, { where, limit: 0 })).total;
    expect(await total()).toBe(2990);
    // The statement of a repeated read sends the count and does not run the counting subquery.
    const spy = vi.spyOn(s.db.pool, "query");
    expect(await total()).toBe(2990);
    const [text, params] = spy.mock.calls.at(-1)! as unknown as [string, unknown[]];
    spy.mockRestore();
    const analyzed = await s.db.query<{ "QUERY PLAN": string }>(`explain analyze ${text}`, params);
    expect(analyzed.map((r) => r["QUERY PLAN"]).join("\n")).toMatch(/Aggregate[^\n]*\(never executed\)/);
    // Every change of the rows is seen: an append, a replace, a delete and re-create with as many rows.
    await writeRows(s, "ds_idx", "append", [{ id: -1, code: "c2", amount: 0 }], COLUMNS);
    expect(await total()).toBe(2991);
    await fill(s, generated(300));
    expect(await total()).toBe(299);
    await s.catalog.deleteDataset("ds_idx");
    await s.catalog.putDataset(dataset(false));
    await fill(
      s,
      Array.from({ length: 300 }, () => ({ id: 0, code: "c1", amount: 0 })),
    );
    expect(await total()).toBe(0);
  });

  it("a where operand holding U+0000 answers as no stored value holds one (not an error)", async () => {
    const s = await store(undefined, false);
    for (const declared of [true, false]) {
      await s.catalog.putDataset(dataset(declared));
      await fill(s, [
        { id: 1, code: "a", amount: 1 },
        { id: 2, code: "ab", amount: 2 },
        { id: 3, code: "b", amount: 3 },
        { id: 4, amount: 4 },
      ]);
      const ids = async (where: unknown) =>
        (await read(s, { where: parseWhere(where, NAMES), limit: 10 })).rows.map((r) => r.id);
      expect(await ids({ code: { eq: "a\u0000" } })).toEqual([]);
      expect(await ids({ code: { ne: "a\u0000" } })).toEqual([1, 2, 3]);
      expect(await ids({ code: { in: ["a\u0000", "b"] } })).toEqual([3]);
      expect(await ids({ code: { nin: ["a\u0000"] } })).toEqual([1, 2, 3]);
      expect(await ids({ code: { gt: "a\u0000" } })).toEqual([2, 3]);
      expect(await ids({ code: { gte: "a\u0000x" } })).toEqual([2, 3]);
      expect(await ids({ code: { lt: "a\u0000" } })).toEqual([1]);
      expect(await ids({ code: { lte: "b\u0000" } })).toEqual([1, 2, 3]);
      expect(await ids({ code: { contains: "\u0000" } })).toEqual([]);
      expect(await ids({ code: { startsWith: "a\u0000" } })).toEqual([]);
      expect(await ids({ code: { eq: { k: "\u0000" } } })).toEqual([]);
    }
  });
});
