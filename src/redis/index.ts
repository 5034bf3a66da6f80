export { createRedisCache, type RedisCache } from "./cache.js";
export type { RedisConnectionOptions } from "./connection.js";
export { createRedisRateLimiter, type RedisRateLimiter } from "./rate-limiter.js";
