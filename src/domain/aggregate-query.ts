import { ApiError, invalidParameter } from "../base/api-error.js";
import type { Row } from "./model.js";
import { MAX_SORT_COLUMNS, parseWhere, type RowCondition, type SortKey } from "./row-query-model.js";
import { TIME_UNITS, type TimeUnit } from "./time-buckets.js";

/**
 * Aggregates (../shared/aggregates.md) parsed and validated once into this
 * model, which extends the row-query model: `where` and `filters` are one
 * row condition (`row-query-model.ts`), `having` is the same grammar over the
 * answer's fields, and values order as row-query `sort` orders them. The
 * memory store evaluates it with `aggregate-eval.ts`; the SQL stores compile
 * it with `src/sql/aggregate-compiler.ts`.
 */

/** A group key: a column's value, or a time bucket of it. */
export interface GroupKey {
  /** The answer's field: the column, or `unit(column)`. */
  name: string;
  column: string;
  bucket: TimeUnit | null;
}

export type MetricFunction = "count" | "countDistinct" | "sum" | "avg" | "min" | "max";

/** A metric: `count` (rows; column null), or a function of one column. */
export type Metric =
  | { name: string; fn: "count"; column: string | null }
  | { name: string; fn: Exclude<MetricFunction, "count">; column: string };

export interface AggregateQuery {
  /** 0 to MAX_GROUP_KEYS keys; none: one group, the whole matching set. */
  groupBy: GroupKey[];
  /** 1 to MAX_METRICS metrics, in request order. */
  metrics: Metric[];
  /** The rows grouped: `where` and `filters` (as `eq` tests) together; null: every row. */
  where: RowCondition | null;
  /** The groups answered, over the answer's fields; null: every group. */
  having: RowCondition | null;
  /**
   * The groups' whole order: the requested sort, then every group key not
   * in it, ascending. Keys tell any two groups apart, so it is total.
   */
  order: SortKey[];
  /** Groups in the page (maxRows) and groups before it (offset). */
  limit: number;
  offset: number;
}

/** What an aggregate answers, on every store alike. */
export interface AggregateAnswer {
  /** The page of groups in order, each with the answer's fields (keys, then metrics) in request order. */
  groups: Row[];
  /** Rows that passed `where` and `filters`. */
  matchedRows: number;
  /** Groups that passed `having` (every page's). */
  totalGroups: number;
  /** Every metric over every matching row, `having` aside. */
  totals: Row;
}

/** The request's parameters: lists as written; `where`, `filters` and `having` already JSON-parsed. */
export interface AggregateParams {
  groupBy?: string;
  metrics?: string;
  where?: unknown;
  filters?: Record<string, unknown>;
  having?: unknown;
  sort?: string;
  maxRows?: number;
  offset?: number;
}

export const MAX_GROUP_KEYS = 4;
export const MAX_METRICS = 16;
export const MAX_AGGREGATE_SORT = MAX_SORT_COLUMNS;
export const DEFAULT_GROUPS = 1000;
export const MAX_GROUPS = 10_000;

export const METRIC_FUNCTIONS: readonly MetricFunction[] = ["count", "countDistinct", "sum", "avg", "min", "max"];

/**
 * The aggregate a request asks for, over a target whose columns are
 * `columns` (an input table adds `_id`, `_createdAt`, `_updatedAt`). Every
 * refusal is 400 `invalid_parameter` naming the parameter, the message
 * naming the part (`metrics[2]: unknown function "median"`); unknown
 * columns also in `details.unknownColumns`, fields `having` or `sort` name
 * that the answer lacks in `details.unknownFields`.
 */
export function parseAggregateQuery(params: AggregateParams, columns: ReadonlySet<string>): AggregateQuery {
  const groupBy = parseGroupBy(params.groupBy, columns);
  const metrics = parseMetrics(params.metrics, columns);
  refuseRepeatedNames(groupBy, metrics);
  const where = params.where === undefined ? null : parseWhere(params.where, columns);
  const filters = params.filters === undefined ? null : filtersCondition(params.filters, columns);
  const fields = new Set([...groupBy.map((k) => k.name), ...metrics.map((m) => m.name)]);
  const having = params.having === undefined ? null : parseHaving(params.having, fields);
  const sort = params.sort === undefined ? [] : parseGroupSort(params.sort, fields);
  const order = [
    ...sort,
    ...groupBy
      .filter((k) => !sort.some((s) => s.column === k.name))
      .map((k) => ({ column: k.name, descending: false })),
  ];
  return {
    groupBy,
    metrics,
    where: where && filters ? { kind: "all", of: [filters, where] } : (where ?? filters),
    having,
    order,
    limit: pageNumber("maxRows", params.maxRows, DEFAULT_GROUPS, MAX_GROUPS),
    offset: pageNumber("offset", params.offset, 0, Number.MAX_SAFE_INTEGER),
  };
}

/** An item of a list: `name` or `fn(argument)`, spaces around the parts removed. */
type Item = { kind: "name"; name: string } | { kind: "call"; fn: string; argument: string };

function parseItem(text: string): Item | null {
  const trimmed = text.trim();
  if (trimmed === "") return null;
  // By index, not by a regular expression: a long hostile list must not backtrack.
  const open = trimmed.indexOf("(");
  if (open < 0 || !trimmed.endsWith(")")) return { kind: "name", name: trimmed };
  const fn = trimmed.slice(0, open).trimEnd();
  if (fn.includes(")")) return { kind: "name", name: trimmed };
  const argument = trimmed.slice(open + 1, -1).trim();
  return fn === "" || argument === "" ? null : { kind: "call", fn, argument };
}

function parseGroupBy(text: string | undefined, columns: ReadonlySet<string>): GroupKey[] {
  if (text === undefined) return [];
  const items = text.split(",");
  if (items.length > MAX_GROUP_KEYS) throw invalidParameter("groupBy", `groupBy: at most ${MAX_GROUP_KEYS} keys`);
  const unknown: Array<{ at: string; column: string }> = [];
  const keys = items.map((raw, i): GroupKey => {
    const at = `groupBy[${i}]`;
    const item = parseItem(raw);
    if (item === null)
      throw invalidParameter("groupBy", `${at}: must be a column or a time bucket such as month(ordered_on)`);
    // A name that is a column is one, even if it looks like a call (a table without declared columns takes any).
    if (item.kind === "name" || (!isTimeUnit(item.fn) && columns.has(raw.trim()))) {
      const column = item.kind === "name" ? item.name : raw.trim();
      if (!columns.has(column)) unknown.push({ at, column });
      return { name: column, column, bucket: null };
    }
    if (!isTimeUnit(item.fn)) {
      throw invalidParameter(
        "groupBy",
        `${at}: unknown bucket ${JSON.stringify(item.fn)}; one of ${TIME_UNITS.join(", ")}`,
      );
    }
    if (!columns.has(item.argument)) unknown.push({ at, column: item.argument });
    return { name: `${item.fn}(${item.argument})`, column: item.argument, bucket: item.fn };
  });
  refuseUnknown("groupBy", unknown);
  return keys;
}

function parseMetrics(text: string | undefined, columns: ReadonlySet<string>): Metric[] {
  if (text === undefined) return [{ name: "count", fn: "count", column: null }];
  const items = text.split(",");
  if (items.length > MAX_METRICS) throw invalidParameter("metrics", `metrics: at most ${MAX_METRICS} metrics`);
  const unknown: Array<{ at: string; column: string }> = [];
  const metrics = items.map((raw, i): Metric => {
    const at = `metrics[${i}]`;
    const item = parseItem(raw);
    if (item === null)
      throw invalidParameter("metrics", `${at}: must be count or a function of a column, such as sum(amount)`);
    if (item.kind === "name") {
      if (item.name === "count") return { name: "count", fn: "count", column: null };
      throw invalidParameter("metrics", `${at}: ${JSON.stringify(item.name)} is not a metric; one of count, ${CALLS}`);
    }
    const fn = METRIC_FUNCTIONS.find((f) => f === item.fn);
    if (fn === undefined)
      throw invalidParameter("metrics", `${at}: unknown function ${JSON.stringify(item.fn)}; one of count, ${CALLS}`);
    if (!columns.has(item.argument)) unknown.push({ at, column: item.argument });
    return { name: `${fn}(${item.argument})`, fn, column: item.argument } as Metric;
  });
  refuseUnknown("metrics", unknown);
  return metrics;
}

const CALLS = METRIC_FUNCTIONS.map((f) => `${f}(c)`).join(", ");

function refuseUnknown(parameter: string, unknown: ReadonlyArray<{ at: string; column: string }>): void {
  if (unknown.length === 0) return;
  const unknownColumns = [...new Set(unknown.map((u) => u.column))];
  throw invalidParameter(parameter, `${unknown[0]!.at}: unknown column ${JSON.stringify(unknown[0]!.column)}`, {
    unknownColumns,
  });
}

/** Each field of the answer (keys, then metrics) is named once. */
function refuseRepeatedNames(groupBy: readonly GroupKey[], metrics: readonly Metric[]): void {
  const seen = new Set<string>();
  const named = [
    ...groupBy.map((k, i) => ({ parameter: "groupBy", at: `groupBy[${i}]`, name: k.name })),
    ...metrics.map((m, i) => ({ parameter: "metrics", at: `metrics[${i}]`, name: m.name })),
  ];
  for (const { parameter, at, name } of named) {
    if (seen.has(name))
      throw invalidParameter(
        parameter,
        `${at}: ${JSON.stringify(name)} is named twice; each field of the answer is named once`,
      );
    seen.add(name);
  }
}

/** `filters` as the row condition it means: JSON equality of each column (null: null or absent), all of them. */
function filtersCondition(filters: Record<string, unknown>, columns: ReadonlySet<string>): RowCondition {
  const names = Object.keys(filters);
  const unknownColumns = names.filter((c) => !columns.has(c));
  if (unknownColumns.length > 0)
    throw invalidParameter("filters", `unknown column ${unknownColumns[0]} in filters`, { unknownColumns });
  const tests = names.map((column): RowCondition => ({
    kind: "test",
    column,
    op: "eq",
    operand: filters[column] ?? null,
  }));
  return tests.length === 1 ? tests[0]! : { kind: "all", of: tests };
}

/** `having`: the `where` grammar over the answer's fields. */
function parseHaving(having: unknown, fields: ReadonlySet<string>): RowCondition {
  try {
    return parseWhere(having, fields, "having");
  } catch (error) {
    // parseWhere calls them columns; here they are fields the answer lacks.
    const unknown = error instanceof ApiError ? (error.details?.unknownColumns as string[] | undefined) : undefined;
    if (unknown === undefined) throw error;
    const path = String((error as ApiError).details?.path);
    throw invalidParameter(
      "having",
      `${path}: the answer has no field ${unknown[0]}; its fields are ${[...fields].join(", ")}`,
      {
        path,
        unknownFields: unknown,
      },
    );
  }
}

/** `sort`: answer fields, `-` for descending, each once, at most MAX_AGGREGATE_SORT. */
function parseGroupSort(text: string, fields: ReadonlySet<string>): SortKey[] {
  const items = text.split(",");
  if (items.length > MAX_AGGREGATE_SORT) throw invalidParameter("sort", `sort: at most ${MAX_AGGREGATE_SORT} fields`);
  return items.reduce<SortKey[]>((keys, raw, i) => {
    const at = `sort[${i}]`;
    const trimmed = raw.trim();
    const descending = trimmed.startsWith("-");
    const item = parseItem(descending ? trimmed.slice(1) : trimmed);
    if (item === null)
      throw invalidParameter("sort", `${at}: must be a field of the answer, - before it for descending`);
    const field = item.kind === "name" ? item.name : `${item.fn}(${item.argument})`;
    if (!fields.has(field)) {
      throw invalidParameter(
        "sort",
        `${at}: the answer has no field ${field}; its fields are ${[...fields].join(", ")}`,
        { unknownFields: [field] },
      );
    }
    if (keys.some((k) => k.column === field)) throw invalidParameter("sort", `${at}: ${field} is named twice`);
    return [...keys, { column: field, descending }];
  }, []);
}

function pageNumber(parameter: string, value: number | undefined, fallback: number, max: number): number {
  if (value === undefined) return fallback;
  if (!Number.isInteger(value) || value < 0 || value > max)
    throw invalidParameter(parameter, `${parameter}: must be an integer from 0 to ${max}`);
  return value;
}

function isTimeUnit(name: string): name is TimeUnit {
  return (TIME_UNITS as readonly string[]).includes(name);
}
