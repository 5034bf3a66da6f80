import { createHmac } from "node:crypto";
import { hmacSha256, safeEqual } from "./crypto.js";
import type { SignatureScheme, WebhookSignature } from "./signature-schemes.js";
import type { HeaderReader } from "../base/headers.js";

/** A signed timestamp (Standard Webhooks, Stripe, Slack) further than this from the clock is refused as a replay. */
export const SIGNATURE_TOLERANCE_SECONDS = 5 * 60;

/** Why a delivery's signature is refused (what the 401's `details.reason` says, and the delivery log records). */
export type SignatureRefusal = "signature_missing" | "signature_invalid" | "timestamp_out_of_tolerance";

/** Which of the connection's secrets verified a delivery. */
export type VerifiedBy = "current" | "previous";

export type SignatureVerdict =
  { readonly ok: true; readonly verifiedBy: VerifiedBy } | { readonly ok: false; readonly reason: SignatureRefusal };

/** The secrets a delivery may be signed with: the current one, and the one a rotation with overlap replaced. */
export interface SigningSecrets {
  current: string;
  /** Accepted while the clock is before `validUntilMs`; null: none. */
  previous: { secret: string; validUntilMs: number } | null;
}

const VERIFIED: Record<VerifiedBy, SignatureVerdict> = {
  current: Object.freeze({ ok: true, verifiedBy: "current" }),
  previous: Object.freeze({ ok: true, verifiedBy: "previous" }),
};
const REFUSED: Record<SignatureRefusal, SignatureVerdict> = {
  signature_missing: Object.freeze({ ok: false, reason: "signature_missing" }),
  signature_invalid: Object.freeze({ ok: false, reason: "signature_invalid" }),
  timestamp_out_of_tolerance: Object.freeze({ ok: false, reason: "timestamp_out_of_tolerance" }),
};

/**
 * Whether a webhook request is signed with one of `secrets`, by the
 * connection's scheme (docs/webhooks.md, "Signing"; `auto` is every scheme
 * Dataport read before schemes could be named: hex HMAC in
 * `X-Webhook-Signature` or `X-Hub-Signature-256`, and Standard Webhooks or
 * Svix headers). Any one valid signature is enough.
 *
 * The refusal says what was wrong: no signature header of the scheme
 * (`signature_missing`); a signature made with the secret but over a
 * timestamp more than SIGNATURE_TOLERANCE_SECONDS from `nowMs`
 * (`timestamp_out_of_tolerance`); anything else — a wrong secret, a changed
 * body, a malformed value, a missing timestamp (`signature_invalid`).
 * Comparisons are constant-time; a malformed value still costs one. Never
 * throws, whatever the headers hold.
 */
export function verifySignature(input: {
  signature: WebhookSignature;
  secrets: SigningSecrets;
  body: Uint8Array;
  headers: HeaderReader;
  nowMs: number;
}): SignatureVerdict {
  const { secrets, body, nowMs } = input;
  try {
    const claims: Claim[] = [];
    if (!READERS[input.signature.scheme](input.headers, claims, input.signature)) return REFUSED.signature_missing;
    const current = check(claims, secrets.current, body, nowMs);
    if (current === "match") return VERIFIED.current;
    const { previous } = secrets;
    const before =
      previous !== null && nowMs < previous.validUntilMs ? check(claims, previous.secret, body, nowMs) : "mismatch";
    if (before === "match") return VERIFIED.previous;
    return current === "stale" || before === "stale" ? REFUSED.timestamp_out_of_tolerance : REFUSED.signature_invalid;
  } catch {
    return REFUSED.signature_invalid;
  }
}

/**
 * What a delivery claims: HMAC-SHA256 over `prefix` then the body, keyed by
 * the secret as `key` says, is one of `given` (null: a malformed entry).
 */
interface Claim {
  /** `utf8`: the secret's UTF-8 bytes; `standard`: a `whsec_` secret's base64 key (standardWebhooksKey). */
  key: "utf8" | "standard";
  prefix: string;
  given: Array<Buffer | null>;
  /** The signed timestamp in Unix seconds, checked against the tolerance; null for schemes without one. */
  timestamp: number | null;
}

/** Reads a scheme's headers into claims; false when the scheme's signature header is absent. */
type Reader = (headers: HeaderReader, claims: Claim[], signature: WebhookSignature) => boolean;

const HEX_SHA256 = /^[0-9a-fA-F]{64}$/;
const BASE64 = /^[A-Za-z0-9+/]+={0,2}$/;
const TIMESTAMP = /^\d{1,15}$/;

const hex = (value: string): Buffer | null => (HEX_SHA256.test(value) ? Buffer.from(value, "hex") : null);
const base64 = (value: string): Buffer | null => (BASE64.test(value) ? Buffer.from(value, "base64") : null);

/** `sha256=<hex>` or, unless `prefixed`, bare hex. */
function hexClaim(value: string, prefixed: boolean): Claim {
  const trimmed = value.trim();
  const hasPrefix = trimmed.slice(0, 7).toLowerCase() === "sha256=";
  const given = hasPrefix ? hex(trimmed.slice(7)) : prefixed ? null : hex(trimmed);
  return { key: "utf8", prefix: "", given: [given], timestamp: null };
}

function readHex(headers: HeaderReader, claims: Claim[], name: string, prefixed: boolean): boolean {
  const value = headers.get(name);
  if (value === null) return false;
  claims.push(hexClaim(value, prefixed));
  return true;
}

/** `{vendor}-id`, `{vendor}-timestamp`, `{vendor}-signature: v1,<base64> v1,<base64>…` over `id.timestamp.body`. */
function readStandard(headers: HeaderReader, claims: Claim[], vendor: "webhook" | "svix"): boolean {
  const signature = headers.get(`${vendor}-signature`);
  if (signature === null) return false;
  const id = headers.get(`${vendor}-id`);
  const timestamp = headers.get(`${vendor}-timestamp`);
  if (!id || timestamp === null || !TIMESTAMP.test(timestamp)) return true;
  const given: Array<Buffer | null> = [];
  for (const entry of signature.split(" ")) {
    const comma = entry.indexOf(",");
    if (comma >= 0 && entry.slice(0, comma) === "v1") given.push(base64(entry.slice(comma + 1)));
  }
  claims.push({ key: "standard", prefix: `${id}.${timestamp}.`, given, timestamp: Number(timestamp) });
  return true;
}

/** `Stripe-Signature: t=<unix seconds>,v1=<hex>[,v1=<hex>…]` over `t.body`, keyed by the whole `whsec_…` secret. */
function readStripe(headers: HeaderReader, claims: Claim[]): boolean {
  const header = headers.get("stripe-signature");
  if (header === null) return false;
  let timestamp: string | null = null;
  const given: Array<Buffer | null> = [];
  for (const item of header.split(",")) {
    const equals = item.indexOf("=");
    const name = item.slice(0, equals).trim();
    const value = item.slice(equals + 1).trim();
    if (name === "t" && timestamp === null) timestamp = value;
    else if (name === "v1") given.push(hex(value));
  }
  if (timestamp === null || !TIMESTAMP.test(timestamp)) return true;
  claims.push({ key: "utf8", prefix: `${timestamp}.`, given, timestamp: Number(timestamp) });
  return true;
}

/** `X-Slack-Signature: v0=<hex>` over `v0:{X-Slack-Request-Timestamp}:body`. */
function readSlack(headers: HeaderReader, claims: Claim[]): boolean {
  const signature = headers.get("x-slack-signature");
  if (signature === null) return false;
  const timestamp = headers.get("x-slack-request-timestamp");
  if (timestamp === null || !TIMESTAMP.test(timestamp.trim())) return true;
  const value = signature.trim();
  const given = value.startsWith("v0=") ? hex(value.slice(3)) : null;
  claims.push({ key: "utf8", prefix: `v0:${timestamp.trim()}:`, given: [given], timestamp: Number(timestamp.trim()) });
  return true;
}

const READERS: Record<SignatureScheme, Reader> = {
  auto(headers, claims) {
    // Every reader runs (no short-circuit): what is present decides "missing", and a valid one among several is enough.
    const found = [
      readHex(headers, claims, "x-webhook-signature", false),
      readHex(headers, claims, "x-hub-signature-256", false),
      readStandard(headers, claims, "webhook"),
      readStandard(headers, claims, "svix"),
    ];
    return found.includes(true);
  },
  "hmac-sha256-hex": (headers, claims, signature) =>
    readHex(headers, claims, signature.header?.toLowerCase() ?? "x-webhook-signature", false),
  github: (headers, claims) => readHex(headers, claims, "x-hub-signature-256", true),
  "standard-webhooks"(headers, claims) {
    const found = [readStandard(headers, claims, "webhook"), readStandard(headers, claims, "svix")];
    return found.includes(true);
  },
  stripe: readStripe,
  shopify(headers, claims) {
    const value = headers.get("x-shopify-hmac-sha256");
    if (value === null) return false;
    claims.push({ key: "utf8", prefix: "", given: [base64(value.trim())], timestamp: null });
    return true;
  },
  slack: readSlack,
};

/**
 * Whether a claim holds a signature made with `secret`: `match` (and within
 * the tolerance, if timestamped), `stale` (made with the secret, over a
 * timestamp outside it) or `mismatch`.
 */
function check(
  claims: readonly Claim[],
  secret: string,
  body: Uint8Array,
  nowMs: number,
): "match" | "stale" | "mismatch" {
  let outcome: "stale" | "mismatch" = "mismatch";
  for (const claim of claims) {
    const key = claim.key === "standard" ? standardWebhooksKey(secret) : secret;
    if (key.length === 0) continue;
    const expected = createHmac("sha256", key).update(claim.prefix).update(body).digest();
    let matched = false;
    for (const given of claim.given) {
      // A malformed value still costs one comparison of the right length.
      if (safeEqual(given ?? Buffer.alloc(expected.length), expected) && given !== null) matched = true;
    }
    if (!matched) continue;
    if (claim.timestamp === null || Math.abs(nowMs / 1000 - claim.timestamp) <= SIGNATURE_TOLERANCE_SECONDS)
      return "match";
    outcome = "stale";
  }
  return outcome;
}

/** The HMAC key of a Standard Webhooks secret: a `whsec_` secret's base64 key, any other secret's UTF-8 bytes. */
export function standardWebhooksKey(secret: string): Buffer {
  return secret.startsWith("whsec_") ? Buffer.from(secret.slice(6), "base64") : Buffer.from(secret, "utf8");
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
