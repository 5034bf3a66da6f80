import fc from "fast-check";
import { afterAll, describe, expect, it } from "vitest";
import type { Actor, AuditEvent, Column, Row } from "../../src/domain/model.js";
import { parseSort, parseWhere, type RowKey, type SortKey } from "../../src/domain/row-query-model.js";
import { ApiError } from "../../src/base/api-error.js";
import { createMemoryStorage } from "../../src/memory/memory-storage.js";
import type { Storage } from "../../src/ports/storage.js";
import { createPostgresStorage } from "../../src/postgres/index.js";
import { createSqliteStorage } from "../../src/sqlite/index.js";
import { dropSchemas, POSTGRES_URL, postgresSkipReason, testSchema } from "../support/services.js";
import { uploadDataset, writeRows } from "../support/datasets.js";

/**
 * The three stores answer every row query alike: random small datasets
 * (values of every JSON kind, absent ones, ties) and random where/sort/
 * offset/limit, compared page by page, cursor paging included. And the
 * parser answers any input with a condition or a 400, never anything else.
 */
const RUNS = Number(process.env.DATAPORT_FUZZ_RUNS ?? 60);
/**
 * A property's limit: its runs write and page three stores each (seconds in all on an idle machine, several
 * times that beside the other test files, and on Node 22 and Bun in test/sqlite/drivers.test.ts).
 */
const RUN_TIMEOUT = (runs: number) => 20_000 + runs * 1000;
const NOW = Date.parse("2026-11-01T00:00:00.000Z");
const ACTOR: Actor = { type: "api-key", id: "key_fuzz", name: "Fuzz" };
const skip = await postgresSkipReason();
const schemas: string[] = [];
afterAll(() => dropSchemas(schemas));

// A name with a quote: declared columns are inlined in SQL as literals (indexes match only literals).
const COLUMNS = ["a", "b", "it's"];
const COLUMN_SET = new Set(COLUMNS);
const value = fc.oneof(
  // "\\u0000" is a backslash and five characters: text PostgreSQL's row indexes leave out (their condition is textual),
  // read without them.
  fc.constantFrom(0, 1, -1, 2.5, 10, 1e21, "", "a", "B", "ab", "é", "😀", "\uffff", "10", "\\u0000", true, false, null),
  fc.integer({ min: -3, max: 3 }),
  fc.constantFrom(["a"], [1, 2], { k: 1 }, { k: "x", j: [true] }, []),
);
const row = fc.dictionary(fc.constantFrom(...COLUMNS), value, { maxKeys: 3 });
// Operands may hold U+0000, which PostgreSQL text cannot (no stored row here holds one).
const withNul = fc.constantFrom("a\u0000", "\u0000", "ab\u0000c", { k: "\u0000" }, ["\u0000"]);
const operandValue = fc.oneof({ weight: 4, arbitrary: value }, { weight: 1, arbitrary: withNul });
const operand = (op: string) => {
  switch (op) {
    case "gt":
    case "gte":
    case "lt":
    case "lte":
      return fc.oneof(
        fc.integer({ min: -3, max: 11 }),
        fc.constantFrom("", "a", "ab", "B", "é", "10", "a\u0000", "ab\u0000c", "\u0000"),
      );
    case "in":
    case "nin":
      return fc.array(operandValue, { minLength: 1, maxLength: 4 });
    case "isNull":
      return fc.boolean();
    case "contains":
    case "startsWith":
      return fc.constantFrom("a", "b", "1", "é", "😀", "\u0000", "a\u0000");
    default:
      return operandValue;
  }
};
const test = fc
  .tuple(
    fc.constantFrom(...COLUMNS),
    fc.constantFrom("eq", "ne", "gt", "gte", "lt", "lte", "in", "nin", "isNull", "contains", "startsWith"),
  )
  .chain(([column, op]) => operand(op).map((x) => ({ [column]: { [op]: x } })));
const where: fc.Arbitrary<Record<string, unknown>> = fc.letrec<{ node: Record<string, unknown> }>((tie) => ({
  node: fc.oneof(
    { depthSize: "small", withCrossShrink: true },
    test,
    fc.record({ and: fc.array(tie("node"), { minLength: 1, maxLength: 3 }) }),
    fc.record({ or: fc.array(tie("node"), { minLength: 1, maxLength: 3 }) }),
  ),
})).node;
const sort = fc
  .uniqueArray(fc.constantFrom(...COLUMNS), { maxLength: 3 })
  .chain((cols) =>
    fc.tuple(...cols.map((c) => fc.boolean().map((d) => `${d ? "-" : ""}${c}`))).map((parts) => parts.join(",")),
  );

async function stores(): Promise<Array<[string, Storage]>> {
  const out: Array<[string, Storage]> = [
    ["memory", createMemoryStorage()],
    ["sqlite", createSqliteStorage({ path: ":memory:" })],
  ];
  if (!skip) {
    const schema = testSchema();
    schemas.push(schema);
    out.push(["postgres", await createPostgresStorage({ connectionString: POSTGRES_URL, schema, maxConnections: 2 })]);
  }
  return out;
}

/** Declared columns are indexed (and read through their indexes' expressions); inferred ones are not. */
async function replaceRows(store: Storage, rows: readonly Row[], declared: boolean): Promise<void> {
  const columns: Column[] = COLUMNS.map((name) => ({ name, type: "string" }));
  await store.catalog.putDataset(uploadDataset("ds_fuzz", "fuzz", columns, declared));
  await writeRows(store, "ds_fuzz", "replace", rows, columns);
}

/** A page, and the pages after it by `lastKey`, as the store answers them. */
async function answer(
  store: Storage,
  query: { where: ReturnType<typeof parseWhere>; sort: SortKey[]; offset: number; limit: number },
) {
  const page = await store.rows.readDatasetRows("ds_fuzz", {
    offset: query.offset,
    limit: query.limit,
    columns: null,
    filters: null,
    where: query.where,
    sort: query.sort,
  });
  const rows: Row[] = [];
  for await (const r of page.rows) rows.push({ ...r });
  const paged: Row[] = [];
  let after: RowKey | null = null;
  for (let i = 0; i < 50; i++) {
    const next = await store.rows.readDatasetRows("ds_fuzz", {
      offset: 0,
      limit: 2,
      columns: null,
      filters: null,
      where: query.where,
      sort: query.sort,
      after,
    });
    const got: Row[] = [];
    for await (const r of next.rows) got.push({ ...r });
    paged.push(...got);
    if (got.length < 2) break;
    after = next.lastKey();
  }
  return { total: page.totalRows, rows, paged };
}

describe("row queries across stores", () => {
  it(
    "memory, SQLite and PostgreSQL answer the same page, and the same pages by cursor",
    async () => {
      const all = await stores();
      try {
        await fc.assert(
          fc.asyncProperty(
            fc.array(row, { maxLength: 12 }),
            where,
            sort,
            fc.nat(3),
            fc.integer({ min: 0, max: 6 }),
            fc.boolean(),
            async (rows, w, s, offset, limit, declared) => {
              let parsed: ReturnType<typeof parseWhere>;
              try {
                parsed = parseWhere(w, COLUMN_SET);
              } catch {
                fc.pre(false); // nested past the limit: the parser's business, tested below
                return;
              }
              const query = { where: parsed, sort: s === "" ? [] : parseSort(s, COLUMN_SET), offset, limit };
              const answers = [];
              for (const [name, store] of all) {
                await replaceRows(store, rows, declared);
                answers.push({ name, ...(await answer(store, query)) });
              }
              const [reference, ...others] = answers;
              for (const other of others) expect({ ...other, name: reference!.name }).toEqual(reference);
              // Cursor pages visit exactly the matching rows, in the read's order.
              expect(reference!.paged.length).toBe(reference!.total);
            },
          ),
          { numRuns: RUNS },
        );
      } finally {
        for (const [, store] of all) await store.close();
      }
    },
    RUN_TIMEOUT(RUNS),
  );

  it(
    "memory, SQLite and PostgreSQL answer the same input-table pages, declared columns (indexed) or not",
    async () => {
      const all = await stores();
      const tables = [
        { id: "tbl_declared", columns: COLUMNS.map((name) => ({ name, type: "string" as const })) },
        { id: "tbl_free", columns: [] },
      ];
      const held = new Map<string, string[]>();
      let events = 0;
      const event = (rowId: string): AuditEvent => ({
        id: `evt_rq_${++events}`,
        teamId: "team_ops",
        time: "2026-11-01T00:00:00.000Z",
        category: "audit",
        action: "table.row.created",
        actor: ACTOR,
        target: { type: "table_row", id: rowId },
        outcome: "success",
        ip: null,
        userAgent: null,
        details: {},
      });
      try {
        for (const [, store] of all) {
          for (const t of tables)
            await store.tables.putTable({
              id: t.id,
              teamId: "team_ops",
              name: t.id,
              columns: t.columns,
              rowCount: 0,
              updatedAt: "2026-11-01T00:00:00.000Z",
            });
        }
        await fc.assert(
          fc.asyncProperty(
            fc.array(row, { maxLength: 10 }),
            where,
            sort,
            fc.nat(3),
            fc.integer({ min: 0, max: 6 }),
            fc.constantFrom(...tables.map((t) => t.id)),
            async (rows, w, s, offset, limit, tableId) => {
              let parsed: ReturnType<typeof parseWhere>;
              try {
                parsed = parseWhere(w, COLUMN_SET);
              } catch {
                fc.pre(false);
                return;
              }
              const query = { where: parsed, sort: s === "" ? [] : parseSort(s, COLUMN_SET) };
              const answers = [];
              for (const [name, store] of all) {
                // The table's rows become `rows`, at one fixed time on every store.
                for (const rowId of held.get(`${name}:${tableId}`) ?? []) {
                  await store.tables.deleteTableRow({
                    tableId,
                    rowId,
                    actor: ACTOR,
                    now: NOW,
                    auditEvent: event(rowId),
                  });
                }
                const ids = rows.map((_, i) => `row_${i}`);
                for (const [i, values] of rows.entries()) {
                  await store.tables.insertTableRow({
                    tableId,
                    rowId: ids[i]!,
                    values,
                    actor: ACTOR,
                    now: NOW,
                    auditEvent: event(ids[i]!),
                  });
                }
                held.set(`${name}:${tableId}`, ids);
                const page = await store.tables.listTableRows(tableId, { offset, limit, ...query });
                const paged: Row[] = [];
                let after: RowKey | null = null;
                for (let i = 0; i < 50; i++) {
                  const next = await store.tables.listTableRows(tableId, { offset: 0, limit: 2, ...query, after });
                  paged.push(...next.rows);
                  if (next.rows.length < 2 || next.lastKey === null) break;
                  after = next.lastKey;
                }
                answers.push({ name, total: page.totalRows, rows: page.rows, paged });
              }
              const [reference, ...others] = answers;
              for (const other of others) expect({ ...other, name: reference!.name }).toEqual(reference);
              expect(reference!.paged.length).toBe(reference!.total);
            },
          ),
          { numRuns: Math.ceil(RUNS / 2) },
        );
      } finally {
        for (const [, store] of all) await store.close();
      }
    },
    RUN_TIMEOUT(Math.ceil(RUNS / 2)),
  );

  it("parses any where or sort into a condition or a 400 invalid_parameter, nothing else", () => {
    const anything = fc.oneof(
      fc.jsonValue({ maxDepth: 6 }),
      where,
      fc.record({ and: fc.jsonValue() }),
      fc.dictionary(fc.constantFrom(...COLUMNS, "x", "__proto__"), fc.jsonValue()),
    );
    fc.assert(
      fc.property(anything, fc.string(), (w, s) => {
        for (const parse of [() => parseWhere(w, COLUMN_SET), () => parseSort(s, COLUMN_SET)]) {
          try {
            parse();
          } catch (error) {
            expect(error).toBeInstanceOf(ApiError);
            expect([(error as ApiError).status, (error as ApiError).code]).toEqual([400, "invalid_parameter"]);
          }
        }
      }),
      { numRuns: RUNS * 10 },
    );
  });
});
