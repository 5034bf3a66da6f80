import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from "../peers/prom-client.js";
import type { RequestLogLine } from "../ports/logger.js";
import type { CacheResult, Metrics, StorageOutcome, UpstreamOutcome } from "../ports/metrics.js";

export interface PrometheusMetricsOptions {
  /** Where the series are registered. Default: a registry of their own (never prom-client's global one). */
  registry?: Registry;
  /** Prefix of every series name. Default `dataport_`. */
  prefix?: string;
  /** Also collect prom-client's process metrics (CPU, memory, event-loop lag, GC) on Node. Default false. */
  processMetrics?: boolean;
  /** Latency buckets in seconds for requests, upstream calls and storage operations. */
  buckets?: number[];
  /**
   * Label the webhook counters by connection (`connection`: its id, `unknown`
   * for an endpoint that does not exist). Default false. At most
   * `maxConnections` (default 1000) distinct ids are labelled; deliveries of
   * any further connection count under `other`, so the series stay bounded.
   */
  webhookConnectionLabel?: boolean | { maxConnections?: number };
}

export interface PrometheusMetrics extends Metrics {
  readonly registry: Registry;
}

const DEFAULT_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

/**
 * The metrics port on prom-client, for `createDataApi({ metrics })`; the
 * API then serves them at `GET /api/metrics`. Series (prefix `dataport_`):
 *
 * - `http_requests_total{method,route,status}` and
 *   `http_request_duration_seconds{method,route,status}`: every request,
 *   by route template (`none` when no route matched);
 * - `webhook_deliveries_total{outcome}` (stored, duplicate, rejected) and
 *   `webhook_rejections_total{reason}` (the error code), both with
 *   `connection` too when `webhookConnectionLabel` is on;
 * - `upstream_calls_total{connection_type,outcome}` and
 *   `upstream_call_duration_seconds{connection_type}`;
 * - `connection_cache_total{connection_type,result}` (hit, miss, stale);
 * - `audit_feed_lag_seconds` (see `Metrics.auditFeedLag`) and
 *   `audit_feed_held_back_seconds` (see `Metrics.auditFeedHeldBack`);
 * - `storage_operation_duration_seconds{operation,outcome}`.
 */
export function createPrometheusMetrics(options: PrometheusMetricsOptions = {}): PrometheusMetrics {
  const registry = options.registry ?? new Registry();
  const prefix = options.prefix ?? "dataport_";
  const buckets = options.buckets ?? DEFAULT_BUCKETS;
  const registers = [registry];
  if (options.processMetrics) collectDefaultMetrics({ register: registry, prefix });

  const requests = new Counter({
    name: `${prefix}http_requests_total`,
    help: "Requests answered, by method, route template and status.",
    labelNames: ["method", "route", "status"] as const,
    registers,
  });
  const requestSeconds = new Histogram({
    name: `${prefix}http_request_duration_seconds`,
    help: "Time spent answering a request in the core, by method, route template and status.",
    labelNames: ["method", "route", "status"] as const,
    buckets,
    registers,
  });
  const byConnection = options.webhookConnectionLabel ? connectionLabels(options.webhookConnectionLabel) : null;
  const deliveries = new Counter({
    name: `${prefix}webhook_deliveries_total`,
    help: "Webhook deliveries: stored as a new row, recognised as a duplicate, or rejected.",
    labelNames: byConnection ? (["outcome", "connection"] as const) : (["outcome"] as const),
    registers,
  });
  const rejections = new Counter({
    name: `${prefix}webhook_rejections_total`,
    help: "Webhook deliveries rejected, by error code.",
    labelNames: byConnection ? (["reason", "connection"] as const) : (["reason"] as const),
    registers,
  });
  const upstreamCalls = new Counter({
    name: `${prefix}upstream_calls_total`,
    help: "Calls to upstream sources through the connection guard, by connection type and outcome.",
    labelNames: ["connection_type", "outcome"] as const,
    registers,
  });
  const upstreamSeconds = new Histogram({
    name: `${prefix}upstream_call_duration_seconds`,
    help: "Duration of upstream calls, by connection type.",
    labelNames: ["connection_type"] as const,
    buckets,
    registers,
  });
  const cache = new Counter({
    name: `${prefix}connection_cache_total`,
    help: "Connection queries by how they were answered: hit (fresh cache), miss (upstream), stale (last good result).",
    labelNames: ["connection_type", "result"] as const,
    registers,
  });
  const auditLag = new Gauge({
    name: `${prefix}audit_feed_lag_seconds`,
    help: "Age, when delivered, of the newest event returned by the latest audit feed read that returned events.",
    registers,
  });
  const auditHeldBack = new Gauge({
    name: `${prefix}audit_feed_held_back_seconds`,
    help: "How long the oldest audit append still open has held the audit feed back (0: nothing holds it).",
    registers,
  });
  const storageSeconds = new Histogram({
    name: `${prefix}storage_operation_duration_seconds`,
    help: "Duration of storage operations, by operation and outcome.",
    labelNames: ["operation", "outcome"] as const,
    buckets,
    registers,
  });

  return {
    registry,
    request(line: RequestLogLine) {
      const labels = { method: line.method, route: line.route ?? "none", status: String(line.status) };
      requests.inc(labels);
      requestSeconds.observe(labels, line.durationMs / 1000);
    },
    webhook(outcome, reason, connectionId) {
      if (byConnection === null) {
        deliveries.inc({ outcome });
        if (outcome === "rejected") rejections.inc({ reason: reason ?? "unknown" });
        return;
      }
      const connection = byConnection(connectionId ?? null);
      deliveries.inc({ outcome, connection });
      if (outcome === "rejected") rejections.inc({ reason: reason ?? "unknown", connection });
    },
    upstreamCall(connectionType: string, outcome: UpstreamOutcome, durationMs: number) {
      upstreamCalls.inc({ connection_type: connectionType, outcome });
      upstreamSeconds.observe({ connection_type: connectionType }, durationMs / 1000);
    },
    connectionCache(connectionType: string, result: CacheResult) {
      cache.inc({ connection_type: connectionType, result });
    },
    auditFeedLag(seconds: number) {
      auditLag.set(seconds);
    },
    auditFeedHeldBack(seconds: number) {
      auditHeldBack.set(seconds);
    },
    storageOperation(operation: string, outcome: StorageOutcome, durationMs: number) {
      storageSeconds.observe({ operation, outcome }, durationMs / 1000);
    },
    async expose() {
      return { contentType: registry.contentType, body: await registry.metrics() };
    },
  };
}

/** A connection's label: its id while fewer than `maxConnections` were seen, `other` past them, `unknown` for none. */
function connectionLabels(option: true | { maxConnections?: number }): (connectionId: string | null) => string {
  const max = option === true ? 1000 : (option.maxConnections ?? 1000);
  const seen = new Set<string>();
  return (connectionId) => {
    if (connectionId === null) return "unknown";
    if (seen.has(connectionId)) return connectionId;
    if (seen.size >= max) return "other";
    seen.add(connectionId);
    return connectionId;
  };
}
