import { createHmac, hash, randomBytes, randomFillSync, timingSafeEqual } from "node:crypto";
import { v7 as uuidv7 } from "uuid";

/** Hex SHA-256 of a UTF-8 string: how tokens are stored and looked up. */
export function sha256Hex(value: string): string {
  // One-shot hash: no Hash object per call (this runs on every authenticated request).
  return hash("sha256", value, "hex");
}

/** HMAC-SHA256 of raw bytes. */
export function hmacSha256(secret: string | Uint8Array, data: Uint8Array | string): Buffer {
  return createHmac("sha256", secret).update(data).digest();
}

/**
 * Constant-time equality of two byte strings. Never throws: inputs of
 * different lengths compare false after a comparison of equal cost.
 */
export function safeEqual(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) {
    timingSafeEqual(a, a);
    return false;
  }
  return timingSafeEqual(a, b);
}

/**
 * Random bytes for event ids, drawn from a pool refilled 256 ids at a time (one call into the OS per pool, not per id).
 */
const idPool = new Uint8Array(16 * 256);
let idPoolAt = idPool.length;
function pooledRandom16(): Uint8Array {
  if (idPoolAt === idPool.length) {
    randomFillSync(idPool);
    idPoolAt = 0;
  }
  idPoolAt += 16;
  return idPool.subarray(idPoolAt - 16, idPoolAt);
}

/**
 * An audit event id: `evt_` and a UUIDv7 (RFC 9562: the time in ms first,
 * then 74 random bits), so ids made one after another sort together and a
 * store's unique index on them grows at its end rather than at random
 * pages (half the cost of a recorded read on SQLite).
 */
export function eventId(): string {
  return `evt_${uuidv7({ rng: pooledRandom16 })}`;
}

/** A random id: prefix + 20 base62 characters (~119 bits). */
export function randomId(prefix: string, length = 20): string {
  return prefix + base62(randomBytes(length * 2), length);
}

const ALPHABET = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/** Unbiased base62 from random bytes (rejection sampling on values >= 248). */
export function base62(bytes: Uint8Array, length: number): string {
  let out = "";
  let i = 0;
  while (out.length < length) {
    if (i >= bytes.length) {
      bytes = randomBytes(length * 2);
      i = 0;
    }
    const b = bytes[i++]!;
    if (b < 248) out += ALPHABET[b % 62];
  }
  return out;
}

/**
 * Unique ids without drawing randomness per id: a random 64-bit prefix per
 * source (per process, per API) and a counter, as `<16 hex>-<base36>` after
 * `prefix`. Two sources collide only if their random prefixes do (about one
 * chance in 2^64 per pair). Drawing a UUID per request costs more than the
 * rest of a cached route's work on a busy server; these ids are for
 * correlation and row identity, not secrets.
 */
export function idSource(prefix = ""): () => string {
  const stem = `${prefix}${randomBytes(8).toString("hex")}-`;
  let count = 0;
  return () => stem + (++count).toString(36);
}
