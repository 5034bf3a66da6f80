import { Redis } from "../peers/ioredis.js";

/** Either a client the host owns or a URL to connect to (the connection is then ours to close). */
export interface RedisConnectionOptions {
  redis?: Redis;
  url?: string;
  /** Prepended to every key, so several apps or test runs can share one Redis. Default `dataport:`. */
  prefix?: string;
}

export interface RedisConnection {
  redis: Redis;
  prefix: string;
  /** Quit the connection when we opened it; leave a host's client alone. */
  close(): Promise<void>;
}

export function openRedis(options: RedisConnectionOptions): RedisConnection {
  const owned = !options.redis;
  if (!options.redis && !options.url) throw new TypeError("a Redis client or url is required");
  const redis = options.redis ?? new Redis(options.url!, { maxRetriesPerRequest: 2, enableAutoPipelining: true });
  // A dropped connection surfaces as a rejected command; the 'error' event
  // must have a listener or it would crash the process.
  if (owned) redis.on("error", () => {});
  return {
    redis,
    prefix: options.prefix ?? "dataport:",
    async close() {
      if (owned) await redis.quit().catch(() => redis.disconnect());
    },
  };
}
