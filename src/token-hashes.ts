import { sha256Hex } from "./domain/crypto.js";
import type { Clock } from "./ports/clock.js";

/** How long a remembered token's hash is kept after its last successful use. */
export const TOKEN_HASH_TTL_MS = 5 * 60_000;

/**
 * SHA-256 of bearer tokens, remembered for the tokens that recently
 * authenticated (for five minutes from when they were remembered). Hashing is the one step of authentication that costs
 * noticeably on a busy server (a native digest and a fresh 64-character
 * string per request); a remembered token skips it. Only tokens that matched
 * a key or session are remembered, so random tokens cannot push out the real
 * ones, and the store is still asked on every request: revoking a key
 * applies to the very next request.
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
 * Up to `max` tokens, each for TOKEN_HASH_TTL_MS from when it was remembered
 * (by the clock port), the oldest dropped first when full; `max` 0 remembers
 * nothing. A plain map: on this path an LRU's bookkeeping costs about what
 * the hash it saves does.
 */
export function createTokenHashes(max: number, clock: Clock): TokenHashes {
  if (!(max > 0)) return HASH_EVERY_TIME;
  const known = new Map<string, { token: string; hash: string; expiresAt: number }>();
  // What the last `of` found: `remember` right after it (the usual request) needs no second lookup.
  let lastHit: { token: string; hash: string; expiresAt: number } | null = null;
  return {
    of(token) {
      const entry = known.get(token);
      if (entry !== undefined && clock.now() < entry.expiresAt) {
        lastHit = entry;
        return entry.hash;
      }
      lastHit = null;
      return sha256Hex(token);
    },
    remember(token, tokenHash) {
      if (lastHit !== null && lastHit.token === token && lastHit.hash === tokenHash) return;
      known.delete(token);
      known.set(token, { token, hash: tokenHash, expiresAt: clock.now() + TOKEN_HASH_TTL_MS });
      if (known.size > max) known.delete(known.keys().next().value!);
    },
  };
}
