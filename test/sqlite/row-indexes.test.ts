import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import type { Column, DatasetRecord, Row, TableRecord } from "../../src/domain/model.js";
import { parseSort, parseWhere } from "../../src/domain/row-query-model.js";
import type { RowQuery } from "../../src/ports/storage/rows.js";
import { createSqliteStorage, type SqliteStorage } from "../../src/sqlite/index.js";
import { uploadDataset, writeRows } from "../support/datasets.js";

/**
 * Row indexes on SQLite: a declared column gets one partial index, and the
 * reads that sort by it, page after a cursor on it or look it up are
 * index walks and seeks (EXPLAIN QUERY PLAN), never a sort of the dataset
 * or a scan of its rows. Undeclared datasets get none.
 */
const open: SqliteStorage[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((s) => s.close()));
});

const COLUMNS: Column[] = [
  { name: "id", type: "number" },
  { name: "code", type: "string" },
  { name: "amount", type: "number" },
];
const NAMES = new Set(COLUMNS.map((c) => c.name));
const ROWS = 3000;

function dataset(declared: boolean): DatasetRecord {
  return uploadDataset("ds_idx", "indexed", COLUMNS, declared);
}

async function loaded(declared = true): Promise<SqliteStorage> {
  const storage = createSqliteStorage({ path: ":memory:" });
  open.push(storage);
  await storage.catalog.putDataset(dataset(declared));
  const rows = Array.from({ length: ROWS }, (_, i): Row => ({ id: i, code: `c${i % 100}`, amount: (i * 7919) % 1000 }));
  await writeRows(storage, "ds_idx", "replace", rows, COLUMNS);
  return storage;
}

function indexNames(storage: SqliteStorage, table = "dataset_rows"): string[] {
  return storage.db
    .prepare<[string], { name: string }>(
      "SELECT name FROM sqlite_schema WHERE type = 'index' AND tbl_name = ? AND name LIKE 'rx1%' ORDER BY name",
    )
    .all(table)
    .map((r) => r.name);
}

/** The read's rows, and the query plans of the statements it prepared. */
async function traced(
  storage: SqliteStorage,
  query: Partial<RowQuery>,
): Promise<{ rows: Row[]; total: number; plans: string[][]; lastKey: RowQuery["after"] }> {
  const { db } = storage;
  const texts: string[] = [];
  const prepare = db.prepare.bind(db);
  db.prepare = ((text: string) => {
    texts.push(text);
    return prepare(text);
  }) as typeof db.prepare;
  try {
    const page = await storage.rows.readDatasetRows("ds_idx", {
      offset: 0,
      limit: 5,
      columns: null,
      filters: null,
      ...query,
    });
    const rows: Row[] = [];
    for await (const r of page.rows) rows.push({ ...r });
    const plans = texts
      .filter((t) => t.includes("dataset_rows"))
      // The plan does not depend on the bound values (no statistics): NULL for each placeholder.
      .map(
        (t) =>
          prepare(`EXPLAIN QUERY PLAN ${t}`).all(...new Array((t.match(/\?/g) ?? []).length).fill(null)) as Array<{
            detail: string;
          }>,
      )
      .map((lines) => lines.map((l) => l.detail));
    return { rows, total: page.totalRows, plans, lastKey: page.lastKey() };
  } finally {
    db.prepare = prepare;
  }
}

describe("row indexes (SQLite)", () => {
  it("a declared dataset gets one index per declared column; dropping the declaration or the dataset drops them", async () => {
    const storage = await loaded();
    expect(indexNames(storage)).toHaveLength(3);
    await storage.catalog.putDataset({ ...dataset(true), columns: COLUMNS.slice(0, 2) });
    expect(indexNames(storage)).toHaveLength(2);
    await storage.catalog.putDataset(dataset(false));
    expect(indexNames(storage)).toEqual([]);
    await storage.catalog.putDataset(dataset(true));
    expect(indexNames(storage)).toHaveLength(3);
    await storage.catalog.deleteDataset("ds_idx");
    expect(indexNames(storage)).toEqual([]);
  });

  it("a file whose declared dataset lacks its indexes (made before them) gets them when opened", async () => {
    const dir = mkdtempSync(join(tmpdir(), "dataport-rowidx-"));
    try {
      const path = join(dir, "db.sqlite");
      const first = createSqliteStorage({ path });
      await first.catalog.putDataset(dataset(true));
      for (const name of indexNames(first)) first.db.exec(`DROP INDEX "${name}"`);
      expect(indexNames(first)).toEqual([]);
      await first.close();
      const again = createSqliteStorage({ path });
      open.push(again);
      expect(indexNames(again)).toHaveLength(3);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("sorted pages, cursor pages, lookups and counts on a declared column use its index", async () => {
    const storage = await loaded();
    const checks: Array<[string, Partial<RowQuery>]> = [];
    const asc = parseSort("amount", NAMES);
    const desc = parseSort("-amount", NAMES);
    const first = await traced(storage, { sort: desc });
    expect(first.rows.map((r) => r.amount)).toEqual([999, 999, 999, 998, 998]);
    const deep = await traced(storage, { sort: desc, offset: 2700, limit: 1 });
    checks.push(
      ["sort asc", { sort: asc }],
      ["sort desc", { sort: desc }],
      ["cursor asc", { sort: asc, after: deep.lastKey }],
      ["cursor desc", { sort: desc, after: deep.lastKey }],
      ["eq", { where: parseWhere({ code: { eq: "c7" } }, NAMES) }],
      ["in", { where: parseWhere({ code: { in: ["c7", "c8"] } }, NAMES) }],
      ["range count", { where: parseWhere({ amount: { gte: 990 } }, NAMES), limit: 0 }],
    );
    for (const [label, query] of checks) {
      // A fresh store: statements are prepared (and so seen here) once per connection.
      const { plans } = await traced(await loaded(), query);
      expect(plans.length, label).toBeGreaterThan(0);
      for (const plan of plans) {
        const text = plan.join("\n");
        // Every access to the rows goes through a row index; nothing sorts the dataset's rows.
        expect(text, `${label}:\n${text}`).not.toMatch(/SCAN dataset_rows(?! USING INDEX rx1)/);
        expect(text, `${label}:\n${text}`).not.toMatch(/dataset_rows USING INTEGER PRIMARY KEY/);
        expect(text, `${label}:\n${text}`).toMatch(/dataset_rows USING (COVERING )?INDEX rx1/);
        // A sort only of the few rows the seeks found (their merge), or of a lookup's matches.
        plan.forEach((line, i) => {
          if (!line.includes("TEMP B-TREE") || /^SCAN \(subquery-\d+\)$/.test(plan[i - 1] ?? "")) return;
          for (const access of plan.filter((l) => l.includes("dataset_rows")))
            expect(access, `${label}:\n${text}`).toMatch(/^SEARCH .*\(<expr>=\?\)$/);
        });
        if (label === "sort asc") expect(text).not.toContain("TEMP B-TREE");
      }
    }
    // The desc cursor continues right after the 2701st row in that order.
    const next = await traced(storage, { sort: desc, after: deep.lastKey, limit: 3 });
    const all = await traced(storage, { sort: desc, offset: 2701, limit: 3 });
    expect(next.rows).toEqual(all.rows);
    expect(next.total).toBe(ROWS);
  });

  it("an undeclared dataset has no row index and reads its window", async () => {
    const storage = await loaded(false);
    expect(indexNames(storage)).toEqual([]);
    const { plans, rows } = await traced(storage, { where: parseWhere({ code: { eq: "c7" } }, NAMES) });
    expect(rows.map((r) => r.id)).toEqual([7, 107, 207, 307, 407]);
    expect(plans.flat().join("\n")).toContain("USING INTEGER PRIMARY KEY");
  });

  it("an input table's declared columns are indexed while declared", async () => {
    const storage = createSqliteStorage({ path: ":memory:" });
    open.push(storage);
    const table: TableRecord = {
      id: "tbl_idx",
      teamId: "team_ops",
      name: "t",
      columns: [{ name: "score", type: "number" }],
      rowCount: 0,
      updatedAt: "2026-11-01T00:00:00.000Z",
    };
    await storage.tables.putTable(table);
    expect(indexNames(storage, "table_rows")).toHaveLength(1);
    await storage.tables.putTable({ ...table, columns: [] });
    expect(indexNames(storage, "table_rows")).toEqual([]);
    await storage.tables.putTable(table);
    await storage.tables.deleteTable("tbl_idx");
    expect(indexNames(storage, "table_rows")).toEqual([]);
  });
});

describe("sqlite: a range bounded on both sides", () => {
  it("seeks between its two bounds: the kinds' own bounds stay out of the index range", async () => {
    const { boundedColumns, sqliteRowDialect } = await import("../../src/sqlite/row-query-dialect.js");
    const { renderPositional } = await import("../../src/sql/fragments.js");
    const { conditionSql } = await import("../../src/sql/row-compiler.js");
    const names = new Set(["at", "n"]);
    const both = parseWhere({ at: { gte: "2025-01-01", lt: "2025-02-01" }, n: { gt: 5 } }, names);
    expect([...boundedColumns(both)]).toEqual(["at"]);
    expect([...boundedColumns(parseWhere({ or: [{ at: { gte: "a" } }, { at: { lt: "b" } }] }, names))]).toEqual([]);
    const dialect = sqliteRowDialect("data", "row_key", { indexed: names, bounded: boundedColumns(both) });
    const text = renderPositional(conditionSql(both, dialect)).text.replace(/\s+/g, " ");
    // `at`: both kind bounds (text begins at '', blobs at X'') carry the unary plus; `n`, bounded once, keeps its kind
    // bound in the range.
    expect(text.match(/\+\(CASE json_type\(data, '\$\."at"'\)/g)).toHaveLength(2);
    expect(text).not.toContain(`+(CASE json_type(data, '$."n"')`);
    expect(text).toContain(`'$."n"') WHEN 'integer'`);
  });
});

describe("sqlite: counts of reads with conditions", () => {
  const count = async (storage: SqliteStorage, where: unknown) =>
    (
      await storage.rows.readDatasetRows("ds_idx", {
        offset: 0,
        limit: 0,
        columns: null,
        filters: null,
        where: parseWhere(where, NAMES),
      })
    ).totalRows;
  const write = (storage: SqliteStorage, mode: "replace" | "append", rows: Row[]) =>
    writeRows(storage, "ds_idx", mode, rows, COLUMNS);

  it("are remembered while the dataset's rows are unchanged, and made again after an append, a replace, a delete and re-create", async () => {
    const storage = await loaded(true);
    const where = { code: { eq: "c7" } };
    expect(await count(storage, where)).toBe(30);
    // Rows never change in place; changing one behind the store's back shows the count is not made again.
    storage.db
      .prepare(
        "UPDATE dataset_rows SET data = json_set(data, '$.code', 'c7') WHERE position = 0 AND dataset_seq = (SELECT seq FROM datasets WHERE id = 'ds_idx')",
      )
      .run();
    expect(await count(storage, where)).toBe(30);
    expect(await count(storage, { code: { eq: "c8" } })).toBe(30);

    await write(storage, "append", [{ id: 9001, code: "c7", amount: 1 }]);
    expect(await count(storage, where)).toBe(32);
    await write(storage, "replace", [
      { id: 1, code: "c7", amount: 1 },
      { id: 2, code: "c9", amount: 2 },
    ]);
    expect(await count(storage, where)).toBe(1);
    await storage.catalog.deleteDataset("ds_idx");
    await storage.catalog.putDataset(dataset(true));
    await write(storage, "replace", [
      { id: 1, code: "c9", amount: 1 },
      { id: 2, code: "c9", amount: 2 },
    ]);
    expect(await count(storage, where)).toBe(0);
  });
});

describe("sqlite: a sorted page under a condition matching many rows", () => {
  it("walks the sort column's index (not the condition's, then sorting every match) and answers as without indexes", async () => {
    const big = async (declared: boolean) => {
      const storage = createSqliteStorage({ path: ":memory:" });
      open.push(storage);
      await storage.catalog.putDataset(dataset(declared));
      const rows = Array.from({ length: 12_000 }, (_, i): Row => ({
        id: i,
        code: `c${(i * 7) % 500}`,
        amount: (i * 7919) % 12_000,
      }));
      await writeRows(storage, "ds_idx", "replace", rows, COLUMNS);
      return storage;
    };
    const indexed = await big(true);
    const plain = await big(false);
    const query = { where: parseWhere({ amount: { gte: 100 } }, NAMES), sort: parseSort("-code", NAMES), limit: 7 };
    const first = await traced(indexed, query);
    expect(first.total).toBe(11_900);
    const { datasetIndexPrefix, rowIndexName } = await import("../../src/sqlite/row-query-dialect.js");
    const datasetIndexName = (seq: number, column: string) => rowIndexName(datasetIndexPrefix(seq), column);
    const seq = (indexed.db.prepare("SELECT seq FROM datasets WHERE id = 'ds_idx'").get() as { seq: number }).seq;
    const plan = first.plans.at(-1)!.join("\n"); // the page (the count before it seeks the condition's index)
    expect(plan).toContain(`USING INDEX ${datasetIndexName(seq, "code")}`);
    expect(plan).not.toContain(datasetIndexName(seq, "amount"));
    const expected = await traced(plain, query);
    expect(first.rows).toEqual(expected.rows);
    const next = await traced(indexed, { ...query, after: first.lastKey });
    expect(next.rows).toEqual((await traced(plain, { ...query, after: expected.lastKey })).rows);
    expect(next.rows).toHaveLength(7);
  });
});

describe("sqlite: an input table's reads choose its row indexes", () => {
  it("counts through the condition's index, pages sorted by an indexed column through that column's, with the same rows as without", async () => {
    const { rowIndexName, tableIndexPrefix } = await import("../../src/sqlite/row-query-dialect.js");
    const tableIndexName = (tableId: string, column: string) => rowIndexName(tableIndexPrefix(tableId), column);
    const actor = { type: "api-key", id: "key_sync", name: "sync" } as const;
    const make = async (declared: boolean) => {
      const storage = createSqliteStorage({ path: ":memory:" });
      open.push(storage);
      const columns: Column[] = declared
        ? [
            { name: "score", type: "number" },
            { name: "team", type: "string" },
          ]
        : [];
      await storage.tables.putTable({
        id: "tbl_idx",
        teamId: "team_ops",
        name: "t",
        columns,
        rowCount: 0,
        updatedAt: "2026-11-01T00:00:00.000Z",
      });
      for (let i = 0; i < 300; i++) {
        await storage.tables.insertTableRow({
          tableId: "tbl_idx",
          rowId: `r${i}`,
          values: { score: (i * 37) % 300, team: `t${i % 7}` },
          actor,
          now: Date.parse("2026-11-01T00:00:00.000Z") + i,
          auditEvent: {
            id: `evt_t${declared}_${i}`,
            teamId: "team_ops",
            time: "2026-11-01T00:00:00.000Z",
            category: "audit",
            action: "table.row.created",
            actor,
            target: null,
            outcome: "success",
            ip: null,
            userAgent: null,
          },
        });
      }
      return storage;
    };
    const indexed = await make(true);
    const plain = await make(false);
    const names = new Set(["score", "team", "_id"]);
    const query = {
      offset: 0,
      limit: 5,
      where: parseWhere({ team: { eq: "t3" }, score: { gte: 10 } }, names),
      sort: parseSort("-score", names),
    };
    const texts: string[] = [];
    const prepare = indexed.db.prepare.bind(indexed.db);
    indexed.db.prepare = ((text: string) => {
      texts.push(text);
      return prepare(text);
    }) as typeof indexed.db.prepare;
    const page = await indexed.tables.listTableRows("tbl_idx", query);
    indexed.db.prepare = prepare;
    const expected = await plain.tables.listTableRows("tbl_idx", query);
    expect(page.rows.map((r) => r._id)).toEqual(expected.rows.map((r) => r._id));
    expect(page.totalRows).toBe(expected.totalRows);
    expect(texts.find((t) => t.includes("count(*)"))).toContain(`INDEXED BY "${tableIndexName("tbl_idx", "team")}"`);
    expect(texts.find((t) => t.includes("sort_value_"))).toContain(
      `INDEXED BY "${tableIndexName("tbl_idx", "score")}"`,
    );
    const next = await indexed.tables.listTableRows("tbl_idx", { ...query, after: page.lastKey, count: false });
    expect(next.rows.map((r) => r._id)).toEqual(
      (await plain.tables.listTableRows("tbl_idx", { ...query, after: expected.lastKey })).rows.map((r) => r._id),
    );
  });
});
