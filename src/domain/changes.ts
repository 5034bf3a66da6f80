import { openCursor, sealCursor } from "./cursor.js";
import type { Row } from "./model.js";

/**
 * One change of a dataset or input table (../shared/changes.md). `rowId` is
 * the row's `_id` (table rows, webhook rows), null for rows that have none
 * (uploads). `at` is when the change was stored, ISO 8601.
 */
export type Change =
  | { op: "insert"; rowId: string | null; row: Row; at: string }
  | { op: "update"; rowId: string; row: Row; at: string }
  | { op: "delete"; rowId: string; at: string }
  /** Retention removed every webhook row stored up to and including `upTo` (a `rowId`). */
  | { op: "trim"; upTo: string; at: string }
  /** The rows were replaced as a whole: re-read, then follow from that read's cursor. */
  | { op: "reset"; at: string };

export type ChangeOp = Change["op"];

/**
 * A change as the SQL stores keep it, one column each: `op`, `row_id` (a
 * trim's `upTo`), `row` (inserts and updates) and `stored_at` (epoch ms).
 */
export interface ChangeRecord {
  op: ChangeOp;
  rowId: string | null;
  row: Row | null;
  storedAt: number;
}

export function changeRecord(change: Change, storedAt: number): ChangeRecord {
  switch (change.op) {
    case "insert":
    case "update":
      return { op: change.op, rowId: change.rowId, row: change.row, storedAt };
    case "delete":
      return { op: "delete", rowId: change.rowId, row: null, storedAt };
    case "trim":
      return { op: "trim", rowId: change.upTo, row: null, storedAt };
    case "reset":
      return { op: "reset", rowId: null, row: null, storedAt };
  }
}

export function changeFromRecord({ op, rowId, row, storedAt }: ChangeRecord): Change {
  const at = new Date(storedAt).toISOString();
  switch (op) {
    case "insert":
      return { op, rowId, row: row ?? {}, at };
    case "update":
      return { op, rowId: rowId ?? "", row: row ?? {}, at };
    case "delete":
      return { op, rowId: rowId ?? "", at };
    case "trim":
      return { op, upTo: rowId ?? "", at };
    case "reset":
      return { op, at };
  }
}

/**
 * Where a change-feed reader stands: the feed (a dataset or table id; a
 * cursor of one feed is refused by another) and the position of the last
 * change it was given ("0": before the first). Sealed like the audit
 * feed's cursor (`cursor.ts`), under its own salt.
 */
export interface ChangeCursor {
  feedId: string;
  position: string;
}

const SALT = "dataport.change-cursor.v1";

export function encodeChangeCursor(cursor: ChangeCursor): string {
  return sealCursor(SALT, { f: cursor.feedId, p: cursor.position });
}

/** The cursor, or null when it is malformed, tampered with, or not a change cursor. */
export function decodeChangeCursor(text: string): ChangeCursor | null {
  const value = openCursor(SALT, text);
  if (value === null) return null;
  const { f, p } = value;
  if (typeof f !== "string" || f.length === 0 || typeof p !== "string" || !isChangePosition(p)) return null;
  return { feedId: f, position: p };
}

/** Whether `text` can be a change position: decimal, no sign or leading zero, a safe integer. */
export function isChangePosition(text: string): boolean {
  return /^(0|[1-9]\d{0,15})$/.test(text) && Number.isSafeInteger(Number(text));
}
