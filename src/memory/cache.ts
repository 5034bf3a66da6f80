import { LRUCache } from "lru-cache";
import type { Cache } from "../ports/cache.js";
import { type Clock, systemClock } from "../base/clock.js";

/** In-process cache on lru-cache, with TTLs measured on the injected clock. */
export function createMemoryCache(options: { max?: number; clock?: Clock } = {}): Cache {
  const clock = options.clock ?? systemClock;
  const lru = new LRUCache<string, { value: unknown }>({
    max: options.max ?? 5_000,
    ttlAutopurge: false,
    // Read the injected clock on every check: lru-cache otherwise reuses one reading for 1 ms of real time.
    ttlResolution: 0,
    perf: { now: () => clock.now() },
  });
  return {
    async get<T>(key: string) {
      return lru.get(key)?.value as T | undefined;
    },
    async set(key, value, ttlSeconds) {
      lru.set(key, { value }, { ttl: Math.max(1, Math.round(ttlSeconds * 1000)) });
    },
    async delete(key) {
      lru.delete(key);
    },
  };
}
