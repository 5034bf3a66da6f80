import type { Row } from "./model.js";
import { emptyRow } from "./rows.js";

/**
 * Stamps and merges of input-table rows, shared by every store. Rows are
 * built on null-prototype objects, so a column named `__proto__` or
 * `constructor` is an own data property and never a prototype.
 */

/**
 * Dataport's namespace: a name with ONE leading underscore (`_id`, `_note`).
 * Writes may not set these. Names with two (`__proto__`) are ordinary
 * columns, so a key like `__proto__` is plain data like any other.
 */
export function isReservedField(name: string): boolean {
  return name.startsWith("_") && !name.startsWith("__");
}

/** Epoch ms of an ISO 8601 timestamp, or null when it is not one. */
export function parseTimestamp(value: unknown): number | null {
  if (
    typeof value !== "string" ||
    !/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:?\d{2})?$/.test(value)
  )
    return null;
  const ms = Date.parse(value);
  return Number.isFinite(ms) ? ms : null;
}

/**
 * The `_updatedAt` of the next write to a row: the clock's `now`, or one
 * millisecond past the previous stamp when the clock has not moved past it,
 * so stamps strictly increase even for writes in the same millisecond.
 */
export function nextUpdatedAt(previous: string | null, now: number): string {
  const before = previous === null ? null : parseTimestamp(previous);
  return new Date(before === null ? now : Math.max(now, before + 1)).toISOString();
}

/** Whether a row's `_updatedAt` is a later instant than `expected` (the 409 condition). */
export function changedSince(row: Row, expected: string): boolean {
  const current = parseTimestamp(row._updatedAt);
  const wanted = parseTimestamp(expected);
  if (current === null || wanted === null) return current !== wanted;
  return current > wanted;
}

/** A new stored row: `_id`, the values in their order, then the two stamps. */
export function newRow(rowId: string, values: Row, stamp: string): Row {
  const row: Row = emptyRow();
  row._id = rowId;
  for (const key of Object.keys(values)) if (!isReservedField(key)) row[key] = values[key];
  row._createdAt = stamp;
  row._updatedAt = stamp;
  return row;
}

/** The row after a patch: existing columns kept, patched ones replaced or appended, `_updatedAt` restamped. */
export function patchedRow(row: Row, patch: Row, stamp: string): Row {
  const out: Row = emptyRow();
  for (const key of Object.keys(row)) out[key] = row[key];
  for (const key of Object.keys(patch)) if (!isReservedField(key)) out[key] = patch[key];
  out._updatedAt = stamp;
  return out;
}

/** A row's column values without the reserved fields (what validators see). */
export function rowValues(row: Row): Row {
  const out: Row = emptyRow();
  for (const key of Object.keys(row)) if (!isReservedField(key)) out[key] = row[key];
  return out;
}
