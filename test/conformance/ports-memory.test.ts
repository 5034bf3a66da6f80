import { createMemoryCache } from "../../src/memory/cache.js";
import { createMemoryRateLimiter } from "../../src/memory/rate-limiter.js";
import { runCacheConformance, runRateLimiterConformance } from "../../src/testing/index.js";

runRateLimiterConformance("memory", () => createMemoryRateLimiter());
runCacheConformance("memory", ({ clock }) => createMemoryCache({ clock }));
