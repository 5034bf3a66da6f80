import { ApiError } from "./errors.js";
import { andThen, type Awaitable } from "./awaitable.js";
import type { RateDecision, RateLimit, RateLimiter } from "./ports/rate-limiter.js";

/**
 * One token from the bucket `key` (burst twice the rate), or 429
 * `rate_limited` with `Retry-After`. Returns the `RateLimit-*` headers
 * every answer of a limited endpoint carries, as a fresh object the caller owns.
 */
export function takeRateToken(
  rateLimiter: RateLimiter,
  key: string,
  ratePerSecond: number,
  now: number,
  refusal: string,
): Awaitable<Record<string, string>> {
  const limit = limitOf(ratePerSecond);
  return andThen(rateLimiter.take(key, limit, now), (decision) => headersOrRefusal(decision, limit, refusal));
}

/** The bucket settings of a rate (burst twice the rate), and its RateLimit-Limit text: the last one built is reused. */
let lastLimit: RateLimit & { text: string } = { ratePerSecond: Number.NaN, burst: 1, text: "1" };
function limitOf(ratePerSecond: number): RateLimit & { text: string } {
  if (lastLimit.ratePerSecond !== ratePerSecond) {
    const burst = Math.max(1, Math.floor(ratePerSecond * 2));
    lastLimit = Object.freeze({ ratePerSecond, burst, text: String(burst) });
  }
  return lastLimit;
}

function headersOrRefusal(decision: RateDecision, limit: RateLimit & { text: string }, refusal: string): Record<string, string> {
  const headers: Record<string, string> = {
    "ratelimit-limit": limit.text,
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

/** Whether a configured rate is a limit at all (0, negative, NaN and Infinity are "off"). */
export function isRateLimit(ratePerSecond: number): boolean {
  return ratePerSecond > 0 && ratePerSecond !== Number.POSITIVE_INFINITY;
}
