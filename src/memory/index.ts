export { createMemoryStorage, type MemoryStorage } from "./memory-storage.js";
export { createMemoryCache } from "./cache.js";
export { createMemoryRateLimiter } from "./rate-limiter.js";
export { createFixedClock, createOffsetClock, type FixedClock } from "./fixed-clock.js";
export { systemClock } from "../base/clock.js";
