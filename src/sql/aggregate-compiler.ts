import type { AggregateAnswer, AggregateQuery, Metric } from "../domain/aggregate-query.js";
import type { Row } from "../domain/model.js";
import type { RowCondition } from "../domain/row-query-model.js";
import { join, raw, type Sql, sql } from "./fragments.js";
import { conditionSql, orderSql, type SqlDialect, TRUE } from "./row-compiler.js";
import { emptyRow } from "../domain/rows.js";
import {
  bucketSql,
  bucketStages,
  type BucketSqlDialect,
  type StoredBuckets,
  storedBucketSql,
} from "./time-bucket-compiler.js";

/**
 * An aggregate as ONE SQL statement, the same shape on SQLite and
 * PostgreSQL (a store supplies its `AggregateDialect`), answering what
 * `evaluateAggregate` answers:
 *
 *     WITH g AS MATERIALIZED (             -- the groups: one scan of the matching rows
 *            SELECT keys, count(*) AS n, metric aggregates
 *            FROM (stages: each used column read once per row, then time buckets) GROUP BY keys),
 *          h AS MATERIALIZED (             -- the groups answered, as JSON objects, numbered in order
 *            SELECT doc, row_number() OVER (ORDER BY order over doc) AS ord
 *            FROM (SELECT json object of keys and metrics AS doc FROM g) WHERE having over doc)
 *     SELECT 0 AS part, ord, doc, NULL AS matched FROM h WHERE ord in the page
 *     UNION ALL
 *     SELECT 1, (SELECT count(*) FROM h), json object of the totals (from g), sum(n) FROM g
 *     ORDER BY part, ord
 *
 * `having` and the order read each group's JSON object through the store's
 * row-query dialect, so they mean what `where` and `sort` mean on rows.
 * Totals are made from the groups (counts and sums add up, min of mins);
 * only `countDistinct` reads the matching rows a second time. Memory in the
 * database is bounded by the groups; the process reads only the page.
 */

/** A column the aggregate reads: its name, and its place among the columns read (which names its SQL columns). */
export interface Column {
  index: number;
  name: string;
}

export interface AggregateDialect extends BucketSqlDialect {
  /**
   * `SELECT <the value of each of columns> <from>`, from the stored rows that
   * `from` (`FROM … WHERE …`) names, reading each value once per row, for the
   * other methods to read by column.
   */
  values(from: Sql, columns: readonly Column[]): Sql;
  /** Keeps the planner from merging a derived table into its reader (each column is then computed once per row). */
  fence: Sql;
  /** One SQL value per JSON value, equal only for JSON-equal values (5 and "5" differ); NULL for null and absent. */
  identity(column: Column): Sql;
  /** True when the value is present and not null. */
  present(column: Column): Sql;
  /** The value when it is a number, as `sum` adds it; else NULL. */
  number(column: Column): Sql;
  /** The aggregate adding numbers exactly or with compensation (see the store's dialect). */
  sum(numbers: Sql): Sql;
  /** A sum or mean from `sum` as a JSON number (NULL when it has none). */
  jsonNumber(value: Sql): Sql;
  /** The value when it is a string, else NULL. */
  stringValue(column: Column): Sql;
  /** The value's JSON text when it is an object or array, else NULL. */
  structureText(column: Column): Sql;
  /** The least of texts in code point order (an aggregate). */
  leastText(texts: Sql): Sql;
  /** A key's JSON value from its `identity` and the least `structureText` of its rows (shown for objects, arrays). */
  keyJson(key: Sql, structureText: Sql): Sql;
  /**
   * `min`/`max` of a column in the sort order of values: its aggregates
   * (named from `prefix`), its value per group and over all groups.
   */
  extreme(fn: "min" | "max", column: Column, prefix: string): MetricSql;
  /** A JSON object of the named values, in order. */
  jsonObject(fields: ReadonlyArray<readonly [string, Sql]>): Sql;
  /** The row-query dialect reading the JSON object column `doc` (a group), for `having` and the order. */
  fields(doc: string): SqlDialect;
  /**
   * Whether the values read are kept as they are grouped (the typed copy on SQLite): then an aggregate may group them
   * as stored first (see `pregrouped`), each metric's aggregates being `count`, `sum`, `min` or `max` of one value.
   */
  pregroup?: boolean;
  /** A column's time buckets as stored (the typed copy), read instead of computing them; absent or null: computed. */
  storedBuckets?(column: Column): StoredBuckets | null;
}

/** A metric in the statement: its aggregates over the rows (name, expression), its JSON value per group and in all. */
export interface MetricSql {
  aggregates: Array<readonly [string, Sql]>;
  value: Sql;
  total: Sql;
}

/**
 * The statement of `query` over the stored rows `table` (trusted SQL) that
 * `scope` selects (a dataset's window, a table's id), `rowDialect` reading
 * their stored JSON for `where`. `check`, a value the totals row carries
 * (`checked`): what a store reads in the statement's own snapshot, such as
 * whether the typed copy it read is still the one it chose.
 */
export function aggregateSql(
  query: AggregateQuery,
  target: { table: Sql; scope: Sql; rowDialect: SqlDialect; check?: Sql },
  dialect: AggregateDialect,
): Sql {
  const columns = usedColumns(query);
  const where = query.where ? conditionSql(query.where, target.rowDialect) : TRUE;
  const values = dialect.values(sql`FROM ${target.table} WHERE ${target.scope} AND ${where}`, columns);
  const metrics = query.metrics.map((m, n) => metricSql(m, columns, `a${n}_`, query, values, dialect));
  const pre = pregrouped(query, columns, values, metrics, dialect);
  const { rows, keys } = pre ?? keyedRows(query, columns, values, dialect);
  const grouped = sql`SELECT ${join(
    [
      ...keys.map((k) => raw(k.key)),
      ...keys.flatMap((k) => (k.text ? [sql`${dialect.leastText(raw(k.text))} AS ${raw(k.text)}`] : [])),
      raw(pre ? "sum(n) AS n" : "count(*) AS n"),
      ...(pre?.aggregates ?? metrics.flatMap((m) => m.aggregates)).map(
        ([name, expression]) => sql`${expression} AS ${raw(name)}`,
      ),
    ],
    ", ",
  )} FROM (${rows}) AS r${
    keys.length > 0
      ? sql` GROUP BY ${join(
          keys.map((k) => raw(k.key)),
          ", ",
        )}`
      : raw("")
  }`;

  const doc = dialect.jsonObject([
    ...keys.map((k) => [k.name, k.text ? dialect.keyJson(raw(k.key), raw(k.text)) : raw(k.key)] as const),
    ...query.metrics.map((m, n) => [m.name, metrics[n]!.value] as const),
  ]);
  const fields = dialect.fields("doc");
  const having = query.having ? conditionSql(query.having, fields) : TRUE;
  const totals = dialect.jsonObject(query.metrics.map((m, n) => [m.name, metrics[n]!.total] as const));
  const last = query.offset + query.limit;
  return sql`WITH g AS MATERIALIZED (${grouped}),
    h AS MATERIALIZED (SELECT doc, row_number() OVER (ORDER BY ${orderSql(query.order, fields)}) AS ord
      FROM (SELECT ${doc} AS doc FROM g ${dialect.fence}) AS x WHERE ${having})
    SELECT 0 AS part, ord, doc, NULL AS matched, NULL AS checked FROM h WHERE ord > ${query.offset} AND ord <= ${last}
    UNION ALL
    SELECT 1 AS part, (SELECT count(*) FROM h) AS ord, ${totals} AS doc, coalesce(sum(n), 0) AS matched,
      ${target.check ?? raw("NULL")} AS checked FROM g
    ORDER BY part, ord`;
}

/** A group key in the statement: its field, its column (`k<j>`), and for a column key `r<j>`, its structure text. */
interface KeySql {
  name: string;
  key: string;
  text: string | null;
}

/**
 * The members with the keys added: the stages of each bucketed column
 * (fenced: each stage computed once per row), then `k<j>` and `r<j>`.
 */
function keyedRows(
  query: AggregateQuery,
  columns: readonly Column[],
  values: Sql,
  dialect: AggregateDialect,
): { rows: Sql; keys: KeySql[] } {
  const at = (name: string) => columns.find((c) => c.name === name)!;
  let rows = values;
  const stages: Array<Array<[string, Sql]>> = [];
  for (const column of new Set(query.groupBy.filter((k) => k.bucket !== null).map((k) => k.column))) {
    if (dialect.storedBuckets?.(at(column))) continue;
    const own = bucketStages(bucketPrefix(at(column)), dialect.stringValue(at(column)), dialect);
    own.forEach((stage, n) => (stages[n] = [...(stages[n] ?? []), ...stage]));
  }
  stages.forEach((stage, n) => {
    rows = sql`SELECT *, ${selectList(stage)} FROM (${rows}) AS b${raw(String(n))} ${dialect.fence}`;
  });
  if (query.groupBy.length === 0) return { rows, keys: [] };
  const keys: KeySql[] = [];
  const added: Array<readonly [string, Sql]> = [];
  query.groupBy.forEach((k, j) => {
    const column = at(k.column);
    keys.push({ name: k.name, key: `k${j}`, text: k.bucket === null ? `r${j}` : null });
    const stored = k.bucket === null ? null : (dialect.storedBuckets?.(column) ?? null);
    const key =
      k.bucket === null
        ? dialect.identity(column)
        : stored
          ? storedBucketSql(k.bucket, stored, dialect)
          : bucketSql(k.bucket, bucketPrefix(column), dialect);
    added.push([`k${j}`, key]);
    if (k.bucket === null) added.push([`r${j}`, dialect.structureText(column)]);
  });
  return { rows: sql`SELECT *, ${selectList(added)} FROM (${rows}) AS k`, keys };
}

/**
 * The groups made in two steps, when the dialect keeps values as it groups
 * them (`pregroup`: SQLite's typed copy) and every metric can be merged
 * (no `countDistinct`) and every bucket is stored: first the matching rows
 * grouped by their stored values (`p<j>`: a key column's stored value, a
 * bucket's stored hour or week cut to it, or for a quarter to the month)
 * with each metric's partial aggregates (`count`, `sum` and `count` of
 * numbers, `min`, `max`), a plain `GROUP BY` of stored columns that SQLite
 * can walk in an index's order; then those few rows keyed and grouped as
 * the rows are (`keyedRows`), the partials merged (counts added, sums added
 * again, the least of least values). The same groups and metrics: every key
 * is a function of its stored value, and JSON-equal values stored apart
 * (objects' key order) meet in the second step.
 */
function pregrouped(
  query: AggregateQuery,
  columns: readonly Column[],
  values: Sql,
  metrics: readonly MetricSql[],
  dialect: AggregateDialect,
): { rows: Sql; keys: KeySql[]; aggregates: Array<readonly [string, Sql]> } | null {
  if (!dialect.pregroup) return null;
  if (query.metrics.some((m) => m.fn === "countDistinct")) return null;
  const at = (name: string) => columns.find((c) => c.name === name)!;
  const cuts: Array<readonly [string, Sql]> = [];
  const keys: KeySql[] = [];
  const added: Array<readonly [string, Sql]> = [];
  for (const [j, k] of query.groupBy.entries()) {
    const column = at(k.column);
    const p = raw(`p${j}`);
    keys.push({ name: k.name, key: `k${j}`, text: k.bucket === null ? `r${j}` : null });
    if (k.bucket === null) {
      // The second step reads the stored value as a column of its own (`x<index>`, past the columns read).
      const own: Column = { index: columns.length + j, name: column.name };
      cuts.push([`x${own.index}`, raw(`x${column.index}`)]);
      added.push([`k${j}`, dialect.identity(own)], [`r${j}`, dialect.structureText(own)]);
      continue;
    }
    const stored = dialect.storedBuckets?.(column) ?? null;
    if (stored === null) return null;
    const cut = { hour: 13, day: 10, month: 7, quarter: 7, year: 4, week: 0 }[k.bucket];
    cuts.push([
      `p${j}`,
      k.bucket === "week"
        ? stored.week
        : cut === 13
          ? stored.hour
          : sql`substr(${stored.hour}, 1, ${raw(String(cut))})`,
    ]);
    added.push([`k${j}`, storedBucketSql(k.bucket, { hour: p, week: p }, dialect)]);
  }
  const partials: Array<readonly [string, Sql]> = [];
  const aggregates: Array<readonly [string, Sql]> = [];
  for (const [n, m] of query.metrics.entries()) {
    if (m.column === null) continue;
    for (const [name, expression] of metrics[n]!.aggregates) {
      partials.push([name, expression]);
      // count(c) and the count of numbers: added; a sum: added again (with the dialect's compensation); min, max.
      const merged =
        m.fn === "min" || m.fn === "max"
          ? sql`${raw(m.fn)}(${raw(name)})`
          : name === `a${n}_s`
            ? dialect.sum(raw(name))
            : sql`sum(${raw(name)})`;
      aggregates.push([name, merged]);
    }
  }
  const first = sql`SELECT ${join(
    [...cuts, ["n", raw("count(*)")] as const, ...partials].map(([name, e]) => sql`${e} AS ${raw(name)}`),
    ", ",
  )} FROM (${values}) AS v${
    cuts.length > 0
      ? sql` GROUP BY ${join(
          cuts.map(([name]) => raw(name)),
          ", ",
        )}`
      : raw("")
  }`;
  const rows = added.length > 0 ? sql`SELECT *, ${selectList(added)} FROM (${first}) AS p` : first;
  return { rows, keys, aggregates };
}

/** A row of the statement (`part` 0: a group of the page, by `ord`; 1: the totals, `ord` the number of groups). */
export interface AggregateSqlRow {
  part: number | string;
  ord: number | string;
  /** JSON text (SQLite) or the parsed object (PostgreSQL's `json`). */
  doc: unknown;
  matched: number | string | null;
  /** The totals row's `check` (the target's), NULL without one. */
  checked?: unknown;
}

/** The answer from the statement's rows. A number the JSON of a store cannot hold (SQLite's infinity) is null. */
export function aggregateAnswer(rows: readonly AggregateSqlRow[]): AggregateAnswer {
  const groups: Row[] = [];
  let totals: AggregateSqlRow | undefined;
  for (const r of rows) {
    if (Number(r.part) === 0) groups.push(answerRow(r.doc));
    else totals = r;
  }
  if (totals === undefined) throw new Error("an aggregate statement answered no totals row");
  return {
    groups,
    matchedRows: Number(totals.matched),
    totalGroups: Number(totals.ord),
    totals: answerRow(totals.doc),
  };
}

function answerRow(doc: unknown): Row {
  const parsed = (typeof doc === "string" ? JSON.parse(doc) : doc) as Record<string, unknown>;
  const row = emptyRow();
  for (const key of Object.keys(parsed)) {
    const value = parsed[key];
    row[key] = typeof value === "number" && !Number.isFinite(value) ? null : value;
  }
  return row;
}

/** Columns the keys and metrics read, each once, in order of first use. */
export function usedColumns(query: AggregateQuery): Column[] {
  const names = [
    ...query.groupBy.map((k) => k.column),
    ...query.metrics.flatMap((m) => (m.column === null ? [] : [m.column])),
  ];
  return [...new Set(names)].map((name, index) => ({ index, name }));
}

/**
 * Every column the query reads from the rows: its keys', its metrics' and its `where`'s (with `filters`). (`having`
 * reads the answer's fields, made from the keys and metrics.)
 */
export function readColumns(query: AggregateQuery): string[] {
  const names = new Set(usedColumns(query).map((c) => c.name));
  const visit = (c: RowCondition) => (c.kind === "test" ? names.add(c.column) : c.of.forEach(visit));
  if (query.where) visit(query.where);
  return [...names];
}

function bucketPrefix(column: Column): string {
  return `b${column.index}_`;
}

function selectList(columns: ReadonlyArray<readonly [string, Sql]>): Sql {
  return join(
    columns.map(([name, expression]) => sql`${expression} AS ${raw(name)}`),
    ", ",
  );
}

function metricSql(
  metric: Metric,
  columns: readonly Column[],
  prefix: string,
  query: AggregateQuery,
  values: Sql,
  dialect: AggregateDialect,
): MetricSql {
  const own = raw(prefix);
  const s = raw(`${prefix}s`);
  const c = raw(`${prefix}c`);
  if (metric.column === null) return { aggregates: [], value: raw("n"), total: raw("coalesce(sum(n), 0)") };
  const i = columns.find((column) => column.name === metric.column)!;
  switch (metric.fn) {
    case "count":
      return {
        aggregates: [[prefix, sql`count(CASE WHEN ${dialect.present(i)} THEN 1 END)`]],
        value: own,
        total: sql`coalesce(sum(${own}), 0)`,
      };
    case "countDistinct": {
      const distinct = sql`count(DISTINCT ${dialect.identity(i)})`;
      // Distinct values of several groups overlap: over all rows they are counted again, unless there is one group.
      const total =
        query.groupBy.length === 0 ? sql`coalesce(max(${own}), 0)` : sql`(SELECT ${distinct} FROM (${values}) AS dv)`;
      return { aggregates: [[prefix, distinct]], value: own, total };
    }
    case "sum":
    case "avg": {
      const aggregates: Array<readonly [string, Sql]> = [
        [`${prefix}s`, dialect.sum(dialect.number(i))],
        [`${prefix}c`, sql`count(${dialect.number(i)})`],
      ];
      if (metric.fn === "sum") {
        return {
          aggregates,
          value: sql`(CASE WHEN ${c} > 0 THEN ${dialect.jsonNumber(s)} END)`,
          total: sql`(CASE WHEN sum(${c}) > 0 THEN ${dialect.jsonNumber(dialect.sum(s))} END)`,
        };
      }
      return {
        aggregates,
        value: sql`(CASE WHEN ${c} > 0 THEN ${dialect.jsonNumber(sql`${s} / ${c}`)} END)`,
        total: sql`(CASE WHEN sum(${c}) > 0 THEN ${dialect.jsonNumber(sql`${dialect.sum(s)} / sum(${c})`)} END)`,
      };
    }
    case "min":
    case "max":
      return dialect.extreme(metric.fn, i, prefix);
  }
}
