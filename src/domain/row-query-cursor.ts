import { LRUCache } from "lru-cache";
import { invalidParameter } from "../base/api-error.js";
import { sha256Hex } from "./crypto.js";
import type { RowKey } from "./row-query-model.js";
import { canonicalJson } from "./rows.js";

/**
 * Cursors of keyset paging: opaque to clients, base64url JSON inside. A
 * cursor holds the key of the last row returned (reads continue after it),
 * the number of matching rows before the next page (`metadata.offset`), and
 * a fingerprint of the dataset and query it was made for. Nothing in it is
 * secret; a forged one only selects another page of what its holder may read.
 */

export interface CursorState {
  /** Matching rows before the page the cursor asks for. */
  before: number;
  /** Continue after this row; null: from the first row. */
  after: RowKey | null;
}

/** The longest cursor accepted (a key holds at most 8 values; long strings make it long). */
const MAX_CURSOR_LENGTH = 64 * 1024;

/** What a cursor is bound to: the dataset or table, and the where/filters/sort it pages through. */
export function queryFingerprint(targetId: string, query: { where: unknown; filters: unknown; sort: unknown }): string {
  const plain = query.where == null && query.filters == null && query.sort == null;
  const known = plain ? plainFingerprints.get(targetId) : undefined;
  if (known !== undefined) return known;
  const fingerprint = sha256Hex(
    canonicalJson({
      id: targetId,
      where: query.where ?? null,
      filters: query.filters ?? null,
      sort: query.sort ?? null,
    }),
  ).slice(0, 24);
  if (plain) plainFingerprints.set(targetId, fingerprint);
  return fingerprint;
}

/**
 * Fingerprints of reads without conditions or sort (most reads), by target id: a hash and a canonical JSON each saved.
 */
const plainFingerprints = new LRUCache<string, string>({ max: 4096 });

export function encodeCursor(fingerprint: string, state: CursorState): string {
  const payload = {
    v: 1,
    q: fingerprint,
    n: state.before,
    k: state.after === null ? null : [state.after.values, state.after.position],
  };
  return Buffer.from(JSON.stringify(payload), "utf8").toString("base64url");
}

/**
 * A cursor sent back, checked against the query it comes with; 400
 * `invalid_parameter` (`details.parameter: "cursor"`) when it is malformed
 * or was made for another dataset or query.
 */
export function decodeCursor(text: string, fingerprint: string, sortColumns: number): CursorState {
  const malformed = () => invalidParameter("cursor", "cursor: malformed; send back a metadata.nextCursor unchanged");
  if (text.length === 0 || text.length > MAX_CURSOR_LENGTH || !/^[A-Za-z0-9_-]+$/.test(text)) throw malformed();
  let payload: unknown;
  try {
    payload = JSON.parse(Buffer.from(text, "base64url").toString("utf8"));
  } catch {
    throw malformed();
  }
  if (payload === null || typeof payload !== "object" || Array.isArray(payload)) throw malformed();
  const { v, q, n, k } = payload as Record<string, unknown>;
  if (v !== 1 || typeof q !== "string" || !Number.isSafeInteger(n) || (n as number) < 0) throw malformed();
  if (q !== fingerprint) {
    throw invalidParameter(
      "cursor",
      "cursor: made for another dataset or another where, filters or sort; keep them while paging",
    );
  }
  if (k === null) return { before: n as number, after: null };
  if (!Array.isArray(k) || k.length !== 2) throw malformed();
  const [values, position] = k as [unknown, unknown];
  if (
    !Array.isArray(values) ||
    values.length !== sortColumns ||
    !Number.isSafeInteger(position) ||
    !values.every(storable)
  )
    throw malformed();
  return { before: n as number, after: { values, position: position as number } };
}

/** Only what a stored row could hold: no NUL or unpaired surrogate anywhere (a store refuses those as parameters). */
function storable(value: unknown): boolean {
  if (typeof value === "string")
    return !/\u0000|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/.test(value);
  if (value === null || typeof value !== "object") return true;
  if (Array.isArray(value)) return value.every(storable);
  return Object.keys(value).every((key) => storable(key) && storable((value as Record<string, unknown>)[key]));
}
