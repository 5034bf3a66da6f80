import { hmacSha256, safeEqual } from "./crypto.js";
import type { HeaderReader } from "../base/headers.js";

/** Standard Webhooks: a signed timestamp older or newer than this is a replay. */
export const SIGNATURE_TOLERANCE_SECONDS = 5 * 60;

const HEX_SHA256 = /^[0-9a-fA-F]{64}$/;
const BASE64 = /^[A-Za-z0-9+/]+={0,2}$/;
const TIMESTAMP = /^\d{1,15}$/;

/**
 * Whether a webhook request is signed with `secret`. Accepted schemes (any
 * one valid signature is enough):
 *
 * - hex HMAC-SHA256 of the raw body keyed with the secret's UTF-8 bytes, in
 *   `X-Webhook-Signature` or `X-Hub-Signature-256` (GitHub), optionally
 *   prefixed `sha256=`;
 * - Standard Webhooks (and Svix, its origin): `webhook-id`,
 *   `webhook-timestamp` (Unix seconds, within five minutes of `nowMs`) and
 *   `webhook-signature` holding space-separated `v1,<base64>` entries, each
 *   an HMAC-SHA256 of `{id}.{timestamp}.{body}`. A `whsec_` secret is the
 *   base64 key after the prefix; any other secret is keyed by its UTF-8 bytes.
 *
 * Comparisons are constant-time. Never throws, whatever the headers hold.
 */
export function verifyWebhookSignature(input: { secret: string; body: Uint8Array; headers: HeaderReader; nowMs: number }): boolean {
  const { secret, body, headers } = input;
  try {
    const hexCandidates = [headers.get("x-webhook-signature"), headers.get("x-hub-signature-256")];
    if (hexCandidates.some((h) => h !== null) && hexSignatureMatches(secret, body, hexCandidates)) return true;
    for (const vendor of ["webhook", "svix"] as const) {
      const signature = headers.get(`${vendor}-signature`);
      if (signature === null) continue;
      const id = headers.get(`${vendor}-id`);
      const timestamp = headers.get(`${vendor}-timestamp`);
      if (standardSignatureMatches({ secret, body, id, timestamp, signature, nowMs: input.nowMs })) return true;
    }
    return false;
  } catch {
    return false;
  }
}

function hexSignatureMatches(secret: string, body: Uint8Array, candidates: ReadonlyArray<string | null>): boolean {
  const expected = hmacSha256(secret, body);
  let matched = false;
  for (const candidate of candidates) {
    if (candidate === null) continue;
    const trimmed = candidate.trim();
    const hex = trimmed.slice(0, 7).toLowerCase() === "sha256=" ? trimmed.slice(7) : trimmed;
    // A malformed value still costs one comparison of the right length.
    const given = HEX_SHA256.test(hex) ? Buffer.from(hex, "hex") : Buffer.alloc(expected.length);
    if (safeEqual(given, expected) && HEX_SHA256.test(hex)) matched = true;
  }
  return matched;
}

/** The HMAC key of a Standard Webhooks secret. */
export function standardWebhooksKey(secret: string): Buffer {
  return secret.startsWith("whsec_") ? Buffer.from(secret.slice(6), "base64") : Buffer.from(secret, "utf8");
}

function standardSignatureMatches(input: {
  secret: string;
  body: Uint8Array;
  id: string | null;
  timestamp: string | null;
  signature: string;
  nowMs: number;
}): boolean {
  const { id, timestamp } = input;
  if (!id || !timestamp || !TIMESTAMP.test(timestamp)) return false;
  if (Math.abs(input.nowMs / 1000 - Number(timestamp)) > SIGNATURE_TOLERANCE_SECONDS) return false;
  const key = standardWebhooksKey(input.secret);
  if (key.length === 0) return false;
  const signed = Buffer.concat([Buffer.from(`${id}.${timestamp}.`, "utf8"), input.body]);
  const expected = hmacSha256(key, signed);
  let matched = false;
  for (const entry of input.signature.split(" ")) {
    const comma = entry.indexOf(",");
    if (comma < 0 || entry.slice(0, comma) !== "v1") continue;
    const value = entry.slice(comma + 1);
    const valid = BASE64.test(value);
    const given = valid ? Buffer.from(value, "base64") : Buffer.alloc(expected.length);
    if (safeEqual(given, expected) && valid) matched = true;
  }
  return matched;
}

/** The `X-Webhook-Signature` value a sender puts on `body`: `sha256=<hex>`. */
export function signHex(secret: string, body: Uint8Array | string): string {
  return `sha256=${hmacSha256(secret, body).toString("hex")}`;
}

/** The `webhook-signature` value (one `v1,<base64>` entry) a Standard Webhooks sender puts on `body`. */
export function signStandard(secret: string, id: string, timestamp: number, body: Uint8Array | string): string {
  const bytes = typeof body === "string" ? Buffer.from(body, "utf8") : body;
  const signed = Buffer.concat([Buffer.from(`${id}.${timestamp}.`, "utf8"), bytes]);
  return `v1,${hmacSha256(standardWebhooksKey(secret), signed).toString("base64")}`;
}
