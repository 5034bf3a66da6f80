import type { Row } from "../domain/model.js";
import type { RowTest } from "../domain/row-query.js";
import { keyOf } from "../domain/row-query-order.js";
import { afterSql, conditionSql, operatorSql, orderSql, raw, renderNumbered, splitByKind, type Sql, sql, type SqlDialect, TRUE } from "../domain/row-query-sql.js";
import type { TableRowsPage, TableRowsQuery } from "../ports/storage/tables.js";
import { type Db, num } from "./db.js";

/**
 * Row queries on PostgreSQL, over a row's `json` column: a column is
 * `doc -> name` (SQL NULL when absent), its kind `json_typeof`; JSON
 * equality is jsonb equality of that value (key order and number spelling
 * aside, as `jsonEquals`); numbers compare as float8 (stored numbers are
 * JavaScript's doubles), text under `COLLATE "C"` (code point order, as
 * the other stores). Every value is a bound parameter; the column name too.
 */
export function postgresRowDialect(doc: string, position: string): SqlDialect {
  const column = raw(doc);
  const member = (name: string): Sql => sql`(${column} -> ${name}::text)`;
  const textOf = (name: string): Sql => sql`(${column} ->> ${name}::text)`;
  const kindOf = (name: string): Sql => sql`json_typeof(${member(name)})`;

  const nullish = (name: string) => sql`coalesce(${kindOf(name)}, 'null') = 'null'`;
  const present = (name: string) => sql`coalesce(${kindOf(name)}, 'null') <> 'null'`;
  const numberOf = (name: string) => sql`(CASE WHEN ${kindOf(name)} = 'number' THEN ${textOf(name)}::float8 END)`;

  const equals = (name: string, value: unknown): Sql =>
    value === null ? nullish(name) : sql`(${member(name)})::jsonb = ${JSON.stringify(value)}::jsonb`;

  /** One of the non-null `values` (SQL NULL, i.e. no match, when the column is absent). */
  const oneOf = (name: string, values: readonly unknown[]): Sql => {
    const kinds = splitByKind(values);
    const texts = [...kinds.strings, ...kinds.numbers, ...kinds.booleans, ...kinds.structures].map((v) => JSON.stringify(v));
    return texts.length === 0 ? raw("(1 = 0)") : sql`coalesce((${member(name)})::jsonb = any(${texts}::jsonb[]), false)`;
  };

  const compare = (name: string, op: "<" | "<=" | ">" | ">=", operand: number | string): Sql =>
    typeof operand === "number"
      ? sql`${numberOf(name)} ${raw(op)} ${operand}::float8`
      : sql`(${kindOf(name)} = 'string' AND ${textOf(name)} COLLATE "C" ${raw(op)} ${operand}::text)`;

  return {
    test: (test: RowTest) =>
      operatorSql(test, {
        equals,
        differs: (name, value) => sql`(${present(name)} AND NOT coalesce(${equals(name, value)}, false))`,
        present,
        nullish,
        oneOf,
        compare,
        contains: (name, operand) => sql`(${kindOf(name)} = 'string' AND strpos(${textOf(name)}, ${operand}::text) > 0)`,
        startsWith: (name, operand) => sql`(${kindOf(name)} = 'string' AND starts_with(${textOf(name)}, ${operand}::text))`,
      }),
    rank: (name) =>
      sql`(CASE ${kindOf(name)} WHEN 'number' THEN 0 WHEN 'string' THEN 1 WHEN 'boolean' THEN 2 WHEN 'array' THEN 3 WHEN 'object' THEN 3 ELSE 4 END)`,
    num: numberOf,
    text: (name) =>
      sql`(CASE WHEN ${kindOf(name)} = 'string' THEN ${textOf(name)} WHEN ${kindOf(name)} IN ('boolean', 'array', 'object') THEN ${member(name)}::text END) COLLATE "C"`,
    rankValue: (rank) => sql`${rank}::int`,
    numValue: (value) => sql`${value}::float8`,
    textValue: (value) => sql`${value}::text`,
    position: raw(position),
    positionValue: (value) => sql`${value}::bigint`,
  };
}

const TABLE_DIALECT = postgresRowDialect("row", "pos");

/** A page of an input table's rows with `where`, `sort` or `after`: the count and the rows from one statement (one snapshot). */
export async function queriedTableRows(db: Db, tableId: string, query: TableRowsQuery): Promise<TableRowsPage> {
  const { t } = db;
  const sort = query.sort ?? [];
  const params: unknown[] = [tableId];
  const condition = renderNumbered(query.where ? conditionSql(query.where, TABLE_DIALECT) : TRUE, params);
  const after = query.after ? ` and ${renderNumbered(afterSql(sort, query.after, TABLE_DIALECT), params)}` : "";
  const order = sort.length > 0 ? renderNumbered(orderSql(sort, TABLE_DIALECT), params) : "pos";
  const result = await db.query<{ n: string; pos: string | null; row: Row | null }>(
    `select c.n, p.pos, p.row from (select count(*) as n from ${t("table_rows")} where table_id = $1 and ${condition}) c
     left join lateral (
       select pos, row, row_number() over (order by ${order}) as ord from ${t("table_rows")} where table_id = $1 and ${condition}${after}
       order by ${order} offset $${params.push(Math.max(0, query.offset))} limit $${params.push(Math.max(0, query.limit))}
     ) p on true order by p.ord`,
    params,
  );
  const found = result.filter((r) => r.pos !== null);
  const rows = found.map((r) => r.row as Row);
  const end = found.at(-1);
  return { totalRows: num(result[0]?.n), rows, lastKey: end ? keyOf(end.row as Row, Number(end.pos), sort) : null };
}
