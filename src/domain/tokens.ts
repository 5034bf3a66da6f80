import { randomBytes } from "node:crypto";
import { crc32 } from "node:zlib";
import { base62 } from "./crypto.js";

/**
 * API key tokens: `dp_live_` + 30 random base62 characters + a 6-character
 * base62 CRC32 checksum of the random part — the GitHub token format, so
 * secret scanners can match the prefix and check the checksum offline.
 */
export const API_KEY_PREFIX = "dp_live_";
const RANDOM_LENGTH = 30;
const CHECKSUM_LENGTH = 6;
const ALPHABET = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

export function generateApiKeyToken(): string {
  const random = base62(randomBytes(RANDOM_LENGTH * 2), RANDOM_LENGTH);
  return API_KEY_PREFIX + random + checksum(random);
}

/** True when `token` has the prefix, the length and a matching checksum. */
export function isWellFormedApiKeyToken(token: string): boolean {
  if (!token.startsWith(API_KEY_PREFIX)) return false;
  const body = token.slice(API_KEY_PREFIX.length);
  if (body.length !== RANDOM_LENGTH + CHECKSUM_LENGTH) return false;
  const random = body.slice(0, RANDOM_LENGTH);
  return checksum(random) === body.slice(RANDOM_LENGTH);
}

function checksum(text: string): string {
  let n = crc32(text) >>> 0;
  let out = "";
  for (let i = 0; i < CHECKSUM_LENGTH; i++) {
    out = ALPHABET[n % 62] + out;
    n = Math.floor(n / 62);
  }
  return out;
}
