import { decision } from "../memory/rate-limiter.js";
import type { RateDecision, RateLimit, RateLimiter } from "../ports/rate-limiter.js";
import { openRedis, type RedisConnectionOptions } from "./connection.js";

/**
 * The token bucket as one Lua script, so a take is atomic on the Redis
 * server: N concurrent takes on a bucket holding k tokens allow exactly
 * min(N, k), whichever instance sends them. Time comes from the caller
 * (`now`, epoch ms); the bucket never moves backwards in time, so a
 * slightly slow clock on one instance cannot refill it twice. The key
 * expires once the bucket would be full again (an absent bucket is full).
 *
 * KEYS[1] bucket; ARGV rate per second, burst, now (ms).
 * Returns { allowed (0/1), tokens left as a string (Lua numbers would be truncated) }.
 */
const TAKE = `
local rate = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local now = tonumber(ARGV[3])
local state = redis.call('HMGET', KEYS[1], 'tokens', 'at')
local tokens = tonumber(state[1])
local at = tonumber(state[2])
if tokens == nil or at == nil then
  tokens = burst
  at = now
end
if now > at then
  tokens = math.min(burst, tokens + (now - at) / 1000 * rate)
  at = now
end
tokens = math.min(burst, tokens)
local allowed = 0
if tokens >= 1 then
  tokens = tokens - 1
  allowed = 1
end
local ttl = math.ceil((burst - tokens) / rate * 1000) + 1000
redis.call('HSET', KEYS[1], 'tokens', string.format('%.17g', tokens), 'at', string.format('%.17g', at))
redis.call('PEXPIRE', KEYS[1], ttl)
return { allowed, string.format('%.17g', tokens) }
`;

export interface RedisRateLimiter extends RateLimiter {
  close(): Promise<void>;
}

/** A rate limiter shared by every instance that uses the same Redis and prefix. */
export function createRedisRateLimiter(options: RedisConnectionOptions): RedisRateLimiter {
  const { redis, prefix, command, close } = openRedis(options);
  const key = (name: string) => `${prefix}rl:${name}`;
  return {
    async take(name: string, limit: RateLimit, now: number): Promise<RateDecision> {
      const [allowed, tokens] = (await command(() =>
        redis.eval(TAKE, 1, key(name), limit.ratePerSecond, limit.burst, Math.floor(now)),
      )) as [number, string];
      return decision(allowed === 1, Number(tokens), limit);
    },
    async ping() {
      await command(() => redis.ping());
    },
    close,
  };
}
