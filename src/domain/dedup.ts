import { sha256Hex } from "./crypto.js";
import type { HeaderReader } from "../base/headers.js";

/** Delivery headers that identify an event, most specific first. */
const DELIVERY_HEADERS = ["idempotency-key", "webhook-id", "svix-id", "x-github-delivery"];

/** Any `X-<vendor>-Delivery` header (`X-Gitea-Delivery`, `X-Bitbucket-Delivery`, …). */
const VENDOR_DELIVERY = /^x-[a-z0-9-]+-delivery$/;

/** Top-level payload fields that identify an event, in order. */
const EVENT_ID_FIELDS = ["id", "event_id"];

/** Keys longer than this are replaced by their SHA-256, so stores can index them. */
export const MAX_DEDUP_KEY_LENGTH = 200;

/**
 * The de-duplication key of a delivery, or null when nothing identifies it.
 * A delivery header wins over a payload field; header keys and payload keys
 * live in separate namespaces (`h:` / `b:`), and a payload id keeps its JSON
 * type (`1` and `"1"` differ). Only non-empty strings and finite numbers
 * count as payload ids. The result is at most MAX_DEDUP_KEY_LENGTH characters.
 * An id too long for that is kept as its hash in namespaces of their own
 * (`h#` / `b#`), so no short id, whatever it looks like, meets a hashed one.
 */
export function dedupKeyOf(headers: HeaderReader, payload: Record<string, unknown>): string | null {
  const header = deliveryHeader(headers);
  if (header !== null) return bounded(`h:${header}`);
  for (const field of EVENT_ID_FIELDS) {
    if (!Object.hasOwn(payload, field)) continue;
    const value = payload[field];
    if ((typeof value === "string" && value !== "") || (typeof value === "number" && Number.isFinite(value))) {
      return bounded(`b:${JSON.stringify(value)}`);
    }
  }
  return null;
}

function deliveryHeader(headers: HeaderReader): string | null {
  for (const name of DELIVERY_HEADERS) {
    const value = headers.get(name)?.trim();
    if (value) return value;
  }
  if (!headers.keys) return null;
  // keys() are lower-case (HeaderReader); most names fail the cheap suffix test before the pattern runs.
  for (const name of headers.keys()) {
    if (!name.endsWith("-delivery") || !VENDOR_DELIVERY.test(name)) continue;
    const value = headers.get(name)?.trim();
    if (value) return value;
  }
  return null;
}

/** `h:<id>` as it is when short enough, else `h#<sha256 of the whole key>` (`b:` likewise). */
function bounded(key: string): string {
  return key.length <= MAX_DEDUP_KEY_LENGTH ? key : `${key[0]}#${sha256Hex(key)}`;
}
