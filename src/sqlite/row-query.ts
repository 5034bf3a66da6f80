import type Database from "better-sqlite3";
import type { Row } from "../domain/model.js";
import type { RowTest } from "../domain/row-query.js";
import { keyOf } from "../domain/row-query-order.js";
import { afterSql, conditionSql, operatorSql, orderSql, raw, renderPositional, splitByKind, type Sql, sql, type SqlDialect, TRUE } from "../domain/row-query-sql.js";
import { canonicalJson } from "../domain/rows.js";
import type { TableRowsPage, TableRowsQuery } from "../ports/storage/tables.js";

/**
 * Row queries on SQLite, over a row's JSON text column: a column's kind is
 * `json_type` (NULL when absent), its value `json_extract` (numbers as
 * numbers, strings as text compared BINARY, i.e. by code point; objects and
 * arrays as their minified JSON text). JSON equality of objects and arrays
 * (key order aside) goes through `dataport_canonical_json`, registered on
 * every connection by `registerRowQueryFunctions`. No expression index:
 * conditions and sorts read each row of the dataset's window (see
 * docs/datasets.md).
 */
export function sqliteRowDialect(doc: string, position: string): SqlDialect {
  const column = raw(doc);
  const kindOf = (name: string): Sql =>
    plainPath(name) ? sql`json_type(${column}, ${`$."${name}"`})` : sql`(SELECT type FROM json_each(${column}) WHERE key = ${name})`;
  const valueOf = (name: string): Sql =>
    plainPath(name) ? sql`json_extract(${column}, ${`$."${name}"`})` : sql`(SELECT value FROM json_each(${column}) WHERE key = ${name})`;

  const nullish = (name: string) => sql`coalesce(${kindOf(name)}, 'null') = 'null'`;
  const present = (name: string) => sql`coalesce(${kindOf(name)}, 'null') <> 'null'`;
  const isNumber = (name: string) => sql`${kindOf(name)} IN ('integer', 'real')`;
  const isText = (name: string) => sql`${kindOf(name)} = 'text'`;

  const equals = (name: string, value: unknown): Sql => {
    if (value === null) return nullish(name);
    if (typeof value === "string") return sql`(${isText(name)} AND ${valueOf(name)} = ${value})`;
    if (typeof value === "number") return sql`(${isNumber(name)} AND ${valueOf(name)} = ${value})`;
    if (typeof value === "boolean") return sql`${kindOf(name)} = ${value ? "true" : "false"}`;
    return sql`(${kindOf(name)} = ${Array.isArray(value) ? "array" : "object"} AND dataport_canonical_json(${valueOf(name)}) = ${canonicalJson(value)})`;
  };

  /** One of the non-null `values`. */
  const oneOf = (name: string, values: readonly unknown[]): Sql => {
    const kinds = splitByKind(values);
    const parts: Sql[] = [];
    if (kinds.strings.length > 0) parts.push(sql`(${isText(name)} AND ${valueOf(name)} IN (SELECT value FROM json_each(${JSON.stringify(kinds.strings)})))`);
    if (kinds.numbers.length > 0) parts.push(sql`(${isNumber(name)} AND ${valueOf(name)} IN (SELECT value FROM json_each(${JSON.stringify(kinds.numbers)})))`);
    for (const b of new Set(kinds.booleans)) parts.push(sql`${kindOf(name)} = ${b ? "true" : "false"}`);
    if (kinds.structures.length > 0) {
      const texts = JSON.stringify(kinds.structures.map(canonicalJson));
      parts.push(sql`(${kindOf(name)} IN ('array', 'object') AND dataport_canonical_json(${valueOf(name)}) IN (SELECT value FROM json_each(${texts})))`);
    }
    return parts.length === 0 ? raw("(1 = 0)") : sql`(${joinOr(parts)})`;
  };

  const compare = (name: string, op: "<" | "<=" | ">" | ">=", operand: number | string): Sql =>
    sql`(${typeof operand === "number" ? isNumber(name) : isText(name)} AND ${valueOf(name)} ${raw(op)} ${operand})`;

  return {
    test: (test: RowTest) =>
      operatorSql(test, {
        equals,
        differs: (name, value) => sql`(${present(name)} AND NOT ${equals(name, value)})`,
        present,
        nullish,
        oneOf,
        compare,
        contains: (name, operand) => sql`(${isText(name)} AND instr(${valueOf(name)}, ${operand}) > 0)`,
        startsWith: (name, operand) => sql`(${isText(name)} AND substr(${valueOf(name)}, 1, length(${operand})) = ${operand})`,
      }),
    rank: (name) =>
      sql`(CASE ${kindOf(name)} WHEN 'integer' THEN 0 WHEN 'real' THEN 0 WHEN 'text' THEN 1 WHEN 'true' THEN 2 WHEN 'false' THEN 2
        WHEN 'array' THEN 3 WHEN 'object' THEN 3 ELSE 4 END)`,
    num: (name) => sql`(CASE WHEN ${isNumber(name)} THEN ${valueOf(name)} END)`,
    text: (name) =>
      sql`(CASE ${kindOf(name)} WHEN 'text' THEN ${valueOf(name)} WHEN 'true' THEN 'true' WHEN 'false' THEN 'false'
        WHEN 'array' THEN ${valueOf(name)} WHEN 'object' THEN ${valueOf(name)} END)`,
    rankValue: (rank) => sql`${rank}`,
    numValue: (value) => sql`${value}`,
    textValue: (value) => sql`${value}`,
    position: raw(position),
    positionValue: (value) => sql`${value}`,
  };
}

const TABLE_DIALECT = sqliteRowDialect("data", "seq");

/** A page of an input table's rows with `where`, `sort` or `after` (the caller runs it in a read transaction). */
export function queriedTableRows(db: Database.Database, tableId: string, query: TableRowsQuery): TableRowsPage {
  const sort = query.sort ?? [];
  const condition = query.where ? conditionSql(query.where, TABLE_DIALECT) : TRUE;
  const counted = renderPositional(sql`SELECT count(*) AS n FROM table_rows WHERE table_id = ${tableId} AND ${condition}`);
  const totalRows = (db.prepare(counted.text).get(...counted.params) as { n: number }).n;
  const after = query.after ? sql`AND ${afterSql(sort, query.after, TABLE_DIALECT)}` : raw("");
  const order = sort.length > 0 ? orderSql(sort, TABLE_DIALECT) : raw("seq");
  const paged = renderPositional(
    sql`SELECT seq, data FROM table_rows WHERE table_id = ${tableId} AND ${condition} ${after}
        ORDER BY ${order} LIMIT ${Math.max(0, query.limit)} OFFSET ${Math.max(0, query.offset)}`,
  );
  const found = db.prepare<unknown[], { seq: number; data: string }>(paged.text).all(...paged.params);
  const rows = found.map((r) => JSON.parse(r.data) as Row);
  const end = found.at(-1);
  return { totalRows, rows, lastKey: end ? keyOf(rows.at(-1)!, end.seq, sort) : null };
}

/**
 * The SQL functions row queries use, on a connection (writer or reader):
 * `dataport_canonical_json(text)`, the JSON text with object keys sorted,
 * for JSON equality of objects and arrays.
 */
export function registerRowQueryFunctions(db: Database.Database): void {
  db.function("dataport_canonical_json", { deterministic: true }, (text: unknown) =>
    typeof text === "string" ? canonicalJson(JSON.parse(text)) : null,
  );
}

function joinOr(parts: readonly Sql[]): Sql {
  return parts.slice(1).reduce((out, part) => sql`${out} OR ${part}`, parts[0]!);
}

/** A column name a JSON path can quote: `$."name"` cannot hold `"` or `\`, nor an unpaired surrogate (UTF-8 cannot carry it). */
function plainPath(name: string): boolean {
  return !/["\\]|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/.test(name);
}
