import type { HeaderReader } from "../base/headers.js";
import type { VerifiedBy } from "./signatures.js";

/**
 * The delivery log of webhook-inbox.md: what each webhook endpoint received,
 * stored or not. The rules every store and the receiver share live here.
 */

export type DeliveryOutcome = "stored" | "duplicate" | "refused";
export const DELIVERY_OUTCOMES: readonly DeliveryOutcome[] = ["stored", "duplicate", "refused"];

/** Why a delivery was refused (webhook-inbox.md). */
export type RefusalReason =
  | "signature_missing"
  | "signature_invalid"
  | "timestamp_out_of_tolerance"
  | "rate_limited"
  | "body_too_large"
  | "unsupported_media_type"
  | "invalid_body"
  | "too_many_columns"
  | "storage_unavailable";

export const REFUSAL_REASONS: readonly RefusalReason[] = [
  "signature_missing",
  "signature_invalid",
  "timestamp_out_of_tolerance",
  "rate_limited",
  "body_too_large",
  "unsupported_media_type",
  "invalid_body",
  "too_many_columns",
  "storage_unavailable",
];

/** How long and how many deliveries an endpoint's log keeps, and how much of a refused body. */
export interface InboxBounds {
  /** The newest this many deliveries per endpoint (default 1,000). */
  size: number;
  /** None older than this many days (default 7). */
  days: number;
  /** Bytes of a refused body kept (default 256 KiB); the rest is cut (`bodyTruncated`). */
  bodyBytes: number;
}

export const DEFAULT_INBOX_BOUNDS: InboxBounds = { size: 1000, days: 7, bodyBytes: 256 * 1024 };

/**
 * What a store keeps of an endpoint's log, for a write or a read: the newest `size`, none received before `afterMs`.
 */
export interface InboxKeep {
  size: number;
  /** Epoch ms: entries received earlier are gone. */
  afterMs: number;
}

export function inboxKeep(bounds: Pick<InboxBounds, "size" | "days">, nowMs: number): InboxKeep {
  return { size: bounds.size, afterMs: nowMs - bounds.days * 86_400_000 };
}

/** What the receiver knows of a delivery besides its outcome: stored as one JSON document per entry. */
export interface DeliveryDetail {
  sourceIp: string | null;
  /** The de-duplication key used, if any. */
  deliveryKey: string | null;
  /** Request headers, lower-case names, credentials `[redacted]`. */
  headers: Record<string, string>;
  /** A refused delivery's raw body, up to the bound; null when none was kept. */
  body: string | null;
  /** How `body` is written: `utf8` text, or `base64` when the bytes are not UTF-8. */
  bodyEncoding: "utf8" | "base64" | null;
  /** Whether the body was cut at the bound (or not read at all: a body over the request limit). */
  bodyTruncated: boolean;
  /** The media type sent (what a replay parses the body as). */
  contentType: string | null;
  /** Which secret verified it, or null (unsigned endpoint, refused, replayed). */
  verifiedBy: VerifiedBy | null;
  /** Refusals before this one that the log counted but did not keep. */
  suppressed: number;
  /** The delivery this one replays, when it is a replay. */
  replayOf: string | null;
}

/**
 * One entry as the store holds it. `seq` orders an endpoint's entries (newest is highest); it is what cursors carry.
 */
export interface DeliveryLogEntry {
  seq: number;
  id: string;
  connectionId: string;
  receivedAt: string;
  outcome: DeliveryOutcome;
  reason: RefusalReason | null;
  status: number;
  rowId: string | null;
  detail: DeliveryDetail;
}

/**
 * A refusal to record (its outcome is `refused`), or the log part of a delivery handed to ingest (outcome decided
 * there).
 */
export interface DeliveryLogInput {
  id: string;
  connectionId: string;
  receivedAt: string;
  detail: DeliveryDetail;
}

export interface RefusalLogInput extends DeliveryLogInput {
  reason: RefusalReason;
  status: number;
}

/** A refusal as the log's entry, but for what a store numbers (`seq`) and keys it by (`connectionId`). */
export function refusalEntry(r: RefusalLogInput): Omit<DeliveryLogEntry, "seq" | "connectionId"> {
  return {
    id: r.id,
    receivedAt: r.receivedAt,
    outcome: "refused",
    reason: r.reason,
    status: r.status,
    rowId: null,
    detail: r.detail,
  };
}

/** A daily counter: `kind` is `stored`, `duplicate` or `refused:<reason>`. */
export interface DeliveryCount {
  connectionId: string;
  day: string;
  kind: string;
  n: number;
}

export const countKind = (outcome: DeliveryOutcome, reason: RefusalReason | null): string =>
  outcome === "refused" ? `refused:${reason ?? "invalid_body"}` : outcome;

/** Counts of the same connection, day and kind added up (a store writes each counter once per batch). */
export function sumCounts(counts: Iterable<DeliveryCount>): DeliveryCount[] {
  const out = new Map<string, DeliveryCount>();
  for (const c of counts) {
    const key = `${c.connectionId}\u0000${c.day}\u0000${c.kind}`;
    const found = out.get(key);
    if (found) found.n += c.n;
    else out.set(key, { ...c });
  }
  return [...out.values()];
}

const REDACTED_HEADERS = new Set(["authorization", "cookie", "proxy-authorization"]);
/** Names we can read without `keys()` (an adapter that cannot list headers): what senders sign and identify with. */
const KNOWN_HEADERS = [
  "content-type",
  "content-length",
  "user-agent",
  "x-webhook-signature",
  "x-hub-signature-256",
  "x-github-delivery",
  "x-github-event",
  "webhook-id",
  "webhook-timestamp",
  "webhook-signature",
  "svix-id",
  "svix-timestamp",
  "svix-signature",
  "stripe-signature",
  "x-shopify-hmac-sha256",
  "x-shopify-webhook-id",
  "x-slack-signature",
  "x-slack-request-timestamp",
  "authorization",
  "cookie",
  "proxy-authorization",
];

/**
 * The request headers as the log keeps them: every header, with `Authorization`, `Cookie` and `Proxy-Authorization`
 * values `[redacted]`.
 */
export function loggedHeaders(headers: HeaderReader): Record<string, string> {
  // A plain object (JSON.stringify's fast path, unlike a null-prototype one); `__proto__` is defined, never assigned.
  const out: Record<string, string> = {};
  const names = headers.keys ? headers.keys() : KNOWN_HEADERS;
  for (const name of names) {
    const value = headers.get(name);
    if (value === null) continue;
    const lower = name.toLowerCase();
    const kept = REDACTED_HEADERS.has(lower) ? "[redacted]" : value;
    if (lower === "__proto__")
      Object.defineProperty(out, lower, { value: kept, enumerable: true, writable: true, configurable: true });
    else out[lower] = kept;
  }
  return out;
}

const utf8 = new TextDecoder("utf-8", { fatal: true });

/** A refused body as the log keeps it: UTF-8 text when it is, base64 otherwise, at most `limit` bytes. */
export function loggedBody(
  bytes: Uint8Array | null,
  limit: number,
): Pick<DeliveryDetail, "body" | "bodyEncoding" | "bodyTruncated"> {
  if (bytes === null) return { body: null, bodyEncoding: null, bodyTruncated: true };
  const truncated = bytes.byteLength > limit;
  let kept = truncated ? bytes.subarray(0, limit) : bytes;
  try {
    return { body: utf8.decode(kept), bodyEncoding: "utf8", bodyTruncated: truncated };
  } catch {
    // Cut inside a character: drop the partial one and try again before falling back to base64.
    if (truncated) {
      for (let back = 1; back <= 3 && kept.byteLength > back; back++) {
        try {
          kept = bytes.subarray(0, limit - back);
          return { body: utf8.decode(kept), bodyEncoding: "utf8", bodyTruncated: true };
        } catch {
          // keep trying
        }
      }
      kept = bytes.subarray(0, limit);
    }
    return { body: Buffer.from(kept).toString("base64"), bodyEncoding: "base64", bodyTruncated: truncated };
  }
}

/** The kept body's bytes (for a replay), or null when none was kept. */
export function keptBodyBytes(detail: DeliveryDetail): Uint8Array | null {
  if (detail.body === null) return null;
  return detail.bodyEncoding === "base64"
    ? new Uint8Array(Buffer.from(detail.body, "base64"))
    : new TextEncoder().encode(detail.body);
}

/** A cursor over an endpoint's log, newest first: the `seq` of the last entry served. */
export function deliveryCursor(seq: number): string {
  return Buffer.from(`d:${seq}`, "utf8").toString("base64url");
}

/** The `seq` a cursor carries, or null when it is not one of ours. */
export function readDeliveryCursor(cursor: string): number | null {
  const text = Buffer.from(cursor, "base64url").toString("utf8");
  const match = /^d:(\d{1,15})$/.exec(text);
  return match ? Number(match[1]) : null;
}

/** The query of a log listing, as a store reads it. */
export interface DeliveryLogQuery {
  outcome?: DeliveryOutcome | undefined;
  reason?: RefusalReason | undefined;
  /** ISO instant: only entries received at or after it. */
  since?: string | undefined;
  /** ISO instant: only entries received before it. */
  until?: string | undefined;
  /** Only entries with a `seq` below this one (the cursor). */
  beforeSeq?: number | undefined;
  limit: number;
  /** `newest` first (listings) or `oldest` first (bulk replay). */
  order: "newest" | "oldest";
  keep: InboxKeep;
}

/** Whether a stored entry matches a query's filters (the memory store's rule; SQL stores say the same in WHERE). */
export function entryMatches(entry: DeliveryLogEntry, query: DeliveryLogQuery): boolean {
  if (query.outcome !== undefined && entry.outcome !== query.outcome) return false;
  if (query.reason !== undefined && entry.reason !== query.reason) return false;
  const ms = Date.parse(entry.receivedAt);
  if (ms < query.keep.afterMs) return false;
  if (query.since !== undefined && ms < Date.parse(query.since)) return false;
  if (query.until !== undefined && ms >= Date.parse(query.until)) return false;
  if (query.beforeSeq !== undefined && entry.seq >= query.beforeSeq) return false;
  return true;
}

/** A day's counts of one connection, as `/space/webhook-deliveries` serves them. */
export interface DeliveryDayRow {
  connection_id: string;
  connection: string;
  day: string;
  received: number;
  stored: number;
  duplicates: number;
  refused: number;
  refused_by_reason: Record<string, number>;
}

/**
 * Counters (`connection`, `day`, `kind`, `n`) folded into one row per connection and day: day descending, then
 * connection name and id.
 */
export function deliveryDayRows(
  counts: ReadonlyArray<{ connectionId: string; connection: string; day: string; kind: string; n: number }>,
): DeliveryDayRow[] {
  const rows = new Map<string, DeliveryDayRow>();
  for (const c of counts) {
    const key = `${c.day}\u0000${c.connectionId}`;
    let row = rows.get(key);
    if (!row) {
      row = {
        connection_id: c.connectionId,
        connection: c.connection,
        day: c.day,
        received: 0,
        stored: 0,
        duplicates: 0,
        refused: 0,
        refused_by_reason: {},
      };
      rows.set(key, row);
    }
    row.received += c.n;
    if (c.kind === "stored") row.stored += c.n;
    else if (c.kind === "duplicate") row.duplicates += c.n;
    else {
      row.refused += c.n;
      const reason = c.kind.startsWith("refused:") ? c.kind.slice(8) : c.kind;
      row.refused_by_reason[reason] = (row.refused_by_reason[reason] ?? 0) + c.n;
    }
  }
  return [...rows.values()].sort(
    (a, b) =>
      (a.day < b.day ? 1 : a.day > b.day ? -1 : 0) ||
      a.connection.localeCompare(b.connection) ||
      (a.connection_id < b.connection_id ? -1 : a.connection_id > b.connection_id ? 1 : 0),
  );
}

/**
 * A detail as the SQL stores write it: the fields that differ from their
 * usual value only (most deliveries carry no body, no suppressed count, no
 * replay), and no `contentType` when the headers say the same. What each
 * delivery adds to the store's writes stays small.
 */
export function detailText(detail: DeliveryDetail): string {
  let text = `{"sourceIp":${detail.sourceIp === null ? "null" : JSON.stringify(detail.sourceIp)},"headers":${JSON.stringify(detail.headers)}`;
  if (detail.deliveryKey !== null) text += `,"deliveryKey":${JSON.stringify(detail.deliveryKey)}`;
  if (detail.body !== null)
    text += `,"body":${JSON.stringify(detail.body)},"bodyEncoding":${JSON.stringify(detail.bodyEncoding)}`;
  if (detail.bodyTruncated) text += `,"bodyTruncated":true`;
  if (detail.contentType !== (detail.headers["content-type"] ?? null))
    text += `,"contentType":${JSON.stringify(detail.contentType)}`;
  if (detail.verifiedBy !== null) text += `,"verifiedBy":"${detail.verifiedBy}"`;
  if (detail.suppressed !== 0) text += `,"suppressed":${detail.suppressed}`;
  if (detail.replayOf !== null) text += `,"replayOf":${JSON.stringify(detail.replayOf)}`;
  return `${text}}`;
}

/** A detail from what `detailText` wrote (parsed), every field back. */
export function detailFrom(stored: Partial<DeliveryDetail> & { headers: Record<string, string> }): DeliveryDetail {
  return {
    sourceIp: stored.sourceIp ?? null,
    deliveryKey: stored.deliveryKey ?? null,
    headers: stored.headers,
    body: stored.body ?? null,
    bodyEncoding: stored.bodyEncoding ?? null,
    bodyTruncated: stored.bodyTruncated ?? false,
    contentType:
      stored.contentType !== undefined
        ? stored.contentType
        : Object.hasOwn(stored.headers, "content-type")
          ? stored.headers["content-type"]!
          : null,
    verifiedBy: stored.verifiedBy ?? null,
    suppressed: stored.suppressed ?? 0,
    replayOf: stored.replayOf ?? null,
  };
}
