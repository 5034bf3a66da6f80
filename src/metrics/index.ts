export { createPrometheusMetrics, type PrometheusMetrics, type PrometheusMetricsOptions } from "./prometheus.js";
export type { CacheResult, Metrics, StorageOutcome, UpstreamOutcome } from "../ports/metrics.js";
