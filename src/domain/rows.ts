import type { Row, TableRecord, DatasetRecord } from "./model.js";

/**
 * The prototype of every row built here: an empty, frozen object with no
 * prototype of its own. So a row has no inherited members (`row.constructor`
 * is undefined unless it is a column), and assigning `row["__proto__"]`
 * creates an ordinary own column — the accessor lives on Object.prototype,
 * which is not in the chain. Unlike `Object.create(null)`, whose objects V8
 * keeps in slow dictionary mode, rows built on a prototype stay fast objects.
 */
const ROW_PROTOTYPE: object = Object.freeze(Object.create(null));

/**
 * Rows are built by `new` rather than `Object.create`: V8 then sizes the
 * object for the columns rows of its kind usually have (slack tracking), so a
 * row is one object holding its values, not an object plus a separate
 * property array regrown as columns are added. Retained rows (a webhook
 * dataset keeps 10,000) cost the garbage collector less to copy.
 */
const RowObject = function RowObject() {} as unknown as new () => Row;
RowObject.prototype = ROW_PROTOTYPE as Row;

/** A new empty row, safe for any column name (see ROW_PROTOTYPE). */
export function emptyRow(): Row {
  return new RowObject();
}

/** JSON equality of a stored value and a filter value. */
export function jsonEquals(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (a === null || b === null || typeof a !== "object" || typeof b !== "object") return false;
  return canonicalJson(a) === canonicalJson(b);
}

/** JSON text with object keys sorted, for equality and fingerprints. */
export function canonicalJson(value: unknown): string {
  if (value === null || typeof value !== "object") return JSON.stringify(value) ?? "null";
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`;
  const keys = Object.keys(value).sort();
  return `{${keys.map((k) => `${JSON.stringify(k)}:${canonicalJson((value as Record<string, unknown>)[k])}`).join(",")}}`;
}

/** Whether a row matches every exact-match filter. */
export function matchesFilters(row: Row, filters: Record<string, unknown> | null): boolean {
  if (!filters) return true;
  for (const key of Object.keys(filters)) {
    const stored = Object.hasOwn(row, key) ? row[key] : null;
    if (!jsonEquals(stored, filters[key])) return false;
  }
  return true;
}

/**
 * The selected columns of a row, in order, missing ones as null. Built on a
 * null-prototype object: a column named `__proto__` is plain data.
 */
export function selectColumns(row: Row, columns: readonly string[] | null): Row {
  const out: Row = emptyRow();
  if (columns === null) {
    for (const key of Object.keys(row)) out[key] = row[key];
    return out;
  }
  for (const column of columns) out[column] = Object.hasOwn(row, column) ? row[column] : null;
  return out;
}

/** An input table seen as a dataset (type `input_table`). */
export function tableAsDataset(table: TableRecord): DatasetRecord {
  return {
    id: table.id,
    teamId: table.teamId,
    name: table.name,
    type: "input_table",
    connectionId: null,
    source: null,
    columns: table.columns,
    rowCount: table.rowCount,
    lastRefreshedAt: null,
    updatedAt: table.updatedAt,
  };
}
