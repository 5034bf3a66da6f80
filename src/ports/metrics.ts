import type { RequestLogLine } from "./logger.js";

/** How one guarded connection query was answered (exactly one per query). */
export type CacheResult = "hit" | "miss" | "stale";

/** How an upstream call (a connector's `query`) ended. */
export type UpstreamOutcome = "ok" | "throttled" | "unavailable" | "invalid_query" | "timeout" | "error";

/** How a storage operation ended. */
export type StorageOutcome = "ok" | "error" | "timeout";

/**
 * What the core counts, when a host enables metrics
 * (`createDataApi({ metrics })`; `createPrometheusMetrics()` from
 * `dataport/metrics` is the implementation Dataport ships). Every method is
 * called on a request's path, so it MUST be cheap, MUST NOT throw and MUST
 * NOT wait for I/O. Durations are milliseconds.
 */
export interface Metrics {
  /** Once per request, after the reply is built (the same facts as the request log line). */
  request(line: RequestLogLine): void;
  /**
   * A webhook delivery: stored as a new row, recognised as a duplicate, or
   * refused (reason: the error code). `connectionId`: the webhook
   * connection, when the endpoint is known (absent or null for an unknown one).
   */
  webhook(outcome: "stored" | "duplicate" | "rejected", reason: string | null, connectionId?: string | null): void;
  /** One call to an upstream through the connection guard. */
  upstreamCall(connectionType: string, outcome: UpstreamOutcome, durationMs: number): void;
  /** One guarded connection query: answered from the fresh cache, from the upstream, or stale. */
  connectionCache(connectionType: string, result: CacheResult): void;
  /**
   * Audit feed lag: at a read of `/api/v1/audit` that returned events, the
   * age (now minus the time it was stored) of the newest event it returned,
   * in seconds. Events loaded from a fixture (stored at 0) are not counted.
   */
  auditFeedLag(seconds: number): void;
  /**
   * Optional: how long the oldest audit append still open has held the feed
   * back, in seconds (0: nothing holds it), measured by each feed read, each
   * readiness check and each scrape of `/api/metrics`.
   */
  auditFeedHeldBack?(seconds: number): void;
  /** One storage call (only measured when metrics are on: the store is then wrapped). */
  storageOperation(operation: string, outcome: StorageOutcome, durationMs: number): void;
  /** The exposition served at `GET /api/metrics`. */
  expose(): Promise<{ contentType: string; body: string }>;
}
