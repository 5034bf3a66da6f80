import type { AggregateDialect, Column, MetricSql } from "../sql/aggregate-compiler.js";
import type { Slot } from "../sql/dataset-values.js";
import { join, raw, type Sql, sql } from "../sql/fragments.js";
import { postgresRowDialect } from "./row-query-dialect.js";

/**
 * Aggregates on PostgreSQL (see `src/sql/aggregate-compiler.ts`), over rows kept as
 * `json` in `doc`: each matching row is taken apart once (`doc::jsonb`), a
 * column is `j -> name` (SQL NULL when absent), read once per row by a
 * derived table PostgreSQL does not merge into its reader (`OFFSET 0`). So
 * `doc` MUST be a row PostgreSQL can take apart: `row`, or `SANE_ROW` for a
 * window holding a `\u0000` escape (see row-query-dialect.ts).
 *
 * Grouping and distinct counts use jsonb equality (JSON equality: 5 and "5"
 * differ, object key order does not matter). Sums are exact: `numeric` from
 * each number's text, rounded once to a double at the end (null beyond the
 * double range). `min` and `max` take the least or greatest of each kind
 * (float8 numbers, strings under `COLLATE "C"`, booleans, the JSON text of
 * objects and arrays) and answer the first kind present in the sort order.
 */
export function postgresAggregateDialect(
  doc: string,
  slots: ReadonlyMap<string, Slot> | null = null,
): AggregateDialect {
  const m = (column: Column) => raw(`m${column.index}`);
  const kind = (column: Column) => sql`jsonb_typeof(${m(column)})`;
  const ofKind = (column: Column, kinds: string, value: Sql) =>
    sql`(CASE WHEN ${kind(column)} IN (${raw(kinds)}) THEN ${value} END)`;
  // Objects' and arrays' JSON text as stored (jsonb would respace it and reorder its keys), read only for them.
  const ownText = (column: Column) =>
    slots ? sql`${raw(`o${column.index}`)}::text` : sql`(d -> ${column.name}::text)::text`;
  const structureText = (column: Column) => ofKind(column, "'object', 'array'", ownText(column));
  const times = (column: Column) => slots?.get(column.name)?.times ?? null;
  return {
    values(from, columns) {
      if (slots) return copiedValues(from, columns, slots);
      const values = columns.map((column) => sql`s.j -> ${column.name}::text AS ${m(column)}`);
      return sql`SELECT ${join([raw("s.d"), ...values], ", ")}
        FROM (SELECT ${raw(doc)} AS d, (${raw(doc)})::jsonb AS j ${from} OFFSET 0) AS s OFFSET 0`;
    },
    storedBuckets: (column) =>
      times(column) === null ? null : { hour: raw(`h${column.index}`), week: raw(`w${column.index}`) },
    fence: raw("OFFSET 0"),
    identity: (column) => sql`(CASE WHEN ${kind(column)} <> 'null' THEN ${m(column)} END)`,
    present: (column) => sql`${kind(column)} <> 'null'`,
    number: (column) => ofKind(column, "'number'", sql`(${m(column)})::numeric`),
    sum: (numbers) => sql`sum(${numbers})`,
    jsonNumber: (value) =>
      sql`(CASE WHEN abs(${value}) >= ${raw(BEYOND_DOUBLE)} THEN NULL
        WHEN abs(${value}) * ${raw(TWO_TO_1075)} <= 1 THEN 0::float8 ELSE (${value})::float8 END)`,
    stringValue: (column) => ofKind(column, "'string'", sql`${m(column)} #>> '{}'`),
    structureText,
    leastText: (texts) => sql`min(${texts} COLLATE "C")`,
    keyJson: (key, structureText) =>
      sql`(CASE WHEN ${structureText} IS NOT NULL THEN (${structureText})::json ELSE (${key})::json END)`,
    extreme(fn, column, prefix): MetricSql {
      const [n, s, b, o] = ["n", "s", "b", "o"].map((part) => raw(prefix + part)) as [Sql, Sql, Sql, Sql];
      const all = fn === "min" ? raw("bool_and") : raw("bool_or");
      const f = raw(fn);
      const pick = (num: Sql, str: Sql, bool: Sql, text: Sql) => {
        const cases = [
          sql`WHEN ${num} IS NOT NULL THEN to_json(${num})`,
          sql`WHEN ${str} IS NOT NULL THEN to_json(${str})`,
          sql`WHEN ${bool} IS NOT NULL THEN to_json(${bool})`,
          sql`WHEN ${text} IS NOT NULL THEN (${text})::json`,
        ];
        // The first kind present in the sort order of values (numbers, strings, booleans, structures), or the last.
        return sql`(CASE ${join(fn === "min" ? cases : cases.reverse(), " ")} END)`;
      };
      return {
        aggregates: [
          [`${prefix}n`, sql`${f}(${ofKind(column, "'number'", sql`(${m(column)})::float8`)})`],
          [`${prefix}s`, sql`${f}(${ofKind(column, "'string'", sql`${m(column)} #>> '{}'`)} COLLATE "C")`],
          [`${prefix}b`, sql`${all}(${ofKind(column, "'boolean'", sql`(${m(column)})::boolean`)})`],
          [`${prefix}o`, sql`${f}(${structureText(column)} COLLATE "C")`],
        ],
        value: pick(n, s, b, o),
        total: pick(sql`${f}(${n})`, sql`${f}(${s} COLLATE "C")`, sql`${all}(${b})`, sql`${f}(${o} COLLATE "C")`),
      };
    },
    jsonObject: (fields) =>
      sql`json_build_object(${join(
        fields.map(([name, value]) => sql`${name}::text, ${value}`),
        ", ",
      )})`,
    fields: (column) => postgresRowDialect(column, UNORDERED),
    isoForm: (text) => sql`(${text} ~ ${raw(`'${ISO_FORM}'`)})`,
    integer: (digits) => sql`CAST(${digits} AS integer)`,
    digits: (value, width) => sql`to_char(${value}, ${raw(`'FM${"0".repeat(width)}'`)})`,
  };
}

/**
 * The values of `columns` from the typed copy (dataset-values-sql.ts): each
 * slot's `json` taken apart (`m`, a small value, not the row) and kept as
 * text for objects and arrays (`o`), with a date column's stored buckets.
 */
function copiedValues(from: Sql, columns: readonly Column[], slots: ReadonlyMap<string, Slot>): Sql {
  const items = columns.flatMap((column) => {
    const { slot, times } = slots.get(column.name)!;
    const [i, v] = [column.index, `v${slot}`];
    const own = [raw(`${v}::jsonb AS m${i}`), raw(`${v} AS o${i}`)];
    return times === null ? own : [...own, raw(`h${times} AS h${i}`), raw(`w${times} AS w${i}`)];
  });
  return sql`SELECT ${items.length > 0 ? join(items, ", ") : raw("1 AS one")} ${from} OFFSET 0`;
}

/** The accepted forms of a time bucket's value (time-buckets.ts): ASCII digits, `T` and `Z` upper case. */
const ISO_FORM =
  "^[0-9]{4}-[0-9]{2}-[0-9]{2}(T[0-9]{2}:[0-9]{2}(:[0-9]{2}([.][0-9]{1,9})?)?(Z|[+-][0-9]{2}:[0-9]{2})?)?$";

/** Numerics from here on round to an infinite double (2^1024 - 2^970, halfway past the largest): null instead. */
const BEYOND_DOUBLE = (2n ** 1024n - 2n ** 970n).toString();

/** Numerics up to 2^-1075 (half the least double) round to 0, which float8's input refuses as an underflow. */
const TWO_TO_1075 = (2n ** 1075n).toString();

/** Groups have no stored position: their keys, last in their order, tell any two apart. */
const UNORDERED = "0 + 0";
