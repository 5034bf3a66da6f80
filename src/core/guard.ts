import { z } from "zod";
import { sha256Hex } from "../domain/crypto.js";
import type { ConnectionRecord } from "../domain/model.js";
import { canonicalJson } from "../domain/rows.js";
import { ApiError } from "../base/api-error.js";
import type { Cache } from "../ports/cache.js";
import type { Clock } from "../base/clock.js";
import type { Connector, ConnectorQuery, ConnectorResult, GuardSettings } from "../ports/connector.js";
import { InvalidQueryError, UpstreamThrottledError, UpstreamUnavailableError } from "../ports/connector.js";
import type { Metrics, UpstreamOutcome } from "../ports/metrics.js";
import type { RateLimiter } from "../ports/rate-limiter.js";
import { withTimeout } from "../base/timeout.js";
import { bucketHeaders, type RateLimitHeaderStyle } from "./rate-limit.js";

export const DEFAULT_GUARD_SETTINGS: GuardSettings = {
  cacheTtlSeconds: 60,
  staleTtlSeconds: 24 * 60 * 60,
  ratePerSecond: 20,
  burst: 40,
};

/** A connector result as the guard stores and answers it. `fetchedAt`: epoch ms of the upstream call. */
export type GuardedResult = ConnectorResult & { fetchedAt: number };

export interface GuardAnswer {
  result: GuardedResult;
  /** Answered from the cache, without an upstream call. */
  cached: boolean;
  /** The upstream (or the guard) refused; this is the last good result for the query. */
  stale: boolean;
}

export interface GuardedQuery {
  connection: ConnectionRecord;
  connector: Connector;
  /** Which dataset asked, part of the cache key. */
  datasetId: string;
  query: Omit<ConnectorQuery, "signal">;
  /** `Cache-Control: no-cache`: skip a fresh entry and ask the upstream (still rate-limited). */
  noCache: boolean;
  /**
   * An upstream call running longer ends with 504 `upstream_timeout` (its signal is aborted); 0 or absent: no limit.
   */
  timeoutMs?: number;
  /** Where cache results and upstream calls are counted, when metrics are on. */
  metrics?: Metrics | null;
}

/**
 * The guard in front of every connector: a cache answering `cached: true`,
 * single-flight so identical concurrent queries make one upstream call, a
 * per-connection upstream rate limit, and the last good result served
 * `stale: true` when the upstream throttles or the limit refuses. With no
 * last good result: 429 `rate_limited` with `Retry-After`.
 *
 * Cache and rate limiter are ports (shared between instances when they are
 * Redis-backed). Single-flight is per API instance (each makes its own
 * guard), and across the instances sharing a cache that can claim flights
 * (`Cache.claimFlight`, the Redis cache).
 * An upstream call that runs past `timeoutMs` ends with 504
 * `upstream_timeout` for every query waiting on it.
 */
export function createGuard(
  ports: { cache: Cache; rateLimiter: RateLimiter; clock: Clock },
  options: { rateLimitHeaders?: RateLimitHeaderStyle } = {},
) {
  const headerStyle = options.rateLimitHeaders ?? "limit-remaining-reset";
  const inFlight = new Map<string, Promise<GuardAnswer>>();
  const claims = flightClaimsOf(ports.cache);

  async function query(request: GuardedQuery): Promise<GuardAnswer> {
    const metrics = request.metrics;
    if (!metrics) return answer(request);
    const type = request.connection.type;
    try {
      const found = await answer(request);
      metrics.connectionCache(type, found.stale ? "stale" : found.cached ? "hit" : "miss");
      return found;
    } catch (error) {
      metrics.connectionCache(type, "miss");
      throw error;
    }
  }

  async function answer(request: GuardedQuery): Promise<GuardAnswer> {
    const settings = guardSettings(request.connection, request.connector);
    const key = queryKey(request);
    if (!request.noCache) {
      const fresh = await cacheGet(`dp:conn:fresh:${key}`);
      if (fresh) return { result: fresh, cached: true, stale: false };
    }
    const running = inFlight.get(key);
    if (running) return running;
    const call = sharedFlight(request, key, settings).finally(() => inFlight.delete(key));
    inFlight.set(key, call);
    return call;
  }

  /**
   * With a cache that can claim flights (Redis), the instances sharing it
   * make one upstream call per query too: the instance whose claim succeeds
   * calls; the others wait for its answer to appear in the cache, and take
   * the claim themselves if it goes without one (the call failed, or its
   * instance died and the claim expired), so each failure costs one call at
   * a time. A `no-cache` query is not coordinated: any cached answer would do
   * for the others, not for it.
   */
  async function sharedFlight(request: GuardedQuery, key: string, settings: GuardSettings): Promise<GuardAnswer> {
    if (!claims || request.noCache) return callUpstream(request, key, settings);
    const name = `dp:conn:flight:${key}`;
    // Held at most as long as a call may run, so a dead instance's claim frees itself.
    const holdMs =
      request.timeoutMs && request.timeoutMs > 0 && Number.isFinite(request.timeoutMs)
        ? request.timeoutMs + 1000
        : FLIGHT_HOLD_MS;
    const deadline = Date.now() + holdMs + FLIGHT_HOLD_MS;
    for (let attempt = 0; ; attempt++) {
      let token: string | null;
      try {
        token = await claims.claimFlight(name, holdMs);
      } catch {
        // A shared cache going away: each instance on its own, as without one.
        return callUpstream(request, key, settings);
      }
      if (token !== null) {
        try {
          return await callUpstream(request, key, settings);
        } finally {
          await claims.releaseFlight(name, token).catch(() => {});
        }
      }
      await sleep(Math.min(50, 5 * 2 ** Math.min(attempt, 4)));
      const fresh = await cacheGet(`dp:conn:fresh:${key}`);
      if (fresh) return { result: fresh, cached: true, stale: false };
      if (Date.now() > deadline) return callUpstream(request, key, settings);
    }
  }

  async function callUpstream(request: GuardedQuery, key: string, settings: GuardSettings): Promise<GuardAnswer> {
    const limit = { ratePerSecond: settings.ratePerSecond, burst: settings.burst };
    const decision = await ports.rateLimiter.take(
      `dp:conn:upstream:${request.connection.id}`,
      limit,
      ports.clock.now(),
    );
    if (!decision.allowed)
      return lastGood(
        key,
        settings,
        decision.retryAfterSeconds,
        "the upstream rate limit of this connection is reached",
      );
    let result: ConnectorResult;
    const startedAt = performance.now();
    try {
      result = await callWithTimeout(request, request.timeoutMs ?? 0);
      request.metrics?.upstreamCall(request.connection.type, "ok", performance.now() - startedAt);
    } catch (error) {
      request.metrics?.upstreamCall(request.connection.type, upstreamOutcome(error), performance.now() - startedAt);
      if (error instanceof UpstreamThrottledError) {
        return lastGood(key, settings, error.retryAfterSeconds ?? 1, "the upstream is throttling requests");
      }
      throw error;
    }
    const stored: GuardedResult = { ...result, fetchedAt: ports.clock.now() };
    await Promise.all([
      cacheSet(`dp:conn:fresh:${key}`, stored, settings.cacheTtlSeconds),
      cacheSet(`dp:conn:stale:${key}`, stored, settings.staleTtlSeconds),
    ]);
    return { result: stored, cached: false, stale: false };
  }

  async function lastGood(
    key: string,
    settings: GuardSettings,
    retryAfterSeconds: number,
    reason: string,
  ): Promise<GuardAnswer> {
    const previous = await cacheGet(`dp:conn:stale:${key}`);
    if (previous) return { result: previous, cached: true, stale: true };
    const retryAfter = Math.max(1, Math.ceil(retryAfterSeconds));
    const upstreamBucket = { ratePerSecond: settings.ratePerSecond, burst: settings.burst };
    throw new ApiError(429, "rate_limited", `${reason}; retry later`, {
      details: { retryAfterSeconds: retryAfter },
      headers: {
        "retry-after": String(retryAfter),
        ...bucketHeaders(headerStyle, "upstream", upstreamBucket, 0, retryAfter),
      },
    });
  }

  // A cache that fails (a shared cache going away) is a miss, never a failed query.
  async function cacheGet(key: string): Promise<GuardedResult | undefined> {
    try {
      return await ports.cache.get<GuardedResult>(key);
    } catch {
      return undefined;
    }
  }
  async function cacheSet(key: string, value: GuardedResult, ttlSeconds: number): Promise<void> {
    try {
      await ports.cache.set(key, value, ttlSeconds);
    } catch {
      // The answer is still good; it just will not be reused.
    }
  }

  return { query };
}

export type Guard = ReturnType<typeof createGuard>;

/** How long a flight is claimed when the call has no timeout. */
const FLIGHT_HOLD_MS = 30_000;

/** The cache's atomic flight claims, when it offers both halves (a cache shared by several instances). */
function flightClaimsOf(cache: Cache): Required<Pick<Cache, "claimFlight" | "releaseFlight">> | null {
  const { claimFlight, releaseFlight } = cache;
  return typeof claimFlight === "function" && typeof releaseFlight === "function"
    ? { claimFlight: claimFlight.bind(cache), releaseFlight: releaseFlight.bind(cache) }
    : null;
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/**
 * The connector's answer, or 504 `upstream_timeout` once `timeoutMs` has passed (the connector's signal is then
 * aborted).
 */
function callWithTimeout(request: GuardedQuery, timeoutMs: number): Promise<ConnectorResult> {
  if (!(timeoutMs > 0) || timeoutMs === Number.POSITIVE_INFINITY)
    return request.connector.query(request.connection, request.query);
  const controller = new AbortController();
  const call = request.connector.query(request.connection, { ...request.query, signal: controller.signal });
  return withTimeout(call, timeoutMs, () => {
    const error = new ApiError(
      504,
      "upstream_timeout",
      `the upstream of this connection did not answer within ${timeoutMs} ms`,
    );
    controller.abort(error);
    return error;
  });
}

function upstreamOutcome(error: unknown): UpstreamOutcome {
  if (error instanceof UpstreamThrottledError) return "throttled";
  if (error instanceof UpstreamUnavailableError) return "unavailable";
  if (error instanceof InvalidQueryError) return "invalid_query";
  if (error instanceof ApiError && error.code === "upstream_timeout") return "timeout";
  return "error";
}

const positive = z.number().positive().finite();
const configSettings = z.object({
  cacheTtlSeconds: positive.optional().catch(undefined),
  staleTtlSeconds: positive.optional().catch(undefined),
  ratePerSecond: positive.optional().catch(undefined),
  burst: z.number().int().min(1).optional().catch(undefined),
});

/** Defaults, then the connector's, then the connection's own config (invalid values are ignored). */
export function guardSettings(connection: ConnectionRecord, connector: Connector): GuardSettings {
  const own = configSettings.parse(connection.config);
  const merged = { ...DEFAULT_GUARD_SETTINGS, ...connector.guardDefaults };
  for (const name of Object.keys(merged) as (keyof GuardSettings)[]) {
    const value = own[name];
    if (value !== undefined) merged[name] = value;
  }
  return merged;
}

/** The normalised query, hashed: the same question always maps to the same key. */
function queryKey(request: GuardedQuery): string {
  const { query } = request;
  const normalised = canonicalJson({
    datasetId: request.datasetId,
    source: query.source,
    format: query.format,
    limit: query.limit,
    offset: query.offset,
    filters: query.filters,
    orderBy: query.orderBy,
    orderDirection: query.orderDirection,
    params: query.params,
    // A connection changed through the admin API answers from its new config at once, never from the old one's cache.
    config: request.connection.config,
  });
  return `${request.connection.id}:${sha256Hex(normalised)}`;
}
