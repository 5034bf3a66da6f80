import type { ConnectionRecord, Row } from "../domain/model.js";

/**
 * A query against an upstream source, normalised by the API edge: every
 * field is present and already range-checked (`limit` ≥ 1, `offset` ≥ 0).
 */
export interface ConnectorQuery {
  /** The dataset's upstream source (table name, layer id). */
  source: string | null;
  /** Rows to return at most. A connector MUST NOT return more. */
  limit: number;
  offset: number;
  /**
   * Exact matches (JSON equality, column name to value); null means none.
   * Keys are untrusted: a connector checks them against the source's real
   * columns and throws `InvalidQueryError("filters", …)` for an unknown one.
   */
  filters: Record<string, unknown> | null;
  /** Sort column, untrusted like the filter keys (`InvalidQueryError("orderBy", …)`). */
  orderBy: string | null;
  orderDirection: "ASC" | "DESC";
  /** `rows` is tabular; `geojson` only when `isSpatial` says so. */
  format: "rows" | "geojson";
  /**
   * Upstream parameters passed unchanged (GeoJSON only). They MUST NOT be
   * able to change the host, scheme, port or path of the upstream call.
   */
  params: Record<string, unknown> | null;
  signal?: AbortSignal;
}

export type ConnectorResult =
  /** `hasMore`: rows beyond `offset + limit` may exist. */
  | { kind: "rows"; rows: Row[]; hasMore: boolean }
  /**
   * The upstream's FeatureCollection, untouched. `truncated`: the upstream
   * capped the response at its fixed record count (more features exist).
   */
  | { kind: "geojson"; featureCollection: { features: unknown[] } & Record<string, unknown>; truncated: boolean };

/**
 * Guard settings of a connection, each with a default. A connection's
 * `config` may set any of them (`config.cacheTtlSeconds`, …); a connector may
 * set its own defaults.
 */
export interface GuardSettings {
  /** How long a result is answered from the cache (`cached: true`), seconds. */
  cacheTtlSeconds: number;
  /** How long the last good result is kept to be served `stale: true`, seconds. */
  staleTtlSeconds: number;
  /** Upstream calls per second for the connection (token bucket refill). */
  ratePerSecond: number;
  /** Upstream calls allowed in a burst. */
  burst: number;
}

/** An upstream source type (memory, postgres, arcgis, or a host's own). */
export interface Connector {
  /** Whether `format=geojson` is available for this source of the connection. */
  isSpatial(connection: ConnectionRecord, source: string | null): boolean;
  /**
   * Answer a query. Failures are reported with the typed errors below:
   * `UpstreamThrottledError` (the guard then serves the last good result),
   * `UpstreamUnavailableError` (502 to the client), `InvalidQueryError`
   * (400 naming the parameter). Anything else is a 500 that reveals nothing.
   */
  query(connection: ConnectionRecord, query: ConnectorQuery): Promise<ConnectorResult>;
  /** Guard defaults for this connector's connections (the connection's config wins). */
  guardDefaults?: Partial<GuardSettings>;
  /** Release pools and sockets (a host calls it on shutdown). */
  close?(): Promise<void>;
}

/** Connectors by connection type. */
export type ConnectorRegistry = Readonly<Record<string, Connector>>;

/** The upstream refused for now (HTTP 429, too many connections). */
export class UpstreamThrottledError extends Error {
  /** Seconds the upstream asked to wait, when it said. */
  readonly retryAfterSeconds: number | null;
  constructor(message = "the upstream is throttling requests", retryAfterSeconds: number | null = null) {
    super(message);
    this.name = "UpstreamThrottledError";
    this.retryAfterSeconds = retryAfterSeconds;
  }
}

/**
 * The upstream could not answer: unreachable, timed out, an error status or
 * an error body, a response too large. The message is shown to the client,
 * so it names the failure without secrets (never a connection string).
 */
export class UpstreamUnavailableError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "UpstreamUnavailableError";
  }
}

/** The query itself is wrong for this source (unknown column, a value the column cannot hold). */
export class InvalidQueryError extends Error {
  readonly parameter: string;
  constructor(parameter: string, message: string) {
    super(message);
    this.name = "InvalidQueryError";
    this.parameter = parameter;
  }
}
