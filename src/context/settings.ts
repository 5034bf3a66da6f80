import type { RateLimitHeaderStyle } from "../core/rate-limit.js";
import type { TableSchemas } from "../domain/validation.js";

/** Limits and addresses, every one with a default (see `createDataApi`). */
export interface ApiSettings {
  /** Application origin, e.g. `https://bi.example.com`; webhook URLs are built on it. */
  appUrl: string;
  /** Origin of published dashboards: `{viewUrl}/d/{id}`. */
  viewUrl: string;
  /** Largest request body in bytes, API and webhooks (default 1 MiB). */
  maxBodyBytes: number;
  /** Audit feed horizon in seconds (default 5). */
  auditLagSeconds: number;
  /**
   * How long an audit append still open may hold the feed back before the
   * feed counts as stalled, in seconds (default 30): readiness then says so
   * in `details.auditFeed` (without failing) and metrics show it.
   */
  auditStallSeconds: number;
  /**
   * How long the change feeds keep changes, in days (default 7): a cursor
   * older than that answers 410 `cursor_expired`. The log is trimmed now and
   * then by the requests that read or write it.
   */
  changeRetentionDays: number;
  /**
   * Change-feed requests waiting at once in this process (long-polls with
   * `wait`, and streams), at most (default 1000); beyond it a waiting
   * request answers 429 `rate_limited` with `Retry-After`.
   */
  maxChangeWaiters: number;
  /**
   * How long a change stream (Server-Sent Events) lasts before it ends, so clients reconnect through load balancers, in
   * seconds (default 300).
   */
  maxStreamSeconds: number;
  /** Per-connection webhook rate limit, requests per second; burst is twice this (default 50). */
  webhookRatePerSecond: number;
  /** Rows kept per webhook connection unless the connection says otherwise (default 10,000). */
  webhookRetainRows: number;
  /** Deliveries each webhook endpoint's delivery log keeps, the newest (default 1,000; webhook-inbox.md). */
  inboxSize: number;
  /** Days a delivery stays in its endpoint's log (default 7). */
  inboxDays: number;
  /** Bytes of a refused delivery's body the log keeps (default 256 KiB); the rest is cut (`bodyTruncated`). */
  inboxBodyBytes: number;
  /**
   * Client addresses of proxies whose `X-Forwarded-For` is believed. Empty
   * (the default) means the adapter's peer address is used as is.
   */
  trustedProxies: readonly string[];
  /**
   * Standard Schema validators (zod, valibot, arktype…) by input-table id,
   * per column and/or for the whole row; their issues answer 422
   * `validation_failed`. Default: none.
   */
  tableSchemas: Readonly<Record<string, TableSchemas>>;
  /**
   * How long a write whose `Idempotency-Key` is held by a request still
   * writing (its transaction not yet committed) waits for that request to
   * finish (and replays its response) before answering 409
   * `idempotency_key_in_use` with `Retry-After`, in ms (default 2000).
   */
  idempotencyWaitMs: number;
  /**
   * Per-credential limit of the Data Access API (`/api/v1`), requests per
   * second per API key or signed-in user; burst is twice this. 0 (the
   * default) turns it off.
   */
  apiRatePerSecond: number;
  /**
   * How long one storage call may take before the request ends with 503
   * `storage_unavailable`, in ms. 0 (the default) means no limit here and no
   * wrapper around the store: a store that talks over a network bounds its
   * own calls (the PostgreSQL store: `callTimeoutMs`, 10 s by default). Set
   * it for a host's own store that may hang. A streamed bulk row write is
   * not bounded as a whole (it lasts as long as its upload).
   */
  storageTimeoutMs: number;
  /**
   * What a rate-limited request gets when the rate limiter cannot be asked
   * (a shared Redis that is down): false (the default) answers 503
   * `rate_limiter_unavailable` with `Retry-After` (fail closed); true lets
   * requests through unlimited until the limiter is back (fail open). For
   * the API limit, webhook deliveries and upstream queries alike.
   */
  rateLimitFailOpen: boolean;
  /**
   * The rate-limit headers of limited answers (API calls when `apiRatePerSecond`
   * is set, webhook deliveries, upstream refusals): `limit-remaining-reset`
   * (the default, as before), `policy` for the current IETF draft's
   * `RateLimit-Policy: "api";q=100;w=2` and `RateLimit: "api";r=42;t=1`, or `both`.
   */
  rateLimitHeaders: RateLimitHeaderStyle;
  /** How long one upstream call may take before the query ends with 504 `upstream_timeout`, in ms (default 15,000). */
  upstreamTimeoutMs: number;
  /** How long each readiness check (`/api/health/ready`) may take before it counts as failed, in ms (default 2000). */
  healthTimeoutMs: number;
  /** Bearer token `GET /api/metrics` requires; null (the default) serves metrics without one. */
  metricsToken: string | null;
  /**
   * How many recently used valid tokens keep their SHA-256 in memory, for at
   * most five minutes, so a busy key is not re-hashed on every request
   * (default 1024; 0 hashes every time). The store is still asked on every
   * request, so a revocation applies at once; the cost is that those tokens
   * stay in this process's memory while they are remembered. Nothing is
   * written anywhere.
   */
  tokenHashCacheSize: number;
  /**
   * Bearer token of the admin HTTP API (`/api/admin/v1`), at least 24
   * printable characters; null (the default) leaves the admin API unmounted
   * (its paths answer 404).
   */
  adminToken: string | null;
  /** Largest bulk row upload (admin `…/datasets/{id}/rows`), in bytes; streamed, never held whole (default 1 GiB). */
  maxUploadBytes: number;
  /**
   * Compress answers by `Accept-Encoding` (brotli or gzip): rows pages,
   * downloads, the OpenAPI document, any text answer of `compressionMinBytes`
   * or more (default true). Turn it off when a proxy in front compresses.
   */
  compression: boolean;
  /**
   * Whole answers shorter than this are sent as they are, in bytes (default 1024); streamed ones are always compressed.
   */
  compressionMinBytes: number;
  /**
   * Whether connections may reach loopback and private networks (and local
   * sockets): true (the default) suits a host whose own people write the
   * connection URLs, its warehouse often being internal; false refuses them
   * when the URL is stored and again when the built-in connectors dial, for
   * a host whose customers bring their own databases. Link-local (cloud
   * metadata), unspecified and multicast addresses are refused either way.
   */
  allowPrivateUpstreams: boolean;
  /**
   * Whether a CSV export writes a text cell that a spreadsheet would run as
   * a formula (starting with `=`, `+`, `-`, `@`, a tab or a carriage return,
   * and not a plain number) with a leading `'` (default true). false writes
   * every text as stored, for hosts whose readers need the raw text.
   */
  csvEscapeFormulas: boolean;
}
