import type * as Database from "./driver.js";
import type { Column, Row } from "../domain/model.js";
import type { RowCondition, RowKey, RowTest, SortKey } from "../domain/row-query-model.js";
import { keyOf } from "../domain/row-query-order.js";
import { join, raw, renderPositional, type Sql, sql } from "../sql/fragments.js";
import { prefixEnd, quoteLiteral } from "../sql/literals.js";
import {
  afterSql,
  conditionSql,
  operatorSql,
  orderSql,
  splitByKind,
  type SqlDialect,
  TRUE,
} from "../sql/row-compiler.js";
import { sha256Hex } from "../domain/crypto.js";
import { canonicalJson } from "../domain/rows.js";
import { timeBucket } from "../domain/time-buckets.js";
import type { TableRowsPage, TableRowsQuery } from "../ports/storage/tables.js";
import { DEADLINE_CHECK } from "./statement-deadline.js";

/**
 * Row queries on SQLite, over a row's JSON text column: a column's kind is
 * `json_type` (NULL when absent), its value `json_extract` (numbers as
 * numbers, strings as text compared BINARY, i.e. by code point; objects and
 * arrays as their minified JSON text). JSON equality of objects and arrays
 * (key order aside) goes through `dataport_canonical_json`, registered on
 * every connection by `registerRowQueryFunctions`.
 *
 * Columns in `indexed` (declared ones, see `syncRowIndexes`) are read
 * through their sort value (`sortValueSql`), the expression of their two
 * partial indexes, so that comparisons, `eq`, `in`, `startsWith`, `isNull`,
 * a sort by that column and a cursor after it are index seeks. Every other
 * column is read row by row (see docs/datasets.md, "Indexes").
 */
export function sqliteRowDialect(doc: string, position: string, options: DialectOptions = {}): SqliteRowDialect {
  const column = raw(doc);
  const indexed = options.indexed ?? NO_COLUMNS;
  const kindOf = (name: string): Sql =>
    plainPath(name)
      ? sql`json_type(${column}, ${`$."${name}"`})`
      : sql`(SELECT type FROM json_each(${column}) WHERE key = ${name})`;
  const valueOf = (name: string): Sql =>
    plainPath(name)
      ? sql`json_extract(${column}, ${`$."${name}"`})`
      : sql`(SELECT value FROM json_each(${column}) WHERE key = ${name})`;
  /** The ascending sort value of an indexed column (null and absent: the largest value, NULL_LAST). */
  const keyOf = (name: string): Sql => raw(sortValueSql(doc, name));

  const nullish = (name: string) =>
    indexed.has(name) ? sql`${keyOf(name)} = ${raw(NULL_LAST)}` : sql`coalesce(${kindOf(name)}, 'null') = 'null'`;
  const present = (name: string) =>
    indexed.has(name) ? sql`${keyOf(name)} <> ${raw(NULL_LAST)}` : sql`coalesce(${kindOf(name)}, 'null') <> 'null'`;
  const isNumber = (name: string) => sql`${kindOf(name)} IN ('integer', 'real')`;
  const isText = (name: string) => sql`${kindOf(name)} = 'text'`;
  const structureEquals = (name: string, value: unknown) =>
    sql`(${kindOf(name)} = ${Array.isArray(value) ? "array" : "object"} AND dataport_canonical_json(${valueOf(name)}) = ${canonicalJson(value)})`;

  const equals = (name: string, value: unknown): Sql => {
    if (value === null) return nullish(name);
    if (value !== null && typeof value === "object") return structureEquals(name, value);
    if (indexed.has(name))
      return typeof value === "boolean"
        ? sql`${keyOf(name)} = ${raw(booleanBlob(value))}`
        : sql`${keyOf(name)} = ${value}`;
    if (typeof value === "string") return sql`(${isText(name)} AND ${valueOf(name)} = ${value})`;
    if (typeof value === "number") return sql`(${isNumber(name)} AND ${valueOf(name)} = ${value})`;
    return sql`${kindOf(name)} = ${value ? "true" : "false"}`;
  };

  /** One of the non-null `values`. */
  const oneOf = (name: string, values: readonly unknown[]): Sql => {
    const kinds = splitByKind(values);
    const parts: Sql[] = [];
    if (indexed.has(name)) {
      const scalars = [...kinds.strings, ...kinds.numbers];
      if (scalars.length > 0)
        parts.push(sql`${keyOf(name)} IN (SELECT value FROM json_each(${JSON.stringify(scalars)}))`);
      for (const b of new Set(kinds.booleans)) parts.push(sql`${keyOf(name)} = ${raw(booleanBlob(b))}`);
    } else {
      if (kinds.strings.length > 0)
        parts.push(
          sql`(${isText(name)} AND ${valueOf(name)} IN (SELECT value FROM json_each(${JSON.stringify(kinds.strings)})))`,
        );
      if (kinds.numbers.length > 0)
        parts.push(
          sql`(${isNumber(name)} AND ${valueOf(name)} IN (SELECT value FROM json_each(${JSON.stringify(kinds.numbers)})))`,
        );
      for (const b of new Set(kinds.booleans)) parts.push(sql`${kindOf(name)} = ${b ? "true" : "false"}`);
    }
    if (kinds.structures.length > 0) {
      const texts = JSON.stringify(kinds.structures.map(canonicalJson));
      parts.push(
        sql`(${kindOf(name)} IN ('array', 'object') AND dataport_canonical_json(${valueOf(name)}) IN (SELECT value FROM json_each(${texts})))`,
      );
    }
    return parts.length === 0 ? raw("(1 = 0)") : sql`(${joinOr(parts)})`;
  };

  const compare = (name: string, op: "<" | "<=" | ">" | ">=", operand: number | string): Sql => {
    if (!indexed.has(name))
      return sql`(${typeof operand === "number" ? isNumber(name) : isText(name)} AND ${valueOf(name)} ${raw(op)} ${operand})`;
    // Sort values order numbers < text < blobs (booleans, structures, null): a range of one kind is bounded by the next
    // kind.
    const key = keyOf(name);
    const kindKey = options.bounded?.has(name) ? sql`+${key}` : key;
    const upward = op === ">" || op === ">=";
    if (typeof operand === "number")
      return upward ? sql`(${key} ${raw(op)} ${operand} AND ${kindKey} < '')` : sql`${key} ${raw(op)} ${operand}`;
    return upward
      ? sql`(${key} ${raw(op)} ${operand} AND ${kindKey} < X'')`
      : sql`(${key} ${raw(op)} ${operand} AND ${kindKey} >= '')`;
  };

  const startsWith = (name: string, operand: string): Sql => {
    if (!indexed.has(name))
      return sql`(${isText(name)} AND substr(${valueOf(name)}, 1, length(${operand})) = ${operand})`;
    // The strings starting with p are exactly those in [p, p with its last code point + 1).
    const end = prefixEnd(operand);
    const key = keyOf(name);
    return end === null
      ? sql`(${key} >= ${operand} AND ${key} < X'' AND substr(${key}, 1, length(${operand})) = ${operand})`
      : sql`(${key} >= ${operand} AND ${key} < ${end})`;
  };

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
        startsWith,
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
    positionValue: options.positionValue ?? ((value) => sql`${value}`),
    indexed,
    sortKey: (name) => (indexed.has(name) ? keyOf(name) : null),
  };
}

export interface DialectOptions {
  /** Columns with row indexes (`syncRowIndexes`); their names are `indexableColumn`. */
  indexed?: ReadonlySet<string>;
  /**
   * The bound value of a stored position, when `position` is another column in the same order (a dataset's row_key).
   */
  positionValue?: (position: number) => Sql;
  /**
   * Indexed columns the condition bounds on both sides (`boundedColumns`): their comparisons leave the kind bounds out
   * of the index range.
   */
  bounded?: ReadonlySet<string>;
}

/**
 * The columns a condition compares from below (gt, gte) and from above (lt,
 * lte) among the tests every row must pass. SQLite seeks an index range by
 * the first lower and the first upper bound it meets, not the tightest: a
 * range's kind bounds (numbers end where text begins) would widen
 * `gte a AND lt b` to everything above `a`, so for these columns they are
 * written so that no index uses them (`+`).
 */
export function boundedColumns(condition: RowCondition | null | undefined): ReadonlySet<string> {
  const lower = new Set<string>();
  const upper = new Set<string>();
  const visit = (c: RowCondition) => {
    if (c.kind === "all") c.of.forEach(visit);
    else if (c.kind === "test" && (c.op === "gt" || c.op === "gte")) lower.add(c.column);
    else if (c.kind === "test" && (c.op === "lt" || c.op === "lte")) upper.add(c.column);
  };
  if (condition) visit(condition);
  return new Set([...lower].filter((column) => upper.has(column)));
}

export interface SqliteRowDialect extends SqlDialect {
  indexed: ReadonlySet<string>;
  /** An indexed column's sort value (its index's expression); null for a column without index. */
  sortKey(column: string): Sql | null;
}

const NO_COLUMNS: ReadonlySet<string> = new Set();

/** The sort value of null and absent in ascending order: a blob above every other value. */
const NULL_LAST = "X'03'";

/**
 * A column's value as ONE SQLite value ordered as row queries sort
 * ascending (see `compareValues`): numbers as numbers, strings as text
 * (BINARY: code point order), then booleans and objects/arrays as blobs
 * (SQLite orders numbers < text < blobs; blobs by their bytes): 0x01 +
 * `false`/`true`, 0x02 + the JSON text; null and absent the blob 0x03,
 * after everything. The expression of the column's index and of the reads
 * that use it, with the JSON path inlined (an index on an expression serves
 * only a query with the same expression).
 */
export function sortValueSql(doc: string, name: string): string {
  const path = quoteLiteral(`$."${name}"`);
  const value = `json_extract(${doc}, ${path})`;
  return `(CASE json_type(${doc}, ${path}) WHEN 'integer' THEN ${value} WHEN 'real' THEN ${value} WHEN 'text' THEN ${value}
    WHEN 'true' THEN ${booleanBlob(true)} WHEN 'false' THEN ${booleanBlob(false)}
    WHEN 'array' THEN CAST(char(2) || ${value} AS BLOB) WHEN 'object' THEN CAST(char(2) || ${value} AS BLOB)
    ELSE ${NULL_LAST} END)`;
}

/** The bound sort value of a key value (see `sortValueSql`). */
export function sortValueOf(value: unknown): Sql {
  if (value === null || value === undefined) return raw(NULL_LAST);
  if (typeof value === "number" || typeof value === "string") return sql`${value}`;
  if (typeof value === "boolean") return raw(booleanBlob(value));
  return sql`${Buffer.concat([Buffer.from([2]), Buffer.from(JSON.stringify(value), "utf8")])}`;
}

function booleanBlob(value: boolean): string {
  return `X'01${Buffer.from(String(value)).toString("hex")}'`;
}

/** A column name an index can be made for: a JSON path can quote it, and a SQL string literal can hold it. */
export function indexableColumn(name: string): boolean {
  return plainPath(name) && !name.includes("\u0000");
}

/**
 * A sorted read's SQL: `select` (the position column, then the rows' data)
 * of the rows of `from` matching `where`, in the order of `sort`, after
 * `after`, `offset` and `limit` applied. Sorted by one indexed column it
 * walks and seeks that column's index (see `indexedPageSql`); otherwise the
 * generic ORDER BY and keyset predicate.
 */
export function sortedPageSql(
  parts: {
    select: string;
    from: string;
    where: Sql;
    sort: readonly SortKey[];
    after: RowKey | null;
    limit: number;
    offset: number;
  },
  dialect: SqliteRowDialect,
): Sql {
  const { select, from, where, sort, after, limit, offset } = parts;
  const only = sort.length === 1 ? sort[0]! : null;
  const key = only ? dialect.sortKey(only.column) : null;
  if (only && key) return indexedPageSql({ ...parts, key, descending: only.descending }, dialect);
  const keyset = after ? sql`AND ${afterSql(sort, after, dialect)}` : raw("");
  return sql`SELECT ${raw(select)} FROM ${raw(from)} WHERE ${where} ${keyset} ORDER BY ${orderSql(sort, dialect)} LIMIT +${limit} OFFSET ${offset}`;
}

/**
 * A page sorted by one indexed column, from its ascending index (sort
 * value, then row id: ties in stored order), in seeks of at most
 * `offset + limit` entries each, merged by a final sort of those few rows:
 *
 * - ascending: the rows tied with the cursor's value after its position,
 *   then the rows with a greater value (nulls are the greatest);
 * - descending, where ties still go by position ascending, which a
 *   backward walk does not give: the ties after the cursor's position; the
 *   non-null values below the cursor's down to the n-th one (`n` = offset
 *   + limit, found by a backward walk), which are fewer than n, whole; the
 *   rows holding that n-th value, forward; then the nulls, forward.
 */
function indexedPageSql(
  parts: {
    select: string;
    from: string;
    where: Sql;
    after: RowKey | null;
    limit: number;
    offset: number;
    key: Sql;
    descending: boolean;
  },
  dialect: SqliteRowDialect,
): Sql {
  const { select, from, where, after, limit, offset, key, descending } = parts;
  const position = dialect.position;
  const upTo = limit + offset;
  const rows = (condition: Sql, order: Sql) =>
    sql`SELECT * FROM (SELECT ${raw(select)}, ${key} AS sort_value_, ${position} AS sort_position_ FROM ${raw(from)}
      WHERE ${where} AND ${condition} ORDER BY ${order} LIMIT +${upTo})`;
  const value = after ? sortValueOf(after.values[0] ?? null) : null;
  const ties = after
    ? rows(sql`${key} = ${value!} AND ${position} > ${dialect.positionValue(after.position)}`, position)
    : null;
  if (!descending) {
    if (!after)
      return sql`SELECT ${raw(select)} FROM ${raw(from)} WHERE ${where} ORDER BY ${key}, ${position} LIMIT +${limit} OFFSET ${offset}`;
    return sql`SELECT * FROM (${ties!} UNION ALL ${rows(sql`${key} > ${value!}`, sql`${key}, ${position}`)})
      ORDER BY sort_value_, sort_position_ LIMIT +${limit} OFFSET ${offset}`;
  }
  const nullValue = raw(NULL_LAST);
  const afterNull = after !== null && (after.values[0] ?? null) === null;
  const merged: Sql[] = [];
  if (ties && !afterNull) merged.push(ties);
  if (!afterNull) {
    const below = after ? sql`${key} < ${value!}` : sql`${key} < ${nullValue}`;
    const nth = sql`(SELECT ${key} FROM ${raw(from)} WHERE ${where} AND ${below} ORDER BY ${key} DESC LIMIT 1 OFFSET ${upTo - 1})`;
    merged.push(
      rows(sql`${below} AND ${key} > coalesce(${nth}, -1e999)`, sql`${key} DESC`),
      rows(sql`${key} = ${nth}`, position),
    );
  }
  merged.push(afterNull ? ties! : rows(sql`${key} = ${nullValue}`, position));
  return sql`SELECT * FROM (${join(merged, " UNION ALL ")})
    ORDER BY sort_value_ = ${nullValue}, sort_value_ DESC, sort_position_ LIMIT +${limit} OFFSET ${offset}`;
}

/**
 * Whether a read should start from a row index instead of the dataset's
 * position range: sorted by one indexed column, or a condition that every
 * matching row must pass (a test under AND) looking up an indexed column:
 * `eq`, `in`, `isNull: true`, and with `ranges` (a count, which reads the
 * whole range anyway) comparisons and `startsWith`. A page of a range in
 * stored order is left to the planner: the window in order, stopping at the
 * page's end, often beats sorting every match.
 */
export function seeksIndex(
  condition: RowCondition | null,
  sort: readonly SortKey[],
  dialect: SqliteRowDialect,
  ranges: boolean,
): boolean {
  if (sort.length === 1 && dialect.indexed.has(sort[0]!.column)) return true;
  return seekedColumn(condition, dialect.indexed, ranges) !== null;
}

/** The indexed column the first such test (see `seeksIndex`) looks up, or null. */
function seekedColumn(condition: RowCondition | null, indexed: ReadonlySet<string>, ranges: boolean): string | null {
  if (condition === null || condition.kind === "any") return null;
  if (condition.kind === "all") {
    for (const c of condition.of) {
      const found = seekedColumn(c, indexed, ranges);
      if (found !== null) return found;
    }
    return null;
  }
  if (!indexed.has(condition.column)) return null;
  switch (condition.op) {
    case "eq":
      return condition.operand === null || typeof condition.operand !== "object" ? condition.column : null;
    case "in":
      // One IN list over the index (an OR of several lookups would be left to the planner).
      return condition.operand.every((v) => typeof v === "string" || typeof v === "number") ? condition.column : null;
    case "gt":
    case "gte":
    case "lt":
    case "lte":
    case "startsWith":
      return ranges ? condition.column : null;
    case "isNull":
      return condition.operand ? condition.column : null;
    default:
      return null;
  }
}

const TABLE_DIALECT = sqliteRowDialect("data", "seq");

/**
 * A page of an input table's rows with `where`, `sort` or `after` (the
 * caller runs it in a read transaction, on the loop or a reader thread: see
 * row-reads.ts).
 */
export function queriedTableRows(db: Database.Database, tableId: string, query: TableRowsQuery): TableRowsPage {
  const sort = query.sort ?? [];
  const indexed = indexedTableColumns(db, tableId);
  const dialect =
    indexed.size > 0
      ? sqliteRowDialect("data", "seq", { indexed, bounded: boundedColumns(query.where) })
      : TABLE_DIALECT;
  // A partial index serves a query naming its table by the same literal. The deadline check first: it is called per row
  // visited.
  const table =
    indexed.size > 0
      ? raw(`${DEADLINE_CHECK} AND table_id = ${quoteLiteral(tableId)}`)
      : sql`${raw(DEADLINE_CHECK)} AND table_id = ${tableId}`;
  const condition = query.where ? conditionSql(query.where, dialect) : TRUE;
  // Without statistics the planner takes the table's own index (table_id, seq) and reads every row:
  // a count seeks the condition's index, a page sorted by an indexed column walks that column's.
  const seeking = seekedColumn(query.where ?? null, indexed, true);
  const sorting = sort.length === 1 && indexed.has(sort[0]!.column) ? sort[0]!.column : null;
  const counted = (from: string) =>
    renderPositional(sql`SELECT count(*) AS n FROM ${raw(from)} WHERE ${table} AND ${condition}`);
  const prefix = tableIndexPrefix(tableId);
  const through = (column: string | null) => (column === null ? null : rowIndexName(prefix, column));
  const prepare = (text: string) => db.prepare(text);
  const totalRows =
    query.count === false
      ? -1
      : (throughIndex(prepare, "table_rows", through(seeking), counted).get() as { n: number }).n;
  const walked = sorting ?? (totalRows >= 0 && totalRows <= FEW_MATCHES ? seeking : null);
  const paged = (from: string) =>
    renderPositional(
      sortedPageSql(
        {
          select: "seq, data",
          from,
          where: sql`${table} AND ${condition}`,
          sort,
          after: query.after ?? null,
          limit: Math.max(0, query.limit),
          offset: Math.max(0, query.offset),
        },
        dialect,
      ),
    );
  const found = throughIndex(prepare, "table_rows", through(walked), paged).all() as Array<{
    seq: number;
    data: string;
  }>;
  const rows = found.map((r) => JSON.parse(r.data) as Row);
  const end = found.at(-1);
  return { totalRows, rows, lastKey: end ? keyOf(rows.at(-1)!, end.seq, sort) : null };
}

/**
 * Matches a sorted or conditioned page may seek through a condition's row index and then sort; more walk an index in
 * order.
 */
export const FEW_MATCHES = 10_000;

/** In every row index name: an index of another expression would get another. */
const INDEX_VERSION = "rx1";

/** The names of a dataset's row indexes begin with this. */
export function datasetIndexPrefix(seq: number): string {
  return `${INDEX_VERSION}_d${Number(seq)}_`;
}

/** The names of an input table's row indexes begin with this. */
export function tableIndexPrefix(tableId: string): string {
  return `${INDEX_VERSION}_t${sha256Hex(tableId).slice(0, 16)}_`;
}

/**
 * The row index of a declared column (row-indexes.ts makes it): its dataset's or table's prefix, then the column's
 * hash.
 */
export function rowIndexName(prefix: string, column: string): string {
  return `${prefix}${sha256Hex(column).slice(0, 16)}`;
}

/**
 * A statement over `table` through the named index (INDEXED BY); without it
 * when none is named, or the index is not there (dropped by another process)
 * or of no use to this statement: the planner's own choice.
 */
export function throughIndex(
  prepare: (text: string) => Database.Statement,
  table: string,
  index: string | null,
  render: (from: string) => { text: string; params: unknown[] },
): { get(): unknown; all(): unknown[] } {
  if (index !== null) {
    const { text, params } = render(`${table} INDEXED BY "${index}"`);
    try {
      return bound(prepare(text), params);
    } catch (error) {
      if (!/no query solution|no such index/.test(String((error as Error).message))) throw error;
    }
  }
  const { text, params } = render(table);
  return bound(prepare(text), params);
}

function bound(statement: Database.Statement, params: unknown[]) {
  return { get: () => statement.get(...params), all: () => statement.all(...params) };
}

/** The declared columns of an input table that have row indexes. */
function indexedTableColumns(db: Database.Database, tableId: string): ReadonlySet<string> {
  const found = db.prepare<[string], { columns: string }>("SELECT columns FROM input_tables WHERE id = ?").get(tableId);
  if (!found) return NO_COLUMNS;
  return new Set((JSON.parse(found.columns) as Column[]).map((c) => c.name).filter(indexableColumn));
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
  // The time bucket of a text (`time-buckets.ts`), for the typed copy of declared columns (dataset-values.ts).
  db.function("dataport_time_bucket", { deterministic: true }, (unit: unknown, value: unknown) =>
    typeof value === "string" && (unit === "hour" || unit === "week") ? timeBucket(unit, value) : null,
  );
}

function joinOr(parts: readonly Sql[]): Sql {
  return parts.slice(1).reduce((out, part) => sql`${out} OR ${part}`, parts[0]!);
}

/**
 * A column name a JSON path can quote: `$."name"` cannot hold `"` or `\`, nor an unpaired surrogate (UTF-8 cannot carry
 * it).
 */
export function plainPath(name: string): boolean {
  return !/["\\]|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/.test(name);
}
