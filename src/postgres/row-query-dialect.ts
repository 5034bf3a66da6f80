import type { Column, Row } from "../domain/model.js";
import type { RowKey, RowTest, SortKey } from "../domain/row-query-model.js";
import { keyOf, RANK, sortTerms } from "../domain/row-query-order.js";
import { join, raw, renderNumbered, type Sql, sql } from "../sql/fragments.js";
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
import type { TableRowsPage, TableRowsQuery } from "../ports/storage/tables.js";
import { type Db, num } from "./db.js";

/**
 * The condition of the partial GIN index `dataset_rows_doc` (migration 6),
 * verbatim so the planner can use it: rows whose JSON text holds a `\u0000`
 * or surrogate escape have no jsonb form (PostgreSQL refuses one) and are
 * neither indexed nor matched by filters.
 */
export const HAS_JSONB = String.raw`row::text !~ '\\u(0000|[dD][89abcdefABCDEF])'`;

/** The opposite: the condition of the `*_unparsable` indexes (migration 8), which find such rows without a scan. */
export const UNPARSABLE = String.raw`row::text ~ '\\u(0000|[dD][89abcdefABCDEF])'`;

/**
 * A row as PostgreSQL can take it apart: a row without such an escape as it
 * is; in one with, each `\u0000` or surrogate escape (one not itself
 * escaped: an even run of backslashes before it) becomes `\ufffd`. Stored
 * text is `JSON.stringify`'s, which escapes only lone surrogates, so no
 * valid pair is touched. Conditions and sorts over a window holding such a
 * row read this instead of `row` (never the rows they return): PostgreSQL
 * compares U+FFFD where memory and SQLite compare U+0000 or the lone
 * surrogate, the one place the stores may answer differently, instead of
 * failing.
 */
export const SANE_ROW = String.raw`(CASE WHEN ${UNPARSABLE} THEN regexp_replace(row::text, '(?<!\\)((?:\\\\)*)\\u(0000|[dD][89abcdefABCDEF][0-9a-fA-F]{2})', '\1\\ufffd', 'g')::json ELSE row END)`;

/**
 * Row queries on PostgreSQL, over a row's `json` column: a column is
 * `doc -> name` (SQL NULL when absent), its kind `json_typeof`; JSON
 * equality is jsonb equality of that value (key order and number spelling
 * aside, as `jsonEquals`); numbers compare as float8 (stored numbers are
 * JavaScript's doubles), text under `COLLATE "C"` (code point order, as
 * the other stores). Every value is a bound parameter; the column name too.
 *
 * Columns in `indexed` (declared ones, see `syncRowIndexes`) are read
 * through their sort terms (`sortTermsSql`), the expressions of their
 * partial indexes, with the name inlined as a literal (the planner matches
 * an index expression only to the same expression), so lookups, ranges,
 * sorts and cursors on them are index scans. Such a read MUST also hold
 * `HAS_JSONB` (the indexes' condition), which the caller adds once it knows
 * the window holds no row PostgreSQL cannot take apart.
 *
 * PostgreSQL text cannot hold U+0000, and no row a query can read holds it:
 * an operand with one matches what it would match among such rows (`eq`
 * nothing, `gt "a\u0000…"` what `gt "a"` does), without sending it.
 */
export function postgresRowDialect(
  doc: string,
  position: string,
  options: {
    indexed?: ReadonlySet<string>;
    /** Where a column's `json` value is read instead of `doc -> name` (the aggregates' typed copy; never indexed). */
    member?: (name: string) => Sql;
  } = {},
): PostgresRowDialect {
  const column = raw(doc);
  const indexed = options.indexed ?? NO_COLUMNS;
  const own = options.member;
  const member = (name: string): Sql => (own ? own(name) : sql`(${column} -> ${name}::text)`);
  const textOf = (name: string): Sql => (own ? sql`(${own(name)} #>> '{}')` : sql`(${column} ->> ${name}::text)`);
  const kindOf = (name: string): Sql => sql`json_typeof(${member(name)})`;
  const terms = (name: string) => sortTermsSql(doc, name);

  const nullish = (name: string) =>
    indexed.has(name) ? sql`${raw(terms(name).rank)} = 4` : sql`coalesce(${kindOf(name)}, 'null') = 'null'`;
  const present = (name: string) =>
    indexed.has(name) ? sql`${raw(terms(name).rank)} < 4` : sql`coalesce(${kindOf(name)}, 'null') <> 'null'`;
  const numberOf = (name: string) => sql`(CASE WHEN ${kindOf(name)} = 'number' THEN ${textOf(name)}::float8 END)`;

  /** Rank and text equal (a string, a boolean): the index's n term is 0 for them. */
  const textTerm = (name: string, rank: number, op: string, value: Sql): Sql => {
    const t = terms(name);
    return sql`(${raw(t.rank)} = ${raw(String(rank))} AND ${raw(t.num)} = 0 AND ${raw(t.text)} ${raw(op)} ${value})`;
  };

  const equals = (name: string, value: unknown): Sql => {
    if (value === null) return nullish(name);
    if (hasNul(value)) return FALSE;
    if (indexed.has(name)) {
      const t = terms(name);
      if (typeof value === "number") return sql`(${raw(t.rank)} = 0 AND ${raw(t.num)} = ${value}::float8)`;
      if (typeof value === "string") return textTerm(name, 1, "=", sql`${value}::text`);
      if (typeof value === "boolean") return textTerm(name, 2, "=", raw(`'${value}'`));
      return sql`(${raw(t.rank)} = 3 AND coalesce((${raw(memberSql(doc, name))})::jsonb = ${JSON.stringify(value)}::jsonb, false))`;
    }
    return sql`(${member(name)})::jsonb = ${JSON.stringify(value)}::jsonb`;
  };

  /** One of the non-null `values` (SQL NULL, i.e. no match, when the column is absent). */
  const oneOf = (name: string, values: readonly unknown[]): Sql => {
    const kinds = splitByKind(values.filter((v) => !hasNul(v)));
    if (indexed.has(name)) {
      const t = terms(name);
      const parts: Sql[] = [];
      if (kinds.numbers.length > 0)
        parts.push(sql`(${raw(t.rank)} = 0 AND ${raw(t.num)} = any(${kinds.numbers}::float8[]))`);
      if (kinds.strings.length > 0) parts.push(textTerm(name, 1, "= any", sql`(${kinds.strings}::text[])`));
      if (kinds.booleans.length > 0)
        parts.push(textTerm(name, 2, "= any", sql`(${kinds.booleans.map(String)}::text[])`));
      if (kinds.structures.length > 0) {
        const texts = kinds.structures.map((v) => JSON.stringify(v));
        parts.push(
          sql`(${raw(t.rank)} = 3 AND coalesce((${raw(memberSql(doc, name))})::jsonb = any(${texts}::jsonb[]), false))`,
        );
      }
      return parts.length === 0 ? FALSE : sql`(${join(parts, " OR ")})`;
    }
    const texts = [...kinds.strings, ...kinds.numbers, ...kinds.booleans, ...kinds.structures].map((v) =>
      JSON.stringify(v),
    );
    return texts.length === 0 ? FALSE : sql`coalesce((${member(name)})::jsonb = any(${texts}::jsonb[]), false)`;
  };

  const compare = (name: string, op: "<" | "<=" | ">" | ">=", operand: number | string): Sql => {
    let bound = operand;
    let cmp: string = op;
    if (typeof operand === "string" && operand.includes("\u0000")) {
      // No stored string holds U+0000: above "p\u0000…" is above p, below it is at most p.
      bound = operand.slice(0, operand.indexOf("\u0000"));
      cmp = op === ">" || op === ">=" ? ">" : "<=";
    }
    if (indexed.has(name)) {
      const t = terms(name);
      if (typeof bound === "number") return sql`(${raw(t.rank)} = 0 AND ${raw(t.num)} ${raw(cmp)} ${bound}::float8)`;
      return textTerm(name, 1, cmp, sql`${bound}::text`);
    }
    return typeof bound === "number"
      ? sql`${numberOf(name)} ${raw(cmp)} ${bound}::float8`
      : sql`(${kindOf(name)} = 'string' AND ${textOf(name)} COLLATE "C" ${raw(cmp)} ${bound}::text)`;
  };

  const startsWith = (name: string, operand: string): Sql => {
    if (operand.includes("\u0000")) return FALSE;
    if (!indexed.has(name)) return sql`(${kindOf(name)} = 'string' AND starts_with(${textOf(name)}, ${operand}::text))`;
    const end = prefixEnd(operand);
    const t = terms(name);
    return end === null
      ? sql`(${textTerm(name, 1, ">=", sql`${operand}::text`)} AND starts_with(${raw(t.text)}, ${operand}::text))`
      : sql`(${textTerm(name, 1, ">=", sql`${operand}::text`)} AND ${raw(t.text)} < ${end}::text)`;
  };

  return {
    test: (test: RowTest) =>
      operatorSql(test, {
        equals,
        differs: (name, value) => sql`(${present(name)} AND NOT coalesce(${equals(name, value)}, false))`,
        present,
        nullish,
        oneOf,
        compare,
        contains: (name, operand) =>
          operand.includes("\u0000")
            ? FALSE
            : sql`(${kindOf(name)} = 'string' AND strpos(${textOf(name)}, ${operand}::text) > 0)`,
        startsWith,
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
    indexed,
    indexedOrder: (sort) => {
      const only = sort.length === 1 ? sort[0]! : null;
      if (!only || !indexed.has(only.column)) return null;
      const t = terms(only.column);
      const pos = raw(position);
      if (!only.descending) {
        return {
          order: sql`${raw(t.rank)}, ${raw(t.num)}, ${raw(t.text)}, ${pos}`,
          after: (key) => {
            const k = sortTerms(key.values[0] ?? null);
            return sql`(${raw(t.rank)}, ${raw(t.num)}, ${raw(t.text)}, ${pos}) > (${k.rank}::int, ${k.num ?? 0}::float8, ${k.text ?? ""}::text, ${key.position}::bigint)`;
          },
        };
      }
      return {
        order: sql`${raw(t.descRank)} DESC, ${raw(t.num)} DESC, ${raw(t.text)} DESC, (-${pos}) DESC`,
        after: (key) => {
          const k = sortTerms(key.values[0] ?? null);
          const rank = k.rank === RANK.null ? -1 : k.rank;
          return sql`(${raw(t.descRank)}, ${raw(t.num)}, ${raw(t.text)}, (-${pos})) < (${rank}::int, ${k.num ?? 0}::float8, ${k.text ?? ""}::text, ${-key.position}::bigint)`;
        },
      };
    },
  };
}

export interface PostgresRowDialect extends SqlDialect {
  indexed: ReadonlySet<string>;
  /**
   * For a sort by one indexed column: the ORDER BY of its index (ascending,
   * or the descending one walked backwards) and the keyset predicate after
   * a key as one row comparison (an index condition). Null otherwise.
   */
  indexedOrder(sort: readonly SortKey[]): { order: Sql; after(key: RowKey): Sql } | null;
}

const NO_COLUMNS: ReadonlySet<string> = new Set();
const FALSE = raw("(1 = 0)");

/** Whether a JSON value holds U+0000 anywhere (a key or a string), which PostgreSQL text and jsonb cannot. */
export function hasNul(value: unknown): boolean {
  if (typeof value === "string") return value.includes("\u0000");
  if (value === null || typeof value !== "object") return false;
  if (Array.isArray(value)) return value.some(hasNul);
  return Object.keys(value).some((key) => key.includes("\u0000") || hasNul((value as Record<string, unknown>)[key]));
}

/** `doc -> 'name'` with the name as a literal. */
function memberSql(doc: string, name: string): string {
  return `(${doc} -> ${quoteLiteral(name)})`;
}

/**
 * The sort terms of a column as its indexes hold them, never NULL (so a
 * row comparison decides): `rank` (0 number, 1 string, 2 boolean, 3 array
 * or object, 4 null or absent), `descRank` (the same with null as -1, so
 * a backward walk puts nulls last), `num` (the number, else 0) and `text`
 * (the string, `true`/`false`, the JSON text of a structure; else ''), in
 * code point order. Ascending order is (rank, num, text, position);
 * descending is (descRank, num, text, -position) walked backwards.
 */
export function sortTermsSql(doc: string, name: string): { rank: string; descRank: string; num: string; text: string } {
  const member = memberSql(doc, name);
  const kind = `json_typeof(${member})`;
  const ranks = `WHEN 'number' THEN 0 WHEN 'string' THEN 1 WHEN 'boolean' THEN 2 WHEN 'array' THEN 3 WHEN 'object' THEN 3`;
  return {
    rank: `(CASE ${kind} ${ranks} ELSE 4 END)`,
    descRank: `(CASE ${kind} ${ranks} ELSE -1 END)`,
    num: `(CASE WHEN ${kind} = 'number' THEN (${doc} ->> ${quoteLiteral(name)})::float8 ELSE 0 END)`,
    text: `((CASE ${kind} WHEN 'string' THEN ${doc} ->> ${quoteLiteral(name)} WHEN 'boolean' THEN ${member}::text WHEN 'array' THEN ${member}::text WHEN 'object' THEN ${member}::text ELSE '' END) COLLATE "C")`,
  };
}

/** A column name an index can be made for: a SQL string literal can hold it (PostgreSQL text has no U+0000). */
export function indexableColumn(name: string): boolean {
  return (
    !name.includes("\u0000") && !/[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/.test(name)
  );
}

const TABLE_DIALECT = postgresRowDialect("row", "pos");
const SANE_TABLE_DIALECT = postgresRowDialect(SANE_ROW, "pos");

/**
 * A page of an input table's rows with `where`, `sort` or `after`: the count and the rows from one statement (one
 * snapshot).
 */
export async function queriedTableRows(db: Db, tableId: string, query: TableRowsQuery): Promise<TableRowsPage> {
  const { t } = db;
  const sort = query.sort ?? [];
  // Declared columns are indexed (row-indexes.ts) for the rows PostgreSQL can take apart; a table holding another is
  // read without.
  const [found] = await db.query<{ columns: Column[]; unparsable: boolean }>(
    `select columns, exists (select 1 from ${t("table_rows")} where table_id = $1 and ${UNPARSABLE}) as unparsable from ${t("input_tables")} where id = $1`,
    [tableId],
  );
  const indexed =
    found && !found.unparsable ? new Set(found.columns.map((c) => c.name).filter(indexableColumn)) : NO_COLUMNS;
  const dialect = found?.unparsable
    ? SANE_TABLE_DIALECT
    : indexed.size > 0
      ? postgresRowDialect("row", "pos", { indexed })
      : TABLE_DIALECT;
  const guard = indexed.size > 0 ? ` and ${HAS_JSONB}` : "";
  const params: unknown[] = [tableId];
  const condition = renderNumbered(query.where ? conditionSql(query.where, dialect) : TRUE, params) + guard;
  const indexedOrder = dialect.indexedOrder(sort);
  let after = "";
  if (query.after)
    after = ` and ${renderNumbered(indexedOrder ? indexedOrder.after(query.after) : afterSql(sort, query.after, dialect), params)}`;
  const order = sort.length > 0 ? renderNumbered(indexedOrder?.order ?? orderSql(sort, dialect), params) : "pos";
  const result = await db.query<{ n: string; pos: string | null; row: Row | null }>(
    `select c.n, p.pos, p.row from (${query.count === false ? "select -1 as n" : `select count(*) as n from ${t("table_rows")} where table_id = $1 and ${condition}`}) c
     left join lateral (
       select pos, row, row_number() over (order by ${order}) as ord from ${t("table_rows")} where table_id = $1 and ${condition}${after}
       order by ${order} offset $${params.push(Math.max(0, query.offset))} limit $${params.push(Math.max(0, query.limit))}
     ) p on true order by p.ord`,
    params,
  );
  const rows = result.filter((r) => r.pos !== null);
  const end = rows.at(-1);
  return {
    totalRows: num(result[0]?.n),
    rows: rows.map((r) => r.row as Row),
    lastKey: end ? keyOf(end.row as Row, Number(end.pos), sort) : null,
  };
}
