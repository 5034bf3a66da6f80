import { LRUCache } from "lru-cache";
import { sha256Hex } from "../domain/crypto.js";
import type { Clock } from "../base/clock.js";

/** How long a remembered token's hash is kept from when it was remembered. */
export const TOKEN_HASH_TTL_MS = 5 * 60_000;

/**
 * SHA-256 of bearer tokens, remembered for the tokens that recently
 * authenticated (for five minutes from when they were remembered): a
 * remembered token skips the hash, the one step of authentication that
 * costs noticeably (a native digest and a fresh 64-character string per
 * request; see docs/performance.md for what it saves and what it costs).
 * Only tokens that matched a key or session are remembered, so random
 * tokens cannot push out the real ones, and the store is still asked on
 * every request: revoking a key applies to the very next request.
 */
export interface TokenHashes {
  /** The token's hex SHA-256: remembered, or computed now. */
  of(token: string): string;
  /** The token authenticated: keep its hash, unless it is remembered already. */
  remember(token: string, tokenHash: string): void;
}

/** Hashes every time and remembers nothing. */
export const HASH_EVERY_TIME: TokenHashes = Object.freeze({ of: sha256Hex, remember() {} });

/**
 * Up to `max` tokens (the least recently used go first), each for
 * TOKEN_HASH_TTL_MS from when it was remembered, by the clock port. `max` 0
 * remembers nothing. One per API instance (`tokenHashCacheSize`).
 */
export function createTokenHashes(max: number, clock: Clock): TokenHashes {
  if (!Number.isFinite(max))
    throw new TypeError("tokenHashCacheSize must be a finite number of tokens (0 remembers none)");
  const size = Math.floor(max);
  if (!(size > 0)) return HASH_EVERY_TIME;
  const remembered = new LRUCache<string, string>({
    max: size,
    // lru-cache counts an entry stale once strictly older than ttl; a hash is forgotten at TOKEN_HASH_TTL_MS.
    ttl: TOKEN_HASH_TTL_MS - 1,
    // Read the injected clock on every check: lru-cache otherwise reuses one reading for 1 ms of real time.
    ttlResolution: 0,
    perf: { now: () => clock.now() },
  });
  return {
    of(token) {
      return remembered.get(token) ?? sha256Hex(token);
    },
    remember(token, tokenHash) {
      if (!remembered.has(token)) remembered.set(token, tokenHash);
    },
  };
}
