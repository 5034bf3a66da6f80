import type { RowCondition, RowKey, RowTest, SortKey } from "../domain/row-query-model.js";
import { RANK, sortTerms } from "../domain/row-query-order.js";
import { join, raw, type Sql, sql } from "./fragments.js";

/**
 * The compiler of a row query that the SQLite and PostgreSQL stores share
 * (in the manner of kysely's default query compiler): the shape of a
 * condition, an order and a keyset predicate, built the same way on every
 * store. A store supplies its dialect (how a column's kind and value are
 * read from its stored JSON), which says only where it differs.
 */

/** How a store reads a column of its stored JSON. */
export interface SqlDialect {
  /** The SQL of one operator test (matching exactly the rows `matchesWhere` matches). */
  test(test: RowTest): Sql;
  /** The column's kind as a RANK number (4 for null or absent). */
  rank(column: string): Sql;
  /** The column's value when it is a number, else NULL. */
  num(column: string): Sql;
  /** The column's sort text when it is a string, boolean, object or array (in code point order), else NULL. */
  text(column: string): Sql;
  /** Bound constants of each term's type. */
  rankValue(rank: number): Sql;
  numValue(value: number): Sql;
  textValue(value: string): Sql;
  /** The stored position of a row. */
  position: Sql;
  positionValue(position: number): Sql;
}

/** What a dialect says of one column, from which `operatorSql` builds every operator the same way on every store. */
export interface ColumnTests {
  /** JSON-equal to `value` (null: null or absent). */
  equals(column: string, value: unknown): Sql;
  /** Present, not null, and not JSON-equal to the non-null `value`. */
  differs(column: string, value: unknown): Sql;
  present(column: string): Sql;
  nullish(column: string): Sql;
  /** One of the non-null `values`. */
  oneOf(column: string, values: readonly unknown[]): Sql;
  compare(column: string, op: "<" | "<=" | ">" | ">=", operand: number | string): Sql;
  contains(column: string, operand: string): Sql;
  startsWith(column: string, operand: string): Sql;
}

const COMPARISONS = { gt: ">", gte: ">=", lt: "<", lte: "<=" } as const;

/** The SQL of one operator test, from a dialect's column tests (`SqlDialect.test`). */
export function operatorSql(test: RowTest, on: ColumnTests): Sql {
  const name = test.column;
  switch (test.op) {
    case "eq":
      return on.equals(name, test.operand);
    case "ne":
      return test.operand === null ? on.present(name) : on.differs(name, test.operand);
    case "gt":
    case "gte":
    case "lt":
    case "lte":
      return on.compare(name, COMPARISONS[test.op], test.operand);
    case "in":
      return test.operand.includes(null)
        ? sql`(${on.nullish(name)} OR ${on.oneOf(name, test.operand)})`
        : on.oneOf(name, test.operand);
    case "nin":
      return sql`(${on.present(name)} AND NOT ${on.oneOf(name, test.operand)})`;
    case "isNull":
      return test.operand ? on.nullish(name) : on.present(name);
    case "contains":
      return on.contains(name, test.operand);
    case "startsWith":
      return on.startsWith(name, test.operand);
  }
}

export const TRUE = raw("(1 = 1)");
const FALSE = raw("(1 = 0)");

/** A condition as SQL (true for an empty `all`). */
export function conditionSql(condition: RowCondition, dialect: SqlDialect): Sql {
  switch (condition.kind) {
    case "test":
      return dialect.test(condition);
    case "all":
      return condition.of.length === 0
        ? TRUE
        : sql`(${join(
            condition.of.map((c) => conditionSql(c, dialect)),
            " AND ",
          )})`;
    case "any":
      return sql`(${join(
        condition.of.map((c) => conditionSql(c, dialect)),
        " OR ",
      )})`;
  }
}

/** ORDER BY terms of a sorted read: per column kind, number, text; nulls last both ways; then position. */
export function orderSql(sort: readonly SortKey[], dialect: SqlDialect): Sql {
  const terms: Sql[] = [];
  for (const { column, descending } of sort) {
    if (descending) {
      terms.push(
        sql`(${dialect.rank(column)} = 4) ASC`,
        sql`${dialect.rank(column)} DESC`,
        sql`${dialect.num(column)} DESC`,
        sql`${dialect.text(column)} DESC`,
      );
    } else {
      terms.push(sql`${dialect.rank(column)} ASC`, sql`${dialect.num(column)} ASC`, sql`${dialect.text(column)} ASC`);
    }
  }
  terms.push(sql`${dialect.position} ASC`);
  return join(terms, ", ");
}

/**
 * Rows strictly after `key` in the order of `sort` (then position): the
 * keyset predicate of a cursor. Per column, "equal" and "after" are built
 * from the key value's kind, known here, so no NULL comparison decides.
 */
export function afterSql(sort: readonly SortKey[], key: RowKey, dialect: SqlDialect): Sql {
  const equal: Sql[] = [];
  const alternatives: Sql[] = [];
  sort.forEach(({ column, descending }, i) => {
    const terms = sortTerms(key.values[i] ?? null);
    const rank = dialect.rank(column);
    const sameRank = sql`${rank} = ${dialect.rankValue(terms.rank)}`;
    const value =
      terms.rank === RANK.number
        ? { column: dialect.num(column), key: dialect.numValue(terms.num!) }
        : terms.rank === RANK.null
          ? null
          : { column: dialect.text(column), key: dialect.textValue(terms.text!) };
    let after: Sql;
    if (value === null) after = FALSE;
    else if (!descending)
      after = sql`(${rank} > ${dialect.rankValue(terms.rank)} OR (${sameRank} AND ${value.column} > ${value.key}))`;
    else
      after = sql`(${rank} = 4 OR ${rank} < ${dialect.rankValue(terms.rank)} OR (${sameRank} AND ${value.column} < ${value.key}))`;
    alternatives.push(equal.length === 0 ? after : sql`(${join(equal, " AND ")} AND ${after})`);
    equal.push(value === null ? sameRank : sql`${sameRank} AND ${value.column} = ${value.key}`);
  });
  const later = sql`${dialect.position} > ${dialect.positionValue(key.position)}`;
  alternatives.push(equal.length === 0 ? later : sql`(${join(equal, " AND ")} AND ${later})`);
  return sql`(${join(alternatives, " OR ")})`;
}

/** The `in` list split by kind, as the SQL compilers test each kind differently. */
export function splitByKind(values: readonly unknown[]): {
  hasNull: boolean;
  strings: string[];
  numbers: number[];
  booleans: boolean[];
  structures: unknown[];
} {
  const out = {
    hasNull: false,
    strings: [] as string[],
    numbers: [] as number[],
    booleans: [] as boolean[],
    structures: [] as unknown[],
  };
  for (const value of values) {
    if (value === null) out.hasNull = true;
    else if (typeof value === "string") out.strings.push(value);
    else if (typeof value === "number") out.numbers.push(value);
    else if (typeof value === "boolean") out.booleans.push(value);
    else out.structures.push(value);
  }
  return out;
}
