import { ApiError } from "./errors.js";
import type { RateDecision, RateLimit } from "./ports/rate-limiter.js";

/** Whether a configured rate is a limit at all (0, negative, NaN and Infinity are "off"). */
export function isRateLimit(ratePerSecond: number): boolean {
  return ratePerSecond > 0 && ratePerSecond !== Number.POSITIVE_INFINITY;
}

/** The token bucket of a rate: `ratePerSecond`, burst twice that (at least 1). */
export function tokenBucket(ratePerSecond: number): RateLimit {
  return { ratePerSecond, burst: Math.max(1, Math.floor(ratePerSecond * 2)) };
}

/**
 * The `RateLimit-*` headers of the rate limiter's decision, which every
 * answer of a limited endpoint carries (a fresh object the caller owns);
 * a refusal is thrown as 429 `rate_limited` with `Retry-After`.
 */
export function rateLimitHeaders(decision: RateDecision, limit: RateLimit, refusal: string): Record<string, string> {
  const headers: Record<string, string> = {
    "ratelimit-limit": String(limit.burst),
    "ratelimit-remaining": String(decision.remaining),
    "ratelimit-reset": String(decision.resetSeconds),
  };
  if (!decision.allowed) {
    throw new ApiError(429, "rate_limited", refusal, {
      headers: { ...headers, "retry-after": String(decision.retryAfterSeconds) },
      details: { retryAfterSeconds: decision.retryAfterSeconds },
    });
  }
  return headers;
}
