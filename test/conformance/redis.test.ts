import { createRedisCache, createRedisRateLimiter } from "../../src/redis/index.js";
import { runCacheConformance, runRateLimiterConformance } from "../../src/testing/index.js";
import { REDIS_URL, redisSkipReason } from "../support/services.js";

// One prefix per run: instances of one run share buckets and entries (as
// several servers would), runs never see each other's keys.
const skip = await redisSkipReason();
const prefix = `dp_test:${process.pid}:${Date.now()}:`;

runRateLimiterConformance(
  "redis",
  () => createRedisRateLimiter({ url: REDIS_URL, prefix }),
  skip ? { skip } : { shared: true, ping: true },
);
runCacheConformance(
  "redis",
  ({ clock }) => createRedisCache({ url: REDIS_URL, prefix, clock }),
  skip ? { skip } : { shared: true, ping: true, flights: true },
);
