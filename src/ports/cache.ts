/**
 * A key-value cache with per-entry TTL, used by the connection guard. Values
 * are JSON-serialisable. Implementations may evict at any time (it is a cache);
 * an entry MUST NOT be returned after its TTL has passed by the injected clock.
 */
export interface Cache {
  /** The value, or undefined when absent or expired. */
  get<T = unknown>(key: string): Promise<T | undefined>;
  /** Store a value for `ttlSeconds` seconds. */
  set(key: string, value: unknown, ttlSeconds: number): Promise<void>;
  delete(key: string): Promise<void>;
  /**
   * Optional: one round trip to a shared cache's server (Redis: `PING`),
   * for readiness checks; rejects when it cannot be reached. An in-process
   * cache has nothing to reach and leaves it out.
   */
  ping?(): Promise<void>;
  /**
   * Optional, with `releaseFlight`, on a cache that several instances share
   * (the Redis cache): claim `name` for `ttlMs` milliseconds unless it is
   * claimed, atomically across every instance sharing the cache. Resolves to
   * a token when this caller got the claim, null when someone else holds it.
   * The connection guard uses it so identical queries on different
   * instances make one upstream call; without it, single-flight is per instance.
   */
  claimFlight?(name: string, ttlMs: number): Promise<string | null>;
  /** Give `name` back, only if `token` still holds it (with `claimFlight`). */
  releaseFlight?(name: string, token: string): Promise<void>;
}
