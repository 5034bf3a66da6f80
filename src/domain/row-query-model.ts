import { invalidParameter } from "../base/api-error.js";

/**
 * Row queries beyond exact match (`where`, `sort`), parsed and validated
 * once into this model; each store compiles it (the memory store evaluates
 * it with `row-query-order.ts`, the SQL stores through `src/sql/row-compiler.ts`).
 * The meaning is that of ../shared/row-queries.md.
 */

export type RowOperator =
  "eq" | "ne" | "gt" | "gte" | "lt" | "lte" | "in" | "nin" | "isNull" | "contains" | "startsWith";

/** One operator applied to one column. Operands are checked: see `parseWhere`. */
export type RowTest =
  | { kind: "test"; column: string; op: "eq" | "ne"; operand: unknown }
  | { kind: "test"; column: string; op: "gt" | "gte" | "lt" | "lte"; operand: number | string }
  | { kind: "test"; column: string; op: "in" | "nin"; operand: unknown[] }
  | { kind: "test"; column: string; op: "isNull"; operand: boolean }
  | { kind: "test"; column: string; op: "contains" | "startsWith"; operand: string };

/** A condition tree: `all` of nothing matches every row. */
export type RowCondition = RowTest | { kind: "all"; of: RowCondition[] } | { kind: "any"; of: RowCondition[] };

/** One sort column; ties are broken by stored order, ascending. */
export interface SortKey {
  column: string;
  descending: boolean;
}

/**
 * Where a row sits in a read's order: the values of the sort columns (null
 * for an absent one) and its stored position. Reads continue after a key.
 */
export interface RowKey {
  values: unknown[];
  position: number;
}

/** `and`/`or` inside another adds a level; this many are accepted. */
export const MAX_WHERE_DEPTH = 4;
/** Operator tests in one `where`. */
export const MAX_WHERE_CONDITIONS = 100;
/** Values of one `in` / `nin` list. */
export const MAX_IN_VALUES = 1000;
/** Columns of one `sort`. */
export const MAX_SORT_COLUMNS = 8;

const OPERATORS: ReadonlySet<string> = new Set<RowOperator>([
  "eq",
  "ne",
  "gt",
  "gte",
  "lt",
  "lte",
  "in",
  "nin",
  "isNull",
  "contains",
  "startsWith",
]);

/**
 * The `where` parameter (already JSON-parsed) as a condition tree. Throws
 * 400 `invalid_parameter` (`details.parameter: "where"`, `details.path`: the
 * JSON path of the problem, as the message says) for a bare value, an
 * unknown operator, an operand of the wrong kind, nesting past
 * MAX_WHERE_DEPTH or more than MAX_WHERE_CONDITIONS tests; and with
 * `details.unknownColumns` for columns not in `columns`. `parameter` names
 * another parameter of the same grammar (an aggregate's `having`).
 */
export function parseWhere(where: unknown, columns: ReadonlySet<string>, parameter = "where"): RowCondition {
  const state: ParseState = { count: 0, unknown: [], firstUnknownPath: "", parameter };
  const condition = parseNode(where, parameter, 0, columns, state);
  if (state.unknown.length > 0) {
    throw invalidParameter(parameter, `${state.firstUnknownPath}: unknown column ${state.unknown[0]}`, {
      path: state.firstUnknownPath,
      unknownColumns: state.unknown,
    });
  }
  return condition;
}

interface ParseState {
  count: number;
  unknown: string[];
  firstUnknownPath: string;
  parameter: string;
}

function parseNode(
  value: unknown,
  path: string,
  depth: number,
  columns: ReadonlySet<string>,
  state: ParseState,
): RowCondition {
  const refuse: (at: string, problem: string) => never = (at, problem) => refuseAt(state.parameter, at, problem);
  if (!isObject(value)) refuse(path, 'must be a JSON object of column conditions, such as {"amount": {"gt": 100}}');
  const parts: RowCondition[] = [];
  for (const key of Object.keys(value)) {
    const member = value[key];
    if (key === "and" || key === "or") {
      const at = `${path}.${key}`;
      if (depth >= MAX_WHERE_DEPTH) refuse(at, `nests and/or more than ${MAX_WHERE_DEPTH} levels deep`);
      if (!Array.isArray(member) || member.length === 0) refuse(at, "must be a non-empty array of conditions");
      const of = member.map((item, i) => parseNode(item, `${at}[${i}]`, depth + 1, columns, state));
      parts.push({ kind: key === "and" ? "all" : "any", of });
      continue;
    }
    const at = path + memberPath(key);
    if (!isObject(member)) refuse(at, 'must be an operator object, such as {"eq": "EMEA"}');
    const ops = Object.keys(member);
    if (ops.length === 0) refuse(at, "must hold at least one operator");
    if (!columns.has(key) && !state.unknown.includes(key)) {
      if (state.unknown.length === 0) state.firstUnknownPath = at;
      state.unknown.push(key);
    }
    for (const op of ops) {
      if (!OPERATORS.has(op)) refuse(`${at}.${op}`, `unknown operator ${op}; one of ${[...OPERATORS].join(", ")}`);
      if (++state.count > MAX_WHERE_CONDITIONS) refuse(`${at}.${op}`, `more than ${MAX_WHERE_CONDITIONS} conditions`);
      parts.push(parseTest(key, op as RowOperator, member[op], `${at}.${op}`, refuse));
    }
  }
  return parts.length === 1 ? parts[0]! : { kind: "all", of: parts };
}

function parseTest(
  column: string,
  op: RowOperator,
  operand: unknown,
  path: string,
  refuse: (at: string, problem: string) => never,
): RowTest {
  switch (op) {
    case "eq":
    case "ne":
      return { kind: "test", column, op, operand };
    case "gt":
    case "gte":
    case "lt":
    case "lte":
      if (typeof operand !== "number" && typeof operand !== "string") refuse(path, "must be a number or a string");
      return { kind: "test", column, op, operand };
    case "in":
    case "nin":
      if (!Array.isArray(operand) || operand.length === 0 || operand.length > MAX_IN_VALUES) {
        refuse(path, `must be an array of 1 to ${MAX_IN_VALUES} JSON values`);
      }
      return { kind: "test", column, op, operand };
    case "isNull":
      if (typeof operand !== "boolean") refuse(path, "must be true or false");
      return { kind: "test", column, op, operand };
    case "contains":
    case "startsWith":
      if (typeof operand !== "string" || operand === "") refuse(path, "must be a non-empty string");
      return { kind: "test", column, op, operand };
  }
}

/**
 * The `sort` parameter: comma-separated column names, `-` for descending,
 * at most MAX_SORT_COLUMNS, each a column of `columns` and named once.
 */
export function parseSort(text: string, columns: ReadonlySet<string>): SortKey[] {
  const items = text.split(",");
  if (items.length > MAX_SORT_COLUMNS) throw invalidParameter("sort", `sort: at most ${MAX_SORT_COLUMNS} columns`);
  const keys: SortKey[] = [];
  for (const item of items) {
    const descending = item.startsWith("-");
    const column = descending ? item.slice(1) : item;
    if (column === "")
      throw invalidParameter(
        "sort",
        "sort: must be comma-separated column names, each optionally prefixed by - for descending",
      );
    if (!columns.has(column))
      throw invalidParameter("sort", `sort: unknown column ${column}`, { unknownColumns: [column] });
    if (keys.some((k) => k.column === column)) throw invalidParameter("sort", `sort: column ${column} is named twice`);
    keys.push({ column, descending });
  }
  return keys;
}

/** `.name`, or `["odd name"]` for a name that is not an identifier. */
function memberPath(key: string): string {
  return /^[A-Za-z_$][\w$]*$/.test(key) ? `.${key}` : `[${JSON.stringify(key)}]`;
}

function refuseAt(parameter: string, path: string, problem: string): never {
  throw invalidParameter(parameter, `${path}: ${problem}`, { path });
}

function isObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === "object" && !Array.isArray(value);
}
