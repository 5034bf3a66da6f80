import { describe, expect, it } from "vitest";
import type { Column, DatasetRecord, Row } from "../src/domain/model.js";
import { parseSort, parseWhere } from "../src/domain/row-query-model.js";
import type { PostgresStorage } from "../src/postgres/index.js";
import type { RowQuery } from "../src/ports/storage/rows.js";
import { postgresStores } from "./support/postgres-stores.js";
import { postgresSkipReason } from "./support/services.js";
import { uploadDataset, writeRows } from "./support/datasets.js";

// Rows whose JSON PostgreSQL cannot take apart (a string holding U+0000 or a
// lone surrogate: valid JSON, but neither jsonb nor text can hold it) are
// stored and served; filters, conditions and sorts on a dataset holding one
// answer rather than fail (no 500), comparing such a value with U+FFFD in
// place of what PostgreSQL cannot hold.
const skip = await postgresSkipReason();
const { store } = postgresStores({ prefix: "dp_unparse", maxConnections: 4 });

const COLUMNS: Column[] = [
  { name: "id", type: "number" },
  { name: "code", type: "string" },
  { name: "amount", type: "number" },
];
const NAMES = new Set(COLUMNS.map((c) => c.name));

function dataset(declared: boolean): DatasetRecord {
  return uploadDataset("ds_nul", "nul", COLUMNS, declared);
}

const ROWS: Row[] = [
  { id: 1, code: "a\u0000b", amount: 5 },
  { id: 2, code: "b", amount: 2 },
  { id: 3, code: "\ud800 lone", amount: 9 },
  { id: 4, code: "c\\u0000", amount: 1 },
  { id: 5, code: "d", amount: null },
];

async function ids(s: PostgresStorage, query: Partial<RowQuery>): Promise<unknown[]> {
  const page = await s.rows.readDatasetRows("ds_nul", {
    offset: 0,
    limit: 100,
    columns: null,
    filters: null,
    ...query,
  });
  const out: unknown[] = [];
  for await (const row of page.rows) out.push(row.id);
  return out;
}

describe.skipIf(skip)("postgres: a dataset holding rows PostgreSQL cannot take apart", () => {
  for (const declared of [false, true]) {
    it(`answers filters, conditions and sorts (${declared ? "declared, indexed" : "undeclared"} columns)`, async () => {
      const s = await store();
      await s.catalog.putDataset(dataset(declared));
      await writeRows(s, "ds_nul", "replace", ROWS, COLUMNS);
      const all = await s.rows.readDatasetRows("ds_nul", { offset: 0, limit: 100, columns: null, filters: null });
      const rows: Row[] = [];
      for await (const row of all.rows) rows.push(row);
      expect(rows).toEqual(ROWS);

      expect(await ids(s, { filters: { code: "b" } })).toEqual([2]);
      expect(await ids(s, { filters: { amount: 9 } })).toEqual([3]);
      expect(await ids(s, { where: parseWhere({ amount: { gte: 2 } }, NAMES) })).toEqual([1, 2, 3]);
      expect(await ids(s, { where: parseWhere({ code: { eq: "b" } }, NAMES) })).toEqual([2]);
      expect(await ids(s, { where: parseWhere({ code: { startsWith: "c" } }, NAMES) })).toEqual([4]);
      expect(await ids(s, { where: parseWhere({ code: { contains: "\\u0000" } }, NAMES) })).toEqual([4]);
      expect(await ids(s, { sort: parseSort("-amount", NAMES) })).toEqual([3, 1, 2, 4, 5]);
      expect(await ids(s, { sort: parseSort("code", NAMES) })).toEqual([1, 2, 4, 5, 3]);

      // Cursor pages over that sort continue right after the last row; columns are taken from the rows.
      const sort = parseSort("-amount", NAMES);
      const first = await s.rows.readDatasetRows("ds_nul", {
        offset: 0,
        limit: 2,
        columns: ["code"],
        filters: null,
        sort,
      });
      const firstRows: Row[] = [];
      for await (const row of first.rows) firstRows.push({ ...row });
      expect(firstRows).toEqual([{ code: "\ud800 lone" }, { code: "a\u0000b" }]);
      expect(first.totalRows).toBe(5);
      expect(await ids(s, { sort, after: first.lastKey() })).toEqual([2, 4, 5]);
      const projected = await s.rows.readDatasetRows("ds_nul", {
        offset: 0,
        limit: 1,
        columns: ["code", "missing"],
        filters: null,
      });
      for await (const row of projected.rows) expect({ ...row }).toEqual({ code: "a\u0000b", missing: null });
    });
  }

  it("answers conditions and sorts on an input table holding such a row", async () => {
    const s = await store();
    await s.tables.putTable({
      id: "tbl_nul",
      teamId: "team_ops",
      name: "nul",
      columns: [{ name: "code", type: "string" }],
      rowCount: 0,
      updatedAt: "2026-11-01T00:00:00.000Z",
    });
    const actor = { type: "api-key", id: "key_sync", name: "sync" } as const;
    for (const [i, code] of ["a\u0000b", "b", "c"].entries()) {
      await s.tables.insertTableRow({
        tableId: "tbl_nul",
        rowId: `r${i}`,
        values: { code },
        actor,
        now: Date.parse("2026-11-01T00:00:00.000Z") + i,
        auditEvent: {
          id: `evt_nul_${i}`,
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
    const names = new Set(["code", "_id"]);
    const page = await s.tables.listTableRows("tbl_nul", {
      offset: 0,
      limit: 10,
      where: parseWhere({ code: { gte: "b" } }, names),
      sort: parseSort("-code", names),
    });
    expect(page.rows.map((r) => r.code)).toEqual(["c", "b"]);
    expect(page.totalRows).toBe(2);
    const all = await s.tables.listTableRows("tbl_nul", { offset: 0, limit: 10, sort: parseSort("code", names) });
    expect(all.rows.map((r) => r._id)).toEqual(["r0", "r1", "r2"]);
  });
});
