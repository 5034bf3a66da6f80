import { describe, expect, it } from "vitest";
import { createMemoryCache } from "../../src/memory/cache.js";
import { createMemoryRateLimiter } from "../../src/memory/rate-limiter.js";
import { runCacheConformance, runRateLimiterConformance } from "../../src/testing/index.js";

runRateLimiterConformance("memory", () => createMemoryRateLimiter());
runCacheConformance("memory", ({ clock }) => createMemoryCache({ clock }));

describe("memory rate limiter: bounded key map", () => {
  const limit = { ratePerSecond: 1, burst: 2 };
  it("forgets the least recently used key when full, never a busy one", async () => {
    const limiter = createMemoryRateLimiter({ maxKeys: 2 });
    expect((await limiter.take("a", limit, 0)).remaining).toBe(1);
    expect((await limiter.take("b", limit, 0)).remaining).toBe(1);
    expect((await limiter.take("b", limit, 0)).remaining).toBe(0); // b twice in a row (the newest key)
    expect((await limiter.take("a", limit, 0)).remaining).toBe(0); // now a is the most recently used
    await limiter.take("c", limit, 0); // full: b, the least recently used, goes
    expect((await limiter.take("a", limit, 0)).allowed).toBe(false); // a kept its empty bucket
    expect((await limiter.take("b", limit, 0)).remaining).toBe(1); // b starts over with a full bucket
  });
});
