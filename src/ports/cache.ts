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
}
