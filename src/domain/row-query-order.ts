import type { Row } from "./model.js";
import type { RowCondition, RowKey, RowTest, SortKey } from "./row-query-model.js";
import { jsonEquals } from "./rows.js";

/**
 * What a condition and an order mean, as plain functions over rows: the
 * memory store evaluates with them, and they are the reference the SQL
 * compilers (`src/sql/row-compiler.ts`) reproduce.
 */

/** A column's value; absent is null. */
export function valueOf(row: Row, column: string): unknown {
  return Object.hasOwn(row, column) ? (row[column] ?? null) : null;
}

/** Whether a row matches a condition. */
export function matchesWhere(row: Row, condition: RowCondition): boolean {
  switch (condition.kind) {
    case "all":
      return condition.of.every((c) => matchesWhere(row, c));
    case "any":
      return condition.of.some((c) => matchesWhere(row, c));
    case "test":
      return passes(valueOf(row, condition.column), condition);
  }
}

function passes(value: unknown, test: RowTest): boolean {
  switch (test.op) {
    case "eq":
      return jsonEquals(value, test.operand);
    case "ne":
      return value !== null && !jsonEquals(value, test.operand);
    case "gt":
    case "gte":
    case "lt":
    case "lte": {
      if (typeof value !== typeof test.operand) return false;
      const c =
        typeof value === "number"
          ? Math.sign(value - (test.operand as number))
          : compareCodePoints(value as string, test.operand as string);
      return test.op === "gt" ? c > 0 : test.op === "gte" ? c >= 0 : test.op === "lt" ? c < 0 : c <= 0;
    }
    case "in":
      return test.operand.some((v) => jsonEquals(value, v));
    case "nin":
      return value !== null && !test.operand.some((v) => jsonEquals(value, v));
    case "isNull":
      return (value === null) === test.operand;
    case "contains":
      return typeof value === "string" && value.includes(test.operand);
    case "startsWith":
      return typeof value === "string" && value.startsWith(test.operand);
  }
}

/** The JSON kinds in sort order; null and absent last (in both directions). */
export const RANK = { number: 0, string: 1, boolean: 2, structure: 3, null: 4 } as const;

/**
 * How a value sorts: by `rank` (its kind), then numbers by `num`, every
 * other kind by `text` in code point order (strings as they are, booleans
 * as `false`/`true`, objects and arrays as their JSON text).
 */
export interface SortTerms {
  rank: number;
  num: number | null;
  text: string | null;
}

export function sortTerms(value: unknown): SortTerms {
  if (value === null || value === undefined) return { rank: RANK.null, num: null, text: null };
  if (typeof value === "number") return { rank: RANK.number, num: value, text: null };
  if (typeof value === "string") return { rank: RANK.string, num: null, text: value };
  if (typeof value === "boolean") return { rank: RANK.boolean, num: null, text: String(value) };
  return { rank: RANK.structure, num: null, text: JSON.stringify(value) };
}

/** Two values of one sort column: nulls last whatever the direction. */
export function compareValues(a: unknown, b: unknown, descending: boolean): number {
  const x = sortTerms(a);
  const y = sortTerms(b);
  if (x.rank === RANK.null || y.rank === RANK.null)
    return (x.rank === RANK.null ? 1 : 0) - (y.rank === RANK.null ? 1 : 0);
  const c =
    x.rank - y.rank || (x.rank === RANK.number ? Math.sign(x.num! - y.num!) : compareCodePoints(x.text!, y.text!));
  return descending ? -c : c;
}

/** The order of a sorted read: the sort columns, then stored position ascending. */
export function compareKeys(a: RowKey, b: RowKey, sort: readonly SortKey[]): number {
  for (let i = 0; i < sort.length; i++) {
    const c = compareValues(a.values[i] ?? null, b.values[i] ?? null, sort[i]!.descending);
    if (c !== 0) return c;
  }
  return Math.sign(a.position - b.position);
}

/** A row's key in a read sorted by `sort`. */
export function keyOf(row: Row, position: number, sort: readonly SortKey[] | null | undefined): RowKey {
  return { values: (sort ?? []).map((k) => valueOf(row, k.column)), position };
}

/**
 * Strings by Unicode code point, as SQLite (BINARY) and PostgreSQL (`C`)
 * compare UTF-8 text. JavaScript's `<` compares UTF-16 code units, which
 * puts U+E000–U+FFFF after astral characters; mapping the units fixes that.
 */
export function compareCodePoints(a: string, b: string): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const x = a.charCodeAt(i);
    const y = b.charCodeAt(i);
    if (x !== y) return codeUnitOrder(x) - codeUnitOrder(y);
  }
  return a.length - b.length;
}

function codeUnitOrder(unit: number): number {
  return unit >= 0xe000 ? unit - 0x800 : unit >= 0xd800 ? unit + 0x2000 : unit;
}
