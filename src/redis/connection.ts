import { Redis } from "../peers/ioredis.js";
import { withTimeout } from "../base/timeout.js";

/** Either a client the host owns or a URL to connect to (the connection is then ours to close). */
export interface RedisConnectionOptions {
  redis?: Redis;
  url?: string;
  /** Prepended to every key, so several apps or test runs can share one Redis. Default `dataport:`. */
  prefix?: string;
  /**
   * How long one command may go unanswered before it fails, in ms (default
   * 1000). While the connection is down (after it was up once), commands
   * fail at once instead of waiting for a reconnect, so a Redis outage
   * costs a request milliseconds, not the driver's retry loop.
   */
  commandTimeoutMs?: number;
}

export interface RedisConnection {
  redis: Redis;
  prefix: string;
  /**
   * `run()` (one command on `redis`), failing fast when Redis is away: at
   * once while the connection is down, after `commandTimeoutMs` when it does
   * not answer. What fails is left to the caller's policy (the rate
   * limiter's, the cache's).
   */
  command<T>(run: () => Promise<T>): Promise<T>;
  /** Quit the connection when we opened it; leave a host's client alone. */
  close(): Promise<void>;
}

export function openRedis(options: RedisConnectionOptions): RedisConnection {
  const owned = !options.redis;
  if (!options.redis && !options.url) throw new TypeError("a Redis client or url is required");
  const timeoutMs = options.commandTimeoutMs ?? 1000;
  const redis =
    options.redis ??
    new Redis(options.url!, {
      enableAutoPipelining: true,
      // One retry across a reconnect at most, and bounded connects: the caller's deadline is what counts.
      maxRetriesPerRequest: 1,
      connectTimeout: 2000,
      commandTimeout: timeoutMs,
      retryStrategy: (attempt) => Math.min(attempt * 100, 1000),
    });
  // A dropped connection surfaces as a rejected command; the 'error' event
  // must have a listener or it would crash the process (a host's client gets one too).
  redis.on("error", () => {});
  let wasReady = redis.status === "ready";
  redis.on("ready", () => {
    wasReady = true;
  });
  return {
    redis,
    prefix: options.prefix ?? "dataport:",
    command(run) {
      // Before the first connection commands wait for it (a start-up); after, a lost connection fails them at once.
      if (wasReady && redis.status !== "ready")
        return Promise.reject(new Error(`Redis is unavailable (connection ${redis.status})`));
      return withTimeout(run(), timeoutMs, () => new Error(`Redis did not answer within ${timeoutMs} ms`));
    },
    async close() {
      if (owned) await redis.quit().catch(() => redis.disconnect());
    },
  };
}
