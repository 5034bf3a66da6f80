import type { Admin } from "./admin/index.js";
import type { Credential } from "./auth.js";
import type { Caches } from "./caches.js";
import type { AuditEvent } from "./domain/model.js";
import type { TableSchemas } from "./domain/validation.js";
import type { Guard } from "./guard.js";
import type { Cache } from "./ports/cache.js";
import type { Clock } from "./ports/clock.js";
import type { ConnectorRegistry } from "./ports/connector.js";
import type { Metrics } from "./ports/metrics.js";
import type { RateLimiter } from "./ports/rate-limiter.js";
import type { Storage } from "./ports/storage.js";

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
  /** Per-connection webhook rate limit, requests per second; burst is twice this (default 50). */
  webhookRatePerSecond: number;
  /** Rows kept per webhook connection unless the connection says otherwise (default 10,000). */
  webhookRetainRows: number;
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
   * How long a POST whose `Idempotency-Key` is held by a request still
   * running waits for that request to finish (and replays its response)
   * before answering 409 `idempotency_key_in_use`, in ms (default 2000).
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
}

/** The running API's own state, read by the operations routes (health, metrics) and the instrumented code. */
export interface Operations {
  /** True once `api.drain()` was called: readiness answers 503 `draining`. */
  readonly draining: boolean;
  /** Where measurements go, or null when metrics are off. */
  readonly metrics: Metrics | null;
}

/** The ports every handler receives. */
export interface Ports {
  storage: Storage;
  cache: Cache;
  clock: Clock;
  rateLimiter: RateLimiter;
  connectors: ConnectorRegistry;
}

/** Per-request context handed to a handler alongside its parsed input. */
export interface HandlerContext extends Ports {
  settings: ApiSettings;
  requestId: string;
  /** The client address (after trusted-proxy resolution). */
  clientAddress: string | null;
  userAgent: string | null;
  /** Log an error without failing the request. */
  log: (message: string, error?: unknown) => void;
  operations: Operations;
  /** Record an audit event without failing the request. */
  audit: (event: Omit<AuditEvent, "id" | "time"> & { time?: string }) => void;
  /** This API instance's caches (src/caches.ts). */
  caches: Caches;
  /** This API instance's connection guard: cached answers, single-flight, upstream rate limits (src/guard.ts). */
  guard: Guard;
}

/** Context of a route that requires a bearer credential. */
export interface AuthedContext extends HandlerContext {
  credential: Credential;
}

/** Context of an admin route: the admin functions, and who makes the change (`X-Actor-User-Id`). */
export interface AdminContext extends HandlerContext {
  admin: Admin;
  actorUserId: string | null;
}
