import type { Column, ColumnType, Row } from "./model.js";

const DATE = /^\d{4}-\d{2}-\d{2}$/;
const DATETIME = /^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?$/;

/** The column type of one JSON value; null for null/undefined (no evidence). */
export function typeOfValue(value: unknown): ColumnType | null {
  if (value === null || value === undefined) return null;
  switch (typeof value) {
    case "number":
      return "number";
    case "boolean":
      return "boolean";
    case "string":
      // Most strings are not dates: only one that starts like `2026-` can be (skips two regex runs).
      if (value.length < 10 || value.charCodeAt(4) !== 45 /* - */) return "string";
      if (DATE.test(value)) return "date";
      return DATETIME.test(value) ? "datetime" : "string";
    default:
      return "json";
  }
}

/** The narrowest type that holds both (null = no evidence yet). */
export function widenType(a: ColumnType | null, b: ColumnType | null): ColumnType | null {
  if (a === null) return b;
  if (b === null || a === b) return a;
  if ((a === "date" && b === "datetime") || (a === "datetime" && b === "date")) return "datetime";
  if (a === "json" || b === "json") return "json";
  return "string";
}

/**
 * Whether the row would change columns whose types are `known` (name →
 * type): a new name or a widened type. Most deliveries of a known shape do
 * neither, so stores check this (without building the row's column list)
 * before calling `widenColumns`.
 */
export function rowChangesColumns(known: ReadonlyMap<string, ColumnType | null>, row: Row): boolean {
  for (const name of Object.keys(row)) {
    const type = known.get(name);
    if (type === undefined) return true;
    const value = row[name];
    // The usual answers without inferring: a row value is a string, number, boolean or null, and a
    // string column holds any of them (only an object would widen it, to json, and rows hold none).
    if (value === null || type === "json" || (type === "string" && typeof value !== "object") || type === typeof value)
      continue;
    if (widenType(type, typeOfValue(value)) !== type) return true;
  }
  return false;
}

/** Whether a value may be stored in a column of the declared type. null always may. */
export function valueFitsType(value: unknown, type: ColumnType | null): boolean {
  if (type === null || value === null) return true;
  const actual = typeOfValue(value);
  if (actual === type) return true;
  if (type === "string") return typeof value === "string";
  if (type === "datetime") return actual === "date";
  if (type === "json") return true;
  return false;
}

/** Columns of a set of rows, in first-seen order, types widened over every row. */
export function inferColumns(rows: Iterable<Row>): Column[] {
  const types = new Map<string, ColumnType | null>();
  for (const row of rows) {
    for (const key of Object.keys(row)) {
      types.set(key, widenType(types.get(key) ?? null, typeOfValue(row[key])));
    }
  }
  return [...types].map(([name, type]) => ({ name, type }));
}

/**
 * Whether `columns` hold every incoming column at the same position, with a
 * type that need not widen: what a delivery of a known shape brings, found
 * without building an index by name.
 */
function holdsAlready(columns: readonly Column[], incoming: readonly Column[]): boolean {
  if (incoming.length > columns.length) return false;
  for (let i = 0; i < incoming.length; i++) {
    const known = columns[i]!;
    const next = incoming[i]!;
    if (known.name !== next.name || widenType(known.type, next.type) !== known.type) return false;
  }
  return true;
}

/** Most columns a dataset's inferred schema holds; later names still land in rows, not in the schema. */
export const MAX_DATASET_COLUMNS = 1000;

/**
 * `incoming` merged into `columns` (existing first, new names appended,
 * types widened), for schemas that grow on every write (webhook datasets):
 * null when `incoming` changes nothing (the common case costs no copy), and
 * never past `maxColumns` names.
 */
export function widenColumns(
  columns: readonly Column[],
  incoming: readonly Column[],
  maxColumns = MAX_DATASET_COLUMNS,
): Column[] | null {
  if (holdsAlready(columns, incoming)) return null;
  let index: Map<string, number> | null = null;
  let out: Column[] | null = null;
  for (const col of incoming) {
    index ??= new Map(columns.map((c, i) => [c.name, i] as const));
    const i = index.get(col.name);
    if (i === undefined) {
      if ((out ?? columns).length >= maxColumns) continue;
      out ??= columns.map((c) => ({ ...c }));
      index.set(col.name, out.length);
      out.push({ name: col.name, type: col.type });
      continue;
    }
    const existing = (out ?? columns)[i]!;
    const widened = widenType(existing.type, col.type);
    if (widened === existing.type) continue;
    out ??= columns.map((c) => ({ ...c }));
    out[i]!.type = widened;
  }
  return out;
}
