import { randomUUID } from "node:crypto";
import type { Cache } from "../ports/cache.js";
import type { Clock } from "../base/clock.js";
import { openRedis, type RedisConnectionOptions } from "./connection.js";

export interface RedisCache extends Cache {
  /**
   * Claim `name` for `ttlMs` unless claimed (atomic on the Redis server): a token when taken, else null. The Cache
   * port's optional flight claims.
   */
  claimFlight(name: string, ttlMs: number): Promise<string | null>;
  /** Give `name` back if `token` still holds it. */
  releaseFlight(name: string, token: string): Promise<void>;
  close(): Promise<void>;
}

/** Delete KEYS[1] only while it holds ARGV[1] (the claimer's token). */
const RELEASE = `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`;

/**
 * A cache shared by every instance on the same Redis and prefix. Values are
 * stored as JSON with a Redis TTL (PX, milliseconds), so Redis drops them in
 * real time. When a `clock` is given, each entry also carries its expiry on
 * that clock and is not returned once the clock has passed it (the port's
 * rule for an injected clock).
 *
 * It also claims flights for the connection guard (`SET NX PX` with a
 * random token, released by a compare-and-delete script), so the instances
 * sharing it make one upstream call per query.
 */
export function createRedisCache(options: RedisConnectionOptions & { clock?: Clock }): RedisCache {
  const { redis, prefix, command, close } = openRedis(options);
  const clock = options.clock;
  const key = (name: string) => `${prefix}cache:${name}`;
  return {
    async get<T>(name: string) {
      const text = await command(() => redis.get(key(name)));
      if (text === null) return undefined;
      const entry = JSON.parse(text) as { v: unknown; exp: number | null };
      if (clock && entry.exp !== null && clock.now() >= entry.exp) return undefined;
      return entry.v as T;
    },
    async set(name, value, ttlSeconds) {
      const ttlMs = Math.max(1, Math.round(ttlSeconds * 1000));
      const entry = { v: value, exp: clock ? clock.now() + ttlMs : null };
      await command(() => redis.set(key(name), JSON.stringify(entry), "PX", ttlMs));
    },
    async delete(name) {
      await command(() => redis.del(key(name)));
    },
    async ping() {
      await command(() => redis.ping());
    },
    async claimFlight(name, ttlMs) {
      const token = randomUUID();
      const taken = await command(() =>
        redis.set(`${prefix}flight:${name}`, token, "PX", Math.max(1, Math.round(ttlMs)), "NX"),
      );
      return taken === "OK" ? token : null;
    },
    async releaseFlight(name, token) {
      await command(() => redis.eval(RELEASE, 1, `${prefix}flight:${name}`, token));
    },
    close,
  };
}
