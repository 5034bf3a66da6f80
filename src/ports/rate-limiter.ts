/** Token-bucket settings: `ratePerSecond` tokens refill each second, up to `burst`. */
export interface RateLimit {
  ratePerSecond: number;
  burst: number;
}

export interface RateDecision {
  allowed: boolean;
  /** Tokens left after this call (floored). */
  remaining: number;
  /** Seconds until the bucket is full again (ceil). */
  resetSeconds: number;
  /** When refused: seconds until one token is available (ceil, at least 1). */
  retryAfterSeconds: number;
}

/**
 * A token-bucket rate limiter. `take` MUST be atomic per key: N concurrent
 * calls on a bucket holding k tokens allow exactly min(N, k). Buckets of
 * different keys never affect each other. `now` is epoch milliseconds from
 * the caller's clock, so shared implementations agree across instances.
 */
export interface RateLimiter {
  take(key: string, limit: RateLimit, now: number): Promise<RateDecision>;
  /**
   * Optional: one round trip to a shared limiter's server (Redis: `PING`),
   * for readiness checks; rejects when it cannot be reached. In-process
   * limiters leave it out.
   */
  ping?(): Promise<void>;
}
