import { sha256Hex } from "./crypto.js";

/**
 * Where an audit-feed reader stands: the storage position of the last event
 * it was given (null: the start) and the `since` of its first read, which
 * keeps applying to every later page of the same feed.
 */
export interface FeedCursor {
  position: string | null;
  since: string | null;
}

const VERSION = 1;
const MAX_LENGTH = 512;
const CHECK_CHARS = 16;

/**
 * The cursor is base64url(JSON payload) + "." + a checksum of the payload.
 * The checksum is not a secret: a cursor grants nothing (every read is
 * scoped by the caller's credential), so it only has to turn an edited or
 * truncated cursor into a clear 400 instead of a silent jump in the feed.
 */
export function encodeCursor(cursor: FeedCursor): string {
  return sealCursor(AUDIT_SALT, { v: VERSION, p: cursor.position, s: cursor.since });
}

/**
 * Parse a cursor this module made; null when it is malformed, tampered
 * with, of another version, or names a position the store rejects.
 */
export function decodeCursor(text: string, isPosition: (position: string) => boolean): FeedCursor | null {
  const value = openCursor(AUDIT_SALT, text);
  if (value === null) return null;
  const { v, p, s } = value;
  if (v !== VERSION) return null;
  if (p !== null && (typeof p !== "string" || !isPosition(p))) return null;
  if (s !== null && (typeof s !== "string" || Number.isNaN(Date.parse(s)))) return null;
  return { position: p, since: s };
}

const AUDIT_SALT = `dataport.audit-cursor.v${VERSION}`;

/**
 * The sealed form every feed cursor shares (the audit feed's, the change
 * feeds'): base64url(JSON payload) + "." + a checksum of the payload under
 * the feed's `salt`, so one feed's cursor is not another's.
 */
export function sealCursor(salt: string, payload: Record<string, unknown>): string {
  const encoded = Buffer.from(JSON.stringify(payload)).toString("base64url");
  return `${encoded}.${checksum(salt, encoded)}`;
}

/** The payload of a cursor `sealCursor(salt, …)` made; null when malformed or tampered with. */
export function openCursor(salt: string, text: string): Record<string, unknown> | null {
  if (text.length > MAX_LENGTH) return null;
  const match = /^([A-Za-z0-9_-]+)\.([0-9a-f]+)$/.exec(text);
  if (!match || checksum(salt, match[1]!) !== match[2]) return null;
  let value: unknown;
  try {
    value = JSON.parse(Buffer.from(match[1]!, "base64url").toString("utf8"));
  } catch {
    return null;
  }
  if (value === null || typeof value !== "object" || Array.isArray(value)) return null;
  return value as Record<string, unknown>;
}

function checksum(salt: string, payload: string): string {
  return sha256Hex(`${salt}:${payload}`).slice(0, CHECK_CHARS);
}
