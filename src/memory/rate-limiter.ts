import type { RateDecision, RateLimit, RateLimiter } from "../ports/rate-limiter.js";

/** In-process token buckets. Atomic per key because JavaScript runs one call at a time. */
export function createMemoryRateLimiter(options: { maxKeys?: number } = {}): RateLimiter {
  const maxKeys = options.maxKeys ?? 100_000;
  // Least recently used first (a key is moved to the end on every take), so the oldest goes when the map is full.
  const buckets = new Map<string, { tokens: number; at: number }>();
  return {
    async take(key: string, limit: RateLimit, now: number): Promise<RateDecision> {
      const bucket = buckets.get(key) ?? { tokens: limit.burst, at: now };
      const elapsed = Math.max(0, now - bucket.at) / 1000;
      bucket.tokens = Math.min(limit.burst, bucket.tokens + elapsed * limit.ratePerSecond);
      bucket.at = now;
      const allowed = bucket.tokens >= 1;
      if (allowed) bucket.tokens -= 1;
      buckets.delete(key);
      buckets.set(key, bucket);
      if (buckets.size > maxKeys) buckets.delete(buckets.keys().next().value!);
      return decision(allowed, bucket.tokens, limit);
    },
  };
}

/** The decision for a bucket holding `tokens` after the call. */
export function decision(allowed: boolean, tokens: number, limit: RateLimit): RateDecision {
  const rate = limit.ratePerSecond;
  return {
    allowed,
    remaining: Math.max(0, Math.floor(tokens)),
    resetSeconds: Math.max(0, Math.ceil((limit.burst - tokens) / rate)),
    retryAfterSeconds: allowed ? 0 : Math.max(1, Math.ceil((1 - tokens) / rate)),
  };
}
