import type { Cache } from "../ports/cache.js";
import type { Clock } from "../ports/clock.js";
import { openRedis, type RedisConnectionOptions } from "./connection.js";

export interface RedisCache extends Cache {
  close(): Promise<void>;
}

/**
 * A cache shared by every instance on the same Redis and prefix. Values are
 * stored as JSON with a Redis TTL (PX, milliseconds), so Redis drops them in
 * real time. When a `clock` is given, each entry also carries its expiry on
 * that clock and is not returned once the clock has passed it (the port's
 * rule for an injected clock).
 */
export function createRedisCache(options: RedisConnectionOptions & { clock?: Clock }): RedisCache {
  const { redis, prefix, close } = openRedis(options);
  const clock = options.clock;
  const key = (name: string) => `${prefix}cache:${name}`;
  return {
    async get<T>(name: string) {
      const text = await redis.get(key(name));
      if (text === null) return undefined;
      const entry = JSON.parse(text) as { v: unknown; exp: number | null };
      if (clock && entry.exp !== null && clock.now() >= entry.exp) return undefined;
      return entry.v as T;
    },
    async set(name, value, ttlSeconds) {
      const ttlMs = Math.max(1, Math.round(ttlSeconds * 1000));
      const entry = { v: value, exp: clock ? clock.now() + ttlMs : null };
      await redis.set(key(name), JSON.stringify(entry), "PX", ttlMs);
    },
    async delete(name) {
      await redis.del(key(name));
    },
    async ping() {
      await redis.ping();
    },
    close,
  };
}
