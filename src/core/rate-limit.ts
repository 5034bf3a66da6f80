import { ApiError } from "../base/api-error.js";
import type { RateDecision, RateLimit, RateLimiter } from "../ports/rate-limiter.js";

/**
 * How rate limits are told (`rateLimitHeaders`): `limit-remaining-reset`
 * (`RateLimit-Limit`, `RateLimit-Remaining`, `RateLimit-Reset`, the earlier
 * drafts' fields), `policy` (`RateLimit-Policy` and `RateLimit`, the current
 * draft-ietf-httpapi-ratelimit-headers), or `both`.
 */
export type RateLimitHeaderStyle = "limit-remaining-reset" | "policy" | "both";

/** Whether a configured rate is a limit at all (0, negative, NaN and Infinity are "off"). */
export function isRateLimit(ratePerSecond: number): boolean {
  return ratePerSecond > 0 && ratePerSecond !== Number.POSITIVE_INFINITY;
}

/** The token bucket of a rate: `ratePerSecond`, burst twice that (at least 1). */
export function tokenBucket(ratePerSecond: number): RateLimit {
  return { ratePerSecond, burst: Math.max(1, Math.floor(ratePerSecond * 2)) };
}

/**
 * The rate-limit headers of the rate limiter's decision, which every answer
 * of a limited endpoint carries (a fresh object the caller owns), in the
 * style the server sets (`rateLimitHeaders`); a refusal is thrown as 429
 * `rate_limited` with `Retry-After`. `policy` names the bucket in the draft's
 * `RateLimit-Policy` and `RateLimit` fields (`api`, `webhook`, `upstream`).
 */
export function rateLimitHeaders(
  decision: RateDecision,
  limit: RateLimit,
  refusal: string,
  style: RateLimitHeaderStyle = "limit-remaining-reset",
  policy = "default",
): Record<string, string> {
  // Let through while the limiter is away: no bucket to describe.
  if (decision === UNLIMITED) return {};
  const headers = bucketHeaders(style, policy, limit, decision.remaining, decision.resetSeconds);
  if (!decision.allowed) {
    // The draft's `t` of a refusal ends no later than Retry-After: nothing can be used until then.
    if (headers.ratelimit !== undefined) headers.ratelimit = `"${policy}";r=0;t=${decision.retryAfterSeconds}`;
    throw new ApiError(429, "rate_limited", refusal, {
      headers: { ...headers, "retry-after": String(decision.retryAfterSeconds) },
      details: { retryAfterSeconds: decision.retryAfterSeconds },
    });
  }
  return headers;
}

/**
 * A token bucket as headers. `limit-remaining-reset`: `RateLimit-Limit`
 * (the burst), `RateLimit-Remaining`, `RateLimit-Reset` (seconds until the
 * bucket is full), as earlier drafts had them. `policy`: the current draft
 * (draft-ietf-httpapi-ratelimit-headers-11), `RateLimit-Policy: "<policy>";q=<burst>;w=<seconds to refill it>`
 * and `RateLimit: "<policy>";r=<remaining>;t=<seconds until full>` (on a refusal, until
 * Retry-After). `both`: all five.
 */
export function bucketHeaders(
  style: RateLimitHeaderStyle,
  policy: string,
  limit: RateLimit,
  remaining: number,
  resetSeconds: number,
): Record<string, string> {
  const headers: Record<string, string> = {};
  if (style !== "policy") {
    headers["ratelimit-limit"] = String(limit.burst);
    headers["ratelimit-remaining"] = String(remaining);
    headers["ratelimit-reset"] = String(resetSeconds);
  }
  if (style !== "limit-remaining-reset") {
    // The draft's window is whole seconds, at least 1: the time an empty bucket takes to fill.
    const window = Math.max(1, Math.ceil(limit.burst / limit.ratePerSecond));
    headers["ratelimit-policy"] = `"${policy}";q=${limit.burst};w=${window}`;
    headers.ratelimit = `"${policy}";r=${remaining};t=${resetSeconds}`;
  }
  return headers;
}

/**
 * The decision of a request let through because the limiter could not be asked (fail open): allowed, with no RateLimit
 * headers.
 */
const UNLIMITED: RateDecision = Object.freeze({ allowed: true, remaining: 0, resetSeconds: 0, retryAfterSeconds: 0 });

/** How often a limiter failure reaches the log while it lasts (each request is answered either way). */
const LOG_EVERY_MS = 10_000;

/**
 * The rate limiter with the policy for a limiter that cannot be asked (a
 * Redis outage): a `take` that fails answers 503 `rate_limiter_unavailable`
 * with `Retry-After` (fail closed, the default), or — `failOpen` — lets the
 * request through as if its bucket were full, so the limits lapse while the
 * limiter is away. Either way the failure is logged, at most once every ten
 * seconds. Every limited path (the API's per-credential limit, webhook
 * deliveries, upstream queries) asks through this; `ping` is left as it is,
 * so readiness keeps reporting the limiter.
 */
export function limiterWithPolicy(
  limiter: RateLimiter,
  policy: { failOpen: boolean; log: (message: string, error: unknown) => void },
): RateLimiter {
  let loggedAt = Number.NEGATIVE_INFINITY;
  const failed = (error: unknown): RateDecision => {
    const now = Date.now();
    if (now - loggedAt >= LOG_EVERY_MS) {
      loggedAt = now;
      policy.log(
        policy.failOpen
          ? "the rate limiter is unavailable; requests pass unlimited (rateLimitFailOpen)"
          : "the rate limiter is unavailable; limited requests answer 503",
        error,
      );
    }
    if (!policy.failOpen) {
      throw new ApiError(503, "rate_limiter_unavailable", "the rate limiter is unavailable; retry later", {
        headers: { "retry-after": "1" },
      });
    }
    return UNLIMITED;
  };
  const wrapped: RateLimiter = {
    take(key, limit, now) {
      try {
        return limiter.take(key, limit, now).catch(failed);
      } catch (error) {
        return Promise.resolve().then(() => failed(error));
      }
    },
  };
  if (limiter.ping) wrapped.ping = () => limiter.ping!();
  return wrapped;
}
