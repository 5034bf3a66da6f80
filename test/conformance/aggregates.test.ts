import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ApiError } from "../../src/base/api-error.js";
import { evaluateAggregate } from "../../src/domain/aggregate-eval.js";
import { type AggregateParams, type AggregateQuery, parseAggregateQuery } from "../../src/domain/aggregate-query.js";
import type { Actor, AuditEvent, Column, Row } from "../../src/domain/model.js";
import { createPostgresStorage, type PostgresStorage } from "../../src/postgres/index.js";
import { SANE_ROW } from "../../src/postgres/row-query-dialect.js";
import { createSqliteStorage, type SqliteStorage } from "../../src/sqlite/index.js";
import { postgresAggregate, sqliteAggregate, type Target, withinRounding } from "../support/aggregates.js";
import { uploadDataset, writeRows } from "../support/datasets.js";
import { dropSchemas, POSTGRES_URL, postgresSkipReason, testSchema } from "../support/services.js";

/**
 * Aggregates answer alike on every store: random small datasets (numbers,
 * numeric strings, dates in many forms — possible, impossible, with and
 * without offsets —, nulls, absent values, booleans, objects and arrays) and
 * random aggregates, the reference evaluation (`aggregate-eval.ts`, what the
 * memory store runs) against the compiled SQL on SQLite and PostgreSQL over
 * the stores' own row tables. Sums and means may differ by rounding only.
 */
const RUNS = Number(process.env.DATAPORT_FUZZ_RUNS ?? 80);
const skip = await postgresSkipReason();
const dir = mkdtempSync(join(tmpdir(), "dataport-aggregates-"));
const schemas: string[] = [];
let sqlite: SqliteStorage;
let postgres: PostgresStorage | null = null;

beforeAll(async () => {
  sqlite = createSqliteStorage({ path: join(dir, "aggregates.db") });
  if (!skip) {
    const schema = testSchema();
    schemas.push(schema);
    postgres = await createPostgresStorage({ connectionString: POSTGRES_URL, schema, maxConnections: 2 });
  }
});
afterAll(async () => {
  await sqlite.close();
  await postgres?.close();
  await dropSchemas(schemas);
  rmSync(dir, { recursive: true, force: true });
});

// `d` holds dates mostly; `it's` has a quote (a JSON path quotes it; SQL binds it).
const COLUMNS = ["a", "b", "d", "it's"];
const COLUMN_SET = new Set(COLUMNS);

const two = (min: number, max: number) => fc.integer({ min, max }).map((n) => String(n).padStart(2, "0"));
const year = fc.constantFrom("0000", "0001", "1969", "1970", "2024", "2025", "2026", "2100", "9999");
const month = fc.oneof({ weight: 9, arbitrary: two(1, 12) }, { weight: 1, arbitrary: fc.constantFrom("00", "13") });
const day = fc.oneof(
  { weight: 9, arbitrary: fc.constantFrom("01", "02", "28", "29", "30", "31", "15") },
  { weight: 1, arbitrary: fc.constantFrom("00", "32") },
);
const date = fc.tuple(year, month, day).map(([y, m, dd]) => `${y}-${m}-${dd}`);
const seconds = fc.oneof(
  fc.constant(""),
  two(0, 60).map((s) => `:${s}`),
  fc.tuple(two(0, 59), fc.integer({ min: 0, max: 10 })).map(([s, n]) => `:${s}.${"1234567890".slice(0, n)}`),
);
const offset = fc.oneof(
  fc.constantFrom("", "Z", "Z", "+00:00", "-00:00", "+0200", "z"),
  fc
    .tuple(fc.constantFrom("+", "-"), two(0, 24), fc.constantFrom("00", "30", "45", "59", "60"))
    .map(([s, h, m]) => `${s}${h}:${m}`),
);
const datetime = fc
  .tuple(
    date,
    fc.constantFrom("T", "T", "T", " ", "t"),
    two(0, 24),
    fc.constantFrom("00", "30", "59", "60"),
    seconds,
    offset,
  )
  .map(([dd, t, h, m, s, o]) => `${dd}${t}${h}:${m}${s}${o}`);
const dates = fc.oneof(
  { weight: 3, arbitrary: datetime },
  { weight: 2, arbitrary: date },
  { weight: 1, arbitrary: fc.constantFrom("2026-03", "2026-03-05T14", "", "x") },
);

// Numbers every store adds exactly (integers, halves and quarters), and decimals whose sums round.
const exact = fc.oneof(fc.integer({ min: -5, max: 5 }), fc.constantFrom(0.5, -2.25, 1e21, 2 ** 40, 7.75));
const decimal = fc.constantFrom(0.1, 0.2, 0.7, 123.45, 1e-7);
const others = fc.oneof(
  fc.constantFrom("", "a", "B", "é", "😀", "5", "10", "1e3", "-1", true, false, null),
  fc.constantFrom([1], [], { k: 1 }, { k: 1, j: 2 }, { j: 2, k: 1 }, ["a", { x: null }]),
);
/** Rows: `b` takes decimals (never negative, so no cancellation beyond rounding) unless sums are compared exactly. */
const rows = (decimals: boolean) => {
  const b = decimals ? fc.oneof(decimal, fc.nat(9), others) : fc.oneof(exact, others);
  const value = {
    a: fc.oneof(exact, others, dates),
    b,
    d: fc.oneof({ weight: 4, arbitrary: dates }, { weight: 1, arbitrary: fc.oneof(exact, others) }),
    "it's": fc.oneof(exact, others),
  };
  const row = fc.record(value, { requiredKeys: [] }) as fc.Arbitrary<Row>;
  return fc.array(row, { maxLength: 20 });
};

const KEYS = [
  "a",
  "b",
  "d",
  "it's",
  "hour(d)",
  "day(d)",
  "week(d)",
  "month(d)",
  "quarter(d)",
  "year(d)",
  "month(a)",
  "day(it's)",
];
const METRICS = [
  "count",
  "count(a)",
  "countDistinct(a)",
  "countDistinct(d)",
  "sum(a)",
  "avg(a)",
  "sum(b)",
  "avg(b)",
  "min(a)",
  "max(a)",
  "min(b)",
  "max(d)",
  "max(it's)",
  "sum(it's)",
];
const operand = fc.oneof(
  fc.integer({ min: -3, max: 12 }),
  fc.constantFrom("", "a", "2026", "2026-03", "é", null, 0.5, 1e21),
);
/** Operands of the equality tests (`eq`, `ne`, `in`, `nin`): any JSON value, as rows hold them. */
const equalOperand = fc.oneof(
  operand,
  fc.constantFrom(true, false, "5", [1], [], { k: 1 }, { j: 2, k: 1 }, ["a", { x: null }]),
);
const test = (fields: readonly string[]) =>
  fc
    .tuple(
      fc.constantFrom(...fields),
      fc.constantFrom("eq", "ne", "gt", "gte", "lt", "lte", "isNull", "in", "nin", "startsWith", "contains"),
    )
    .chain(([field, op]) => {
      const value =
        op === "isNull"
          ? fc.boolean()
          : op === "in" || op === "nin"
            ? fc.array(equalOperand, { minLength: 1, maxLength: 3 })
            : op === "startsWith" || op === "contains"
              ? fc.constantFrom("a", "20", "2", "-0", "é")
              : op === "eq" || op === "ne"
                ? equalOperand
                : operand.filter((v) => v !== null);
      return value.map((v) => ({ [field]: { [op]: v } }));
    });
const condition = (fields: readonly string[]) =>
  fc.oneof(
    test(fields),
    fc.record({ or: fc.array(test(fields), { minLength: 1, maxLength: 2 }) }),
    fc.record({ and: fc.array(test(fields), { minLength: 1, maxLength: 2 }) }),
  );

const params: fc.Arbitrary<AggregateParams> = fc
  .tuple(
    fc.uniqueArray(fc.constantFrom(...KEYS), { maxLength: 3 }),
    fc.uniqueArray(fc.constantFrom(...METRICS), { minLength: 1, maxLength: 5 }),
  )
  .chain(([keys, metrics]) => {
    const fields = [...keys, ...metrics];
    const sort = fc
      .uniqueArray(fc.constantFrom(...fields), { maxLength: 3 })
      .chain((names) => fc.tuple(...names.map((n) => fc.boolean().map((d) => (d ? `-${n}` : n)))));
    const sometimes = <T>(arbitrary: fc.Arbitrary<T>, percent: number) =>
      fc.oneof({ weight: 100 - percent, arbitrary: fc.constant(undefined) }, { weight: percent, arbitrary });
    return fc
      .record({
        groupBy: fc.constant(keys.length > 0 ? keys.join(",") : undefined),
        metrics: fc.constant(metrics.join(",")),
        where: sometimes(condition(COLUMNS), 25),
        filters: sometimes(
          fc.dictionary(fc.constantFrom("b", "it's"), fc.oneof(exact, others), { minKeys: 1, maxKeys: 1 }),
          10,
        ),
        having: sometimes(condition(fields), 25),
        sort: sometimes(
          sort.filter((names) => names.length > 0).map((names) => names.join(",")),
          60,
        ),
        maxRows: sometimes(fc.integer({ min: 0, max: 6 }), 50),
        offset: sometimes(fc.nat(3), 25),
      })
      .map((p) => Object.fromEntries(Object.entries(p).filter(([, v]) => v !== undefined)) as AggregateParams);
  });

/**
 * Whether the order or `having` compares sums or means, which stores may round differently: then sums must be exact.
 */
function comparesSums(query: AggregateQuery): boolean {
  const named = (field: string) => /^(sum|avg)\(/.test(field);
  const inHaving = JSON.stringify(query.having ?? {}).match(/"column":"(sum|avg)\(/) !== null;
  return inHaving || query.order.some((k) => named(k.column));
}

/**
 * The same columns declared, with types (`d` a datetime, `b` a number that
 * holds strings, nulls, booleans and objects in some rows): the stores keep
 * a typed copy of them and aggregate over it (dataset-values.ts), which must
 * answer as the JSON does.
 */
const DECLARED: Column[] = [
  { name: "a", type: "number" },
  { name: "b", type: "number" },
  { name: "d", type: "datetime" },
  { name: "it's", type: "date" },
];

async function replaceRows(rowsOf: Row[]): Promise<void> {
  const columns: Column[] = COLUMNS.map((name) => ({ name, type: "string" }));
  for (const store of [sqlite, postgres]) {
    if (!store) continue;
    await store.catalog.putDataset(uploadDataset("ds_agg", "aggregates", columns, false));
    await writeRows(store, "ds_agg", "replace", rowsOf, columns);
    await store.catalog.putDataset(uploadDataset("ds_agg_declared", "aggregates, declared", DECLARED, true));
    await writeRows(store, "ds_agg_declared", "replace", rowsOf, DECLARED);
  }
}

async function answers(query: AggregateQuery, reference: Row[], target: Target) {
  const out = [{ store: "sqlite", answer: sqliteAggregate(sqlite, target, query) }];
  if (postgres) out.push({ store: "postgres", answer: await postgresAggregate(postgres, target, query) });
  if ("dataset" in target) {
    // The stores' own aggregate of the declared dataset: over the typed copy, `where` and `filters` included.
    out.push({ store: "sqlite, declared", answer: await sqlite.rows.aggregateDatasetRows("ds_agg_declared", query) });
    if (postgres)
      out.push({
        store: "postgres, declared",
        answer: await postgres.rows.aggregateDatasetRows("ds_agg_declared", query),
      });
  }
  const expected = evaluateAggregate(reference, query);
  for (const { store, answer } of out)
    expect({ store, answer: withinRounding(answer, expected) }).toEqual({ store, answer: expected });
  return expected;
}

describe("aggregates across stores", () => {
  it(
    "the reference, SQLite's SQL and PostgreSQL's SQL give the same answer",
    async () => {
      await fc.assert(
        fc.asyncProperty(
          params.chain((p) => {
            let query: AggregateQuery;
            try {
              query = parseAggregateQuery(p, COLUMN_SET);
            } catch {
              return fc.constant(null);
            }
            return rows(!comparesSums(query)).map((r) => ({ query, rows: r }));
          }),
          async (drawn) => {
            fc.pre(drawn !== null);
            const { query, rows: drawnRows } = drawn!;
            await replaceRows(drawnRows);
            const expected = await answers(query, drawnRows, { dataset: "ds_agg" });
            expect(expected.totals.count ?? expected.matchedRows).toBe(expected.matchedRows);
          },
        ),
        { numRuns: RUNS },
      );
    },
    20_000 + RUNS * 400,
  );

  it("parses any parameters into a query or a 400 invalid_parameter, nothing else", () => {
    const text = fc.oneof(
      fc.string(),
      fc.constantFrom(...KEYS, ...METRICS, "sum(", "count()", ",", "median(a)", "-", "month (d)", "sum(a,b)"),
    );
    const anything = fc.record(
      {
        groupBy: text,
        metrics: text,
        sort: text,
        having: fc.jsonValue({ maxDepth: 4 }),
        where: fc.jsonValue({ maxDepth: 4 }),
        maxRows: fc.integer(),
        offset: fc.integer(),
      },
      { requiredKeys: [] },
    );
    fc.assert(
      fc.property(anything, (p) => {
        try {
          parseAggregateQuery(p as AggregateParams, COLUMN_SET);
        } catch (error) {
          expect(error).toBeInstanceOf(ApiError);
          expect([(error as ApiError).status, (error as ApiError).code]).toEqual([400, "invalid_parameter"]);
        }
      }),
      { numRuns: RUNS * 10 },
    );
  });
});

describe("aggregates by example", () => {
  const ORDERS: Row[] = [
    { region: "EMEA", ordered_on: "2026-03-05", amount: 120.5 },
    { region: "EMEA", ordered_on: "2026-03-31T23:30:00-02:00", amount: 80 },
    { region: "EMEA", ordered_on: "2026-04-02T10:00:00Z", amount: "12" },
    { region: "APAC", ordered_on: "2026-03-17T09:15:00+09:00", amount: 300.25 },
    { region: "APAC", ordered_on: "2026-02-30", amount: 5 },
    { region: "AMER", ordered_on: "2026-01-12", amount: 1000 },
    { region: null, amount: 7 },
    { ordered_on: "2026-03-01" },
  ];
  const ORDER_COLUMNS = new Set(["region", "ordered_on", "amount"]);

  it("sum and average of amount per region per month, EMEA and APAC only, biggest first, with the grand total", async () => {
    await replaceRows(
      ORDERS.map((r) => ({ a: r.region, d: r.ordered_on, b: r.amount }) as Row).map((r) => dropAbsent(r)),
    );
    const query = parseAggregateQuery(
      {
        groupBy: "a,month(d)",
        metrics: "count,sum(b),avg(b)",
        where: { a: { in: ["EMEA", "APAC"] } },
        sort: "-sum(b)",
      },
      COLUMN_SET,
    );
    const expected = await answers(
      query,
      ORDERS.map((r) => dropAbsent({ a: r.region, d: r.ordered_on, b: r.amount } as Row)),
      { dataset: "ds_agg" },
    );
    expect(expected).toEqual({
      groups: [
        { a: "APAC", "month(d)": "2026-03", count: 1, "sum(b)": 300.25, "avg(b)": 300.25 },
        { a: "EMEA", "month(d)": "2026-03", count: 1, "sum(b)": 120.5, "avg(b)": 120.5 },
        { a: "EMEA", "month(d)": "2026-04", count: 2, "sum(b)": 80, "avg(b)": 80 },
        { a: "APAC", "month(d)": null, count: 1, "sum(b)": 5, "avg(b)": 5 },
      ],
      matchedRows: 5,
      totalGroups: 4,
      totals: { count: 5, "sum(b)": 505.75, "avg(b)": 126.4375 },
    });
    expect(ORDER_COLUMNS.size).toBe(3);
  });

  it('groups by JSON equality: 5 and "5" apart, null and absent together, objects whatever their key order', async () => {
    const data: Row[] = [
      { a: 5 },
      { a: "5" },
      { a: 5 },
      { a: null },
      {},
      { a: { k: 1, j: 2 } },
      { a: { j: 2, k: 1 } },
      { a: true },
    ];
    await replaceRows(data);
    const query = parseAggregateQuery({ groupBy: "a", metrics: "count,countDistinct(a)" }, COLUMN_SET);
    const expected = await answers(query, data, { dataset: "ds_agg" });
    expect(expected.groups).toEqual([
      { a: 5, count: 2, "countDistinct(a)": 1 },
      { a: "5", count: 1, "countDistinct(a)": 1 },
      { a: true, count: 1, "countDistinct(a)": 1 },
      { a: { j: 2, k: 1 }, count: 2, "countDistinct(a)": 1 },
      { a: null, count: 2, "countDistinct(a)": 0 },
    ]);
    expect(expected.totals).toEqual({ count: 8, "countDistinct(a)": 4 });
  });

  it("min and max follow the sort order of values; sums take numbers only; an empty set is one group", async () => {
    const data: Row[] = [{ a: "b" }, { a: 3 }, { a: "a" }, { a: -1.5 }, { a: "12" }, { a: false }, { a: [0] }];
    await replaceRows(data);
    const query = parseAggregateQuery({ metrics: "min(a),max(a),sum(a),avg(a),count(a)" }, COLUMN_SET);
    const expected = await answers(query, data, { dataset: "ds_agg" });
    expect(expected.groups).toEqual([{ "min(a)": -1.5, "max(a)": [0], "sum(a)": 1.5, "avg(a)": 0.75, "count(a)": 7 }]);
    const none = parseAggregateQuery(
      { metrics: "count,sum(a),min(a),countDistinct(a)", where: { a: { eq: "nothing" } } },
      COLUMN_SET,
    );
    expect(await answers(none, data, { dataset: "ds_agg" })).toEqual({
      groups: [{ count: 0, "sum(a)": null, "min(a)": null, "countDistinct(a)": 0 }],
      matchedRows: 0,
      totalGroups: 1,
      totals: { count: 0, "sum(a)": null, "min(a)": null, "countDistinct(a)": 0 },
    });
  });

  it("having and paging count the groups after having; totals ignore it", async () => {
    const data: Row[] = [1, 2, 2, 3, 3, 3, 4, 4, 4, 4].map((a) => ({ a, b: a * 10 }));
    await replaceRows(data);
    const query = parseAggregateQuery(
      { groupBy: "a", metrics: "count,sum(b)", having: { count: { gte: 2 } }, sort: "-count", maxRows: 2, offset: 1 },
      COLUMN_SET,
    );
    const expected = await answers(query, data, { dataset: "ds_agg" });
    expect(expected).toEqual({
      groups: [
        { a: 3, count: 3, "sum(b)": 90 },
        { a: 2, count: 2, "sum(b)": 40 },
      ],
      matchedRows: 10,
      totalGroups: 3,
      totals: { count: 10, "sum(b)": 300 },
    });
  });

  it("each time bucket, on every store, for strings of every form", async () => {
    const values = [
      "2026-03-05T14:30:15.123Z",
      "2026-03-08",
      "2026-03-05T01:30+02:00",
      "2026-12-31T23:30-01:00",
      "2024-03-01T00:59+01:00",
      "2026-03-31T23:00-02:00",
      "2026-01-01",
      "0000-01-03",
      "0000-01-01",
      "9999-12-31T23:00-01:00",
      "2026-03-05T14:30:59.999999999+00:00",
      "2026-02-30",
      "2100-02-29",
      "2026-03-05T24:30",
      "2026-03-05T14:60",
      "2026-03-05T14:30:60",
      "2026-03-05 14:30",
      "2026-03-05T14:30+0200",
      "2026-03",
      "2026-03-05Z",
      "2026-03-05T14:30:00.1234567890",
      20260305,
      null,
      true,
    ];
    const data: Row[] = values.map((d, i) => ({ a: i, d }));
    await replaceRows(data);
    for (const groupBy of ["a,hour(d),day(d),week(d)", "a,month(d),quarter(d),year(d)"]) {
      const query = parseAggregateQuery({ groupBy }, COLUMN_SET);
      const expected = await answers(query, data, { dataset: "ds_agg" });
      expect(expected.groups).toHaveLength(values.length);
    }
    const weeks = parseAggregateQuery({ groupBy: "a,week(d),quarter(d)" }, COLUMN_SET);
    const expected = await answers(weeks, data, { dataset: "ds_agg" });
    expect(expected.groups.slice(0, 11).map((g) => [g["week(d)"], g["quarter(d)"]])).toEqual([
      ["2026-03-02", "2026-Q1"],
      ["2026-03-02", "2026-Q1"],
      ["2026-03-02", "2026-Q1"],
      ["2026-12-28", "2027-Q1"],
      ["2024-02-26", "2024-Q1"],
      ["2026-03-30", "2026-Q2"],
      ["2025-12-29", "2026-Q1"],
      ["0000-01-03", "0000-Q1"],
      [null, "0000-Q1"], // its Monday is in the year -1
      ["9999-12-27", null], // 10000-01-01T00:00Z: its quarter is past 9999, its week's Monday is not
      ["2026-03-02", "2026-Q1"],
    ]);
    expect(expected.groups.slice(11).every((g) => g["week(d)"] === null && g["quarter(d)"] === null)).toBe(true);
  });

  it("each time bucket agrees with the reference on 3,000 generated strings", async () => {
    // Valid dates of every month and day, across years and offsets, and their near misses.
    const anyDay = fc.tuple(year, two(1, 12), two(1, 31)).map(([y, m, dd]) => `${y}-${m}-${dd}`);
    const strings = fc.oneof(
      anyDay,
      dates,
      fc.tuple(anyDay, two(0, 23), two(0, 59), offset).map(([dd, h, m, o]) => `${dd}T${h}:${m}${o}`),
    );
    const data: Row[] = fc.sample(strings, { numRuns: 3000, seed: 39 }).map((d, i) => ({ a: i, d }));
    await replaceRows(data);
    for (const groupBy of ["a,hour(d),day(d),week(d)", "a,month(d),quarter(d),year(d)"]) {
      const expected = await answers(parseAggregateQuery({ groupBy, maxRows: 10_000 }, COLUMN_SET), data, {
        dataset: "ds_agg",
      });
      expect(expected.groups.filter((g) => Object.values(g).every((v) => v !== null)).length).toBeGreaterThan(1000);
    }
  });

  it("PostgreSQL aggregates a window holding a row it cannot take apart through SANE_ROW, as row queries read it", async () => {
    if (!postgres) return;
    const data: Row[] = [
      { a: "x\u0000y", b: 2 },
      { a: "x", b: 3 },
      { a: "x", b: 4.5 },
    ];
    await replaceRows(data);
    const query = parseAggregateQuery({ groupBy: "a", metrics: "count,sum(b),max(a)" }, COLUMN_SET);
    await expect(postgresAggregate(postgres, { dataset: "ds_agg" }, query)).rejects.toThrow(
      /unsupported Unicode escape/,
    );
    expect((await postgresAggregate(postgres, { dataset: "ds_agg" }, query, SANE_ROW)).groups).toEqual([
      { a: "x", count: 2, "sum(b)": 7.5, "max(a)": "x" },
      // PostgreSQL reads U+0000 as U+FFFD here, the one place the stores may differ (see SANE_ROW).
      { a: "x\ufffdy", count: 1, "sum(b)": 2, "max(a)": "x\ufffdy" },
    ]);
  });

  it("an input table groups by its stamps", async () => {
    const actor: Actor = { type: "api-key", id: "key_agg", name: "Aggregates" };
    const event = (rowId: string): AuditEvent => ({
      id: `evt_${rowId}`,
      time: "2026-11-01T00:00:00.000Z",
      teamId: "team_ops",
      category: "audit",
      action: "table.row.created",
      actor,
      target: { type: "table", id: "tbl_agg" },
      outcome: "success",
      ip: null,
      userAgent: null,
      details: {},
    });
    const stamps = [
      Date.parse("2026-11-01T09:59:59.999Z"),
      Date.parse("2026-11-01T10:00:00Z"),
      Date.parse("2026-11-02T23:30:00Z"),
    ];
    const reference: Row[] = [];
    for (const store of [sqlite, postgres]) {
      if (!store) continue;
      await store.tables.putTable({
        id: "tbl_agg",
        teamId: "team_ops",
        name: "agg",
        columns: [{ name: "status", type: "string" }],
        rowCount: 0,
        updatedAt: "2026-11-01T00:00:00.000Z",
      });
      for (const [i, now] of stamps.entries()) {
        const row = await store.tables.insertTableRow({
          tableId: "tbl_agg",
          rowId: `r${i}`,
          values: { status: i === 2 ? "done" : "open" },
          actor,
          now,
          auditEvent: event(`r${i}_${store === sqlite ? "s" : "p"}`),
        });
        if (store === sqlite) reference.push(row);
      }
    }
    const table = new Set(["status", "_id", "_createdAt", "_updatedAt"]);
    const query = parseAggregateQuery({ groupBy: "hour(_createdAt)", metrics: "count,max(_updatedAt)" }, table);
    const expected = await answers(query, reference, { table: "tbl_agg" });
    expect(expected.groups).toEqual([
      { "hour(_createdAt)": "2026-11-01T09", count: 1, "max(_updatedAt)": "2026-11-01T09:59:59.999Z" },
      { "hour(_createdAt)": "2026-11-01T10", count: 1, "max(_updatedAt)": "2026-11-01T10:00:00.000Z" },
      { "hour(_createdAt)": "2026-11-02T23", count: 1, "max(_updatedAt)": "2026-11-02T23:30:00.000Z" },
    ]);
  });
});

function dropAbsent(row: Row): Row {
  return Object.fromEntries(Object.entries(row).filter(([, v]) => v !== undefined)) as Row;
}

describe("the typed copy of declared columns (dataset-values.ts)", () => {
  const QUERY = parseAggregateQuery(
    { groupBy: "a,month(d),week(d)", metrics: "count,count(b),sum(b),avg(b),min(b),max(d),countDistinct(a)" },
    COLUMN_SET,
  );
  const first: Row[] = [
    { a: "x", b: 1, d: "2026-03-01T23:30:00-02:00" },
    { a: "x", b: "2", d: "2026-03-02" },
    { a: "y", b: null, d: "2026-02-30" },
    { a: "y", b: { k: 1 } },
    { a: true, b: 2.5, d: 7 },
  ];
  const more: Row[] = [
    { a: "x", b: 4, d: "2026-03-31T23:00:00Z" },
    { b: [1], d: "2026-04-06" },
  ];
  const put = (store: SqliteStorage | PostgresStorage, columns: Column[] = DECLARED) =>
    store.catalog.putDataset(uploadDataset("ds_copy", "copy", columns, true));
  /** Rows of the copy and of the dataset (its window and any other it holds), as the store keeps them. */
  const counts = async (store: SqliteStorage | PostgresStorage, name: "sqlite" | "postgres") => {
    if (name === "sqlite") {
      const s = store as SqliteStorage;
      const seq = s.db.prepare("SELECT seq FROM datasets WHERE id = 'ds_copy'").pluck().get() as number | undefined;
      if (seq === undefined) return { copied: 0, rows: 0 };
      const range = [BigInt(seq) * 2n ** 43n, BigInt(seq + 1) * 2n ** 43n];
      const copied = s.db
        .prepare("SELECT count(*) FROM dataset_values WHERE row_key >= ? AND row_key < ?")
        .pluck()
        .get(...range);
      const rows = s.db.prepare("SELECT count(*) FROM dataset_rows WHERE dataset_seq = ?").pluck().get(seq);
      return { copied: Number(copied), rows: Number(rows) };
    }
    const p = store as PostgresStorage;
    const [found] = await p.db.query<{ copied: string; rows: string }>(
      `select (select count(*) from ${p.db.t("dataset_values")} where dataset_id = 'ds_copy') as copied,
              (select count(*) from ${p.db.t("dataset_rows")} where dataset_id = 'ds_copy') as rows`,
    );
    return { copied: Number(found!.copied), rows: Number(found!.rows) };
  };

  it("follows every write: replace, append, a changed declaration, undeclaring, deleting and making again", async () => {
    for (const [name, store] of [
      ["sqlite", sqlite],
      ["postgres", postgres],
    ] as const) {
      if (!store) continue;
      const check = async (rows: Row[], copied: "all" | "none") => {
        const answer = withinRounding(
          await store.rows.aggregateDatasetRows("ds_copy", QUERY),
          evaluateAggregate(rows, QUERY),
        );
        expect({ name, answer }).toEqual({ name, answer: evaluateAggregate(rows, QUERY) });
        const { copied: n, rows: all } = await counts(store, name);
        expect({ name, copied: n }).toEqual({ name, copied: copied === "all" ? all : 0 });
      };
      await put(store);
      await writeRows(store, "ds_copy", "replace", first, DECLARED);
      await check(first, "all");
      await writeRows(store, "ds_copy", "append", more, DECLARED);
      await check([...first, ...more], "all");
      // Another declaration (d no longer a datetime, a's slot moved): the copy is made again.
      await put(store, [
        { name: "it's", type: "string" },
        { name: "d", type: "string" },
        { name: "b", type: "number" },
        { name: "a", type: "string" },
      ]);
      await check([...first, ...more], "all");
      await put(store, [{ name: "a", type: "string" }]);
      await check([...first, ...more], "all");
      await store.catalog.putDataset(uploadDataset("ds_copy", "copy", DECLARED, false));
      await check([...first, ...more], "none");
      await put(store);
      await check([...first, ...more], "all");
      await writeRows(store, "ds_copy", "replace", more, DECLARED);
      await check(more, "all");
      expect(await store.catalog.deleteDataset("ds_copy")).toBe(true);
      expect(await counts(store, name)).toEqual({ copied: 0, rows: 0 });
      await put(store);
      await writeRows(store, "ds_copy", "replace", first, DECLARED);
      await check(first, "all");
    }
  });
});

describe("the typed copy grouped in two steps (stored values, then keys)", () => {
  // Stored values finer than the keys: months of one quarter, and JSON-equal objects stored with their keys in
  // another order, are one group each; their partial counts, sums, least and greatest values are merged. (The
  // third row is 2026-04-01T01 in UTC: the second quarter.)
  const rows: Row[] = [
    { a: { k: 1, j: 2 }, b: 1, d: "2026-01-05" },
    { a: { j: 2, k: 1 }, b: 2.5, d: "2026-02-05" },
    { a: { j: 2, k: 1 }, b: "x", d: "2026-03-31T23:00:00-02:00" },
    { a: { k: 1, j: 2 }, b: 4, d: "2026-04-01" },
    { a: "x", b: 8, d: "2026-03-01" },
    { a: "x", b: null, d: "2026-01-01" },
  ];
  const QUERY = parseAggregateQuery(
    { groupBy: "a,quarter(d)", metrics: "count,count(b),sum(b),avg(b),min(b),max(b),min(d)" },
    COLUMN_SET,
  );

  it("answers as the reference does (SQLite, PostgreSQL)", async () => {
    const expected = evaluateAggregate(rows, QUERY);
    expect(expected.groups).toEqual([
      {
        a: "x",
        "quarter(d)": "2026-Q1",
        count: 2,
        "count(b)": 1,
        "sum(b)": 8,
        "avg(b)": 8,
        "min(b)": 8,
        "max(b)": 8,
        "min(d)": "2026-01-01",
      },
      {
        a: { k: 1, j: 2 },
        "quarter(d)": "2026-Q1",
        count: 2,
        "count(b)": 2,
        "sum(b)": 3.5,
        "avg(b)": 1.75,
        "min(b)": 1,
        "max(b)": 2.5,
        "min(d)": "2026-01-05",
      },
      {
        a: { k: 1, j: 2 },
        "quarter(d)": "2026-Q2",
        count: 2,
        "count(b)": 2,
        "sum(b)": 4,
        "avg(b)": 4,
        "min(b)": 4,
        "max(b)": "x",
        "min(d)": "2026-03-31T23:00:00-02:00",
      },
    ]);
    for (const [name, store] of [
      ["sqlite", sqlite],
      ["postgres", postgres],
    ] as const) {
      if (!store) continue;
      await store.catalog.putDataset(uploadDataset("ds_two_steps", "two steps", DECLARED, true));
      await writeRows(store, "ds_two_steps", "replace", rows, DECLARED);
      const answer = await store.rows.aggregateDatasetRows("ds_two_steps", QUERY);
      expect({ name, answer: withinRounding(answer, expected) }).toEqual({ name, answer: expected });
    }
  });
});

describe("the issue's question over the typed copy (issue #39)", () => {
  // "Sum and average of amount per region per month, EMEA and APAC only, biggest first, with the grand total."
  const ORDER_COLUMNS: Column[] = [
    { name: "order", type: "string" },
    { name: "region", type: "string" },
    { name: "ordered_on", type: "date" },
    { name: "amount", type: "number" },
  ];
  const orders: Row[] = [
    { order: "o1", region: "EMEA", ordered_on: "2026-01-05", amount: 10 },
    { order: "o2", region: "EMEA", ordered_on: "2026-01-20", amount: 20 },
    { order: "o3", region: "EMEA", ordered_on: "2026-02-03", amount: 5 },
    { order: "o4", region: "APAC", ordered_on: "2026-01-10", amount: 40 },
    { order: "o5", region: "APAC", ordered_on: "2026-02-14", amount: 7.5 },
    { order: "o6", region: "APAC", ordered_on: "2026-02-28", amount: 2.5 },
    { order: "o7", region: "AMER", ordered_on: "2026-01-01", amount: 100 },
  ];
  const QUESTION_PARAMS: AggregateParams = {
    groupBy: "region,month(ordered_on)",
    metrics: "count,sum(amount),avg(amount)",
    where: { region: { in: ["EMEA", "APAC"] } },
    sort: "-sum(amount)",
  };
  const QUESTION = parseAggregateQuery(QUESTION_PARAMS, new Set(ORDER_COLUMNS.map((c) => c.name)));
  /** The answer with every amount multiplied by `times` (1: the rows as written). */
  const expected = (times: number) => ({
    groups: [
      {
        region: "APAC",
        "month(ordered_on)": "2026-01",
        count: 1,
        "sum(amount)": 40 * times,
        "avg(amount)": 40 * times,
      },
      {
        region: "EMEA",
        "month(ordered_on)": "2026-01",
        count: 2,
        "sum(amount)": 30 * times,
        "avg(amount)": 15 * times,
      },
      { region: "APAC", "month(ordered_on)": "2026-02", count: 2, "sum(amount)": 10 * times, "avg(amount)": 5 * times },
      { region: "EMEA", "month(ordered_on)": "2026-02", count: 1, "sum(amount)": 5 * times, "avg(amount)": 5 * times },
    ],
    matchedRows: 6,
    totalGroups: 4,
    totals: { count: 6, "sum(amount)": 85 * times, "avg(amount)": (85 * times) / 6 },
  });
  /** The slot of `amount` in the dataset's copy (its layout lists the copied columns in slot order). */
  const amountSlot = (layout: string) =>
    (JSON.parse(layout) as Array<[string, unknown]>).findIndex(([n]) => n === "amount");

  it("is answered from the typed copy, `where` included, with the reference's numbers (SQLite, PostgreSQL)", async () => {
    for (const [name, store] of [
      ["sqlite", sqlite],
      ["postgres", postgres],
    ] as const) {
      if (!store) continue;
      await store.catalog.putDataset(uploadDataset("ds_orders_copy", "orders", ORDER_COLUMNS, true));
      await writeRows(store, "ds_orders_copy", "replace", orders, ORDER_COLUMNS);
      expect(evaluateAggregate(orders, QUESTION)).toEqual(expected(1));
      // Within the rounding the stores may differ by (an older SQLite writes 15 digits of a double).
      const answer = async (times: number) => ({
        name,
        answer: withinRounding(await store.rows.aggregateDatasetRows("ds_orders_copy", QUESTION), expected(times)),
      });
      expect(await answer(1)).toEqual({ name, answer: expected(1) });
      // The copy changed behind the rows' back (amounts × 10, the rows' JSON untouched): the answer follows the copy,
      // so it is the copy that was read, `where` and all.
      if (name === "sqlite") {
        const s = store as SqliteStorage;
        const seq = s.db.prepare("SELECT seq FROM datasets WHERE id = 'ds_orders_copy'").pluck().get() as number;
        const layout = s.db
          .prepare("SELECT layout FROM dataset_value_layouts WHERE dataset_seq = ?")
          .pluck()
          .get(seq) as string;
        const v = `v${amountSlot(layout)}`;
        s.db
          .prepare(`UPDATE dataset_values SET ${v} = ${v} * 10 WHERE row_key >= ? AND row_key < ?`)
          .run(BigInt(seq) * 2n ** 43n, BigInt(seq + 1) * 2n ** 43n);
      } else {
        const p = store as PostgresStorage;
        const [found] = await p.db.query<{ layout: string }>(
          `select layout from ${p.db.t("dataset_value_layouts")} where dataset_id = 'ds_orders_copy'`,
        );
        const v = `v${amountSlot(found!.layout)}`;
        await p.db.query(
          `update ${p.db.t("dataset_values")} set ${v} = to_json((${v}::text)::numeric * 10) where dataset_id = 'ds_orders_copy'`,
        );
      }
      expect(await answer(10)).toEqual({ name, answer: expected(10) });
      // `filters` too.
      const emea = parseAggregateQuery(
        { ...QUESTION_PARAMS, where: undefined, filters: { region: "EMEA" } },
        new Set(ORDER_COLUMNS.map((c) => c.name)),
      );
      const { groups, totals } = expected(10);
      const emeaOnly = {
        groups: groups.filter((g) => g.region === "EMEA"),
        matchedRows: 3,
        totalGroups: 2,
        totals: { count: 3, "sum(amount)": 350, "avg(amount)": 350 / 3 },
      };
      expect({
        name,
        answer: withinRounding(await store.rows.aggregateDatasetRows("ds_orders_copy", emea), emeaOnly),
      }).toEqual({ name, answer: emeaOnly });
      expect(totals["sum(amount)"]).toBe(850);
      // A column of `where` outside the copy (an undeclared one) reads the JSON text: the rows as written.
      const outside = parseAggregateQuery(
        { ...QUESTION_PARAMS, where: { region: { in: ["EMEA", "APAC"] }, note: { isNull: true } } },
        new Set([...ORDER_COLUMNS.map((c) => c.name), "note"]),
      );
      expect({
        name,
        answer: withinRounding(await store.rows.aggregateDatasetRows("ds_orders_copy", outside), expected(1)),
      }).toEqual({ name, answer: expected(1) });
    }
  });
});
