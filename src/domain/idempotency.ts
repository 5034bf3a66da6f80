import { sha256Hex } from "./crypto.js";
import { canonicalJson } from "./rows.js";

/** How long a key is kept (by the clock): Stripe's 24 hours. */
export const IDEMPOTENCY_TTL_MS = 24 * 60 * 60 * 1000;

/**
 * A key recorded without an answer — a claim of an earlier version of the
 * stores, which claimed a key before writing — may be taken over by a retry
 * once this old (its request crashed or hung). Keys are now recorded with
 * their answer, in the write's transaction.
 */
export const IDEMPOTENCY_LEASE_MS = 60 * 1000;

/** Longest accepted `Idempotency-Key`, in characters. */
export const MAX_IDEMPOTENCY_KEY_LENGTH = 255;

/** Keys are scoped to the credential and the table: two keys or two tables never share a claim. */
export function idempotencyScope(credential: { kind: string; id: string }, tableId: string): string {
  return JSON.stringify([credential.kind, credential.id, "table", tableId]);
}

/** What "the same request" means: the same body, whatever the key order. */
export function requestFingerprint(body: unknown): string {
  return sha256Hex(canonicalJson(body));
}
