/**
 * One request, socket to store, in three files:
 *
 *   api.ts       (this file) the setup: settings, ports and the route table, once per API
 *   pipeline.ts  the staged pipeline every request runs through
 *   router.ts    routing: which route a request target falls in
 *
 * Adapters (adapters/node.ts, bun.ts, deno.ts) only convert their runtime's
 * request and response to and from the pipeline's; handlers (src/handlers)
 * are plain functions of their parsed input and the ports.
 */
import { createChangeRetention } from "../core/change-retention.js";
import { createChangeWatch } from "../core/change-watch.js";
import { type Admin, createAdmin } from "../admin/index.js";
import { storageSessions } from "../core/auth.js";
import { createCaches } from "../core/caches.js";
import type { Awaitable } from "../base/awaitable.js";
import type { ApiSettings } from "../context/settings.js";
import type { Ports } from "../context/ports.js";
import { createGuard } from "../core/guard.js";
import { createWebhookInbox } from "../core/webhook-inbox.js";
import { fromWebRequest, toWebResponse } from "../http/web.js";
import type { ApiReply, ApiRequest } from "../http/types.js";
import { toLogger } from "./logging.js";
import { createMemoryCache } from "../memory/cache.js";
import { systemClock } from "../base/clock.js";
import { createMemoryRateLimiter } from "../memory/rate-limiter.js";
import { createMemoryStorage } from "../memory/memory-storage.js";
import { createRequestObserver } from "./observe.js";
import type { ConnectorRegistry } from "../ports/connector.js";
import type { Logger } from "../ports/logger.js";
import type { Metrics } from "../ports/metrics.js";
import type { SessionAuthenticator } from "../ports/session.js";
import type { Storage } from "../ports/storage.js";
import { createPipeline } from "./pipeline.js";
import { createRouter } from "./router.js";
import { adminMount, defaultConnectors, mounts } from "../routes/index.js";
import type { RouteDef } from "../routes/route-def.js";
import { limiterWithPolicy } from "../core/rate-limit.js";
import { wrapStoreCalls } from "../sql/store-calls.js";
import type { Tracer } from "../ports/tracer.js";
import { createTracing, tracedCache, tracedConnectors } from "./tracing.js";

export interface DataApiOptions extends Partial<ApiSettings> {
  /** Where everything is persisted. Default: a fresh in-memory store. */
  storage?: Storage;
  cache?: Ports["cache"];
  clock?: Ports["clock"];
  rateLimiter?: Ports["rateLimiter"];
  /** Upstream connectors by connection type, merged over the built-in ones. */
  connectors?: ConnectorRegistry;
  /** Resolves session tokens. Default: sessions held in storage (the fixture's). */
  sessions?: SessionAuthenticator;
  /**
   * Where Dataport writes: `request(line)` once per request (optional; off
   * by default) and `error(message, error, { requestId })` for failures,
   * including the cause of every 500. Default: errors to console.error, no
   * request lines. A plain function receives errors only (the older form).
   */
  logger?: Logger | ((message: string, error?: unknown) => void);
  /**
   * Metrics sink, e.g. `createPrometheusMetrics()` from `dataport/metrics`;
   * served at `GET /api/metrics` (guarded by `metricsToken` when set).
   * Default: none (the endpoint answers 404 and nothing is measured).
   */
  metrics?: Metrics;
  /**
   * OpenTelemetry: the tracer Dataport's spans go to. Absent: the tracer
   * provider the host registered with `@opentelemetry/api` (the SDK's
   * `NodeSDK`, `NodeTracerProvider.register()`), when there is one — else no
   * tracing, and nothing of OpenTelemetry is loaded. `null`: no tracing even
   * then. A request is a SERVER span named after its route
   * (`GET /api/v1/datasets/{id}/rows`), a child of an incoming `traceparent`;
   * store calls, upstream queries and cache calls are its children; the
   * request log line carries `traceId` and `spanId`.
   */
  tracer?: Tracer | null;
}

/** What the transport reports about the client. */
export interface RequestContext {
  clientAddress?: string | null;
}

export interface DataApi {
  /** The Web-standard entry point: any runtime, any framework. */
  fetch(request: Request, context?: RequestContext): Promise<Response>;
  /** The lean entry point adapters use to skip building a Request/Response. */
  handle(request: ApiRequest): Promise<ApiReply>;
  /**
   * `handle` without the promise when none was needed: the reply itself when
   * the request waited for nothing (a preflight, a 404, a refusal before any
   * port was asked), else a promise of it. Failures are error replies, as with `handle`.
   */
  dispatch(request: ApiRequest): Awaitable<ApiReply>;
  readonly ports: Ports;
  readonly settings: ApiSettings;
  /** Every route, for documentation and tests. */
  readonly routes: ReadonlyArray<{ mount: string; route: RouteDef }>;
  /**
   * Start draining: from now on `/api/health/ready` answers 503 `draining`
   * so load balancers stop sending traffic; requests still arriving are
   * served. The host then stops accepting connections, lets in-flight
   * requests finish and closes the store (the example server does all of it on SIGTERM).
   */
  drain(): void;
  /** Whether `drain()` was called. */
  readonly draining: boolean;
}

export const DEFAULT_SETTINGS: ApiSettings = {
  appUrl: "http://127.0.0.1:8787",
  viewUrl: "http://127.0.0.1:8787",
  maxBodyBytes: 1024 * 1024,
  auditLagSeconds: 5,
  auditStallSeconds: 30,
  changeRetentionDays: 7,
  maxChangeWaiters: 1000,
  maxStreamSeconds: 300,
  webhookRatePerSecond: 50,
  webhookRetainRows: 10_000,
  inboxSize: 1000,
  inboxDays: 7,
  inboxBodyBytes: 256 * 1024,
  trustedProxies: [],
  tableSchemas: {},
  idempotencyWaitMs: 2000,
  apiRatePerSecond: 0,
  storageTimeoutMs: 0,
  rateLimitFailOpen: false,
  rateLimitHeaders: "limit-remaining-reset",
  upstreamTimeoutMs: 15_000,
  healthTimeoutMs: 2000,
  metricsToken: null,
  tokenHashCacheSize: 1024,
  adminToken: null,
  maxUploadBytes: 1024 * 1024 * 1024,
  compression: true,
  compressionMinBytes: 1024,
  allowPrivateUpstreams: true,
  csvEscapeFormulas: true,
};

export function createDataApi(options: DataApiOptions = {}): DataApi {
  return assembleDataApi(options, { mounts, adminMount });
}

/** What an API serves: its mounts, and the admin mount when an admin token is set. */
export interface RouteTable {
  mounts: ReadonlyArray<{ base: string; routes: readonly RouteDef[] }>;
  adminMount: { base: string; routes: readonly RouteDef[] };
}

/**
 * `createDataApi` over a route table of its own. Not exported from the
 * package: it lets a test serve a `/api/v2` mount beside `/api/v1` the way a
 * breaking change would ship (docs/versioning.md) before one exists.
 */
export function assembleDataApi(options: DataApiOptions, table: RouteTable): DataApi {
  const settings = settingsOf(options);
  const clock = options.clock ?? systemClock;
  const metrics = options.metrics ?? null;
  const logger = toLogger(options.logger);
  const tracing = createTracing(options.tracer, logger);
  // Wrapped only when a storage timeout, metrics or tracing ask for it; otherwise the store itself.
  const storage = wrapStoreCalls(options.storage ?? createMemoryStorage(), {
    timeoutMs: settings.storageTimeoutMs,
    metrics,
    tracing: tracing && ((name, attributes, call) => tracing.around(name, "internal", attributes, call)),
  });
  const cache = options.cache ?? createMemoryCache({ clock });
  const connectors = { ...defaultConnectors(settings), ...options.connectors };
  const ports: Ports = {
    storage,
    cache: tracing ? tracedCache(cache, tracing) : cache,
    clock,
    // A host's limiter (Redis) may fail; the in-process one cannot.
    rateLimiter: options.rateLimiter
      ? limiterWithPolicy(options.rateLimiter, {
          failOpen: settings.rateLimitFailOpen,
          log: (message, error) => logger.error(message, error),
        })
      : createMemoryRateLimiter(),
    connectors: tracing ? tracedConnectors(connectors, tracing) : connectors,
  };
  const caches = createCaches(settings, clock);
  const operations = {
    draining: false,
    metrics,
    changeWatch: createChangeWatch(storage, settings.maxChangeWaiters),
    changeRetention: createChangeRetention(storage, settings.changeRetentionDays, clock, (message, error) =>
      logger.error(message, error),
    ),
  };
  const inbox = createWebhookInbox({
    storage,
    clock,
    bounds: { size: settings.inboxSize, days: settings.inboxDays, bodyBytes: settings.inboxBodyBytes },
    log: (message, error) => logger.error(message, error),
  });
  const admin: { functions: Admin; token: Uint8Array } | null =
    settings.adminToken === null
      ? null
      : { functions: createAdmin({ ports, settings }), token: Buffer.from(settings.adminToken, "utf8") };
  const router = createRouter(admin === null ? table.mounts : [...table.mounts, table.adminMount]);
  const dispatch = createPipeline({
    router,
    ports,
    settings,
    sessions: options.sessions ?? storageSessions(storage, clock, caches.tokenHashes),
    caches,
    guard: createGuard(ports, { rateLimitHeaders: settings.rateLimitHeaders }),
    inbox,
    admin,
    logger,
    observe: createRequestObserver(logger, metrics, clock),
    operations,
    tracing,
  });

  return {
    dispatch,
    handle(request) {
      return Promise.resolve(dispatch(request));
    },
    async fetch(request, context = {}) {
      return toWebResponse(await dispatch(fromWebRequest(request, context.clientAddress ?? null)));
    },
    ports,
    settings,
    routes: router.routes,
    drain() {
      operations.draining = true;
      // Waiting change-feed requests answer now (an empty page), so the drain is not held up by them.
      operations.changeWatch.drain();
    },
    get draining() {
      return operations.draining;
    },
  };
}

/** The defaults with every option given over them; origins without a trailing slash. */
function settingsOf(options: DataApiOptions): ApiSettings {
  const settings: ApiSettings = { ...DEFAULT_SETTINGS };
  for (const key of Object.keys(DEFAULT_SETTINGS) as (keyof ApiSettings)[]) {
    if (options[key] !== undefined) (settings as unknown as Record<string, unknown>)[key] = options[key];
  }
  if (options.viewUrl === undefined && options.appUrl !== undefined) settings.viewUrl = options.appUrl;
  settings.appUrl = settings.appUrl.replace(/\/+$/, "");
  settings.viewUrl = settings.viewUrl.replace(/\/+$/, "");
  checkAdminToken(settings.adminToken);
  checkInboxBounds(settings);
  return settings;
}

/** The delivery log's bounds: positive integers (a log of at most 1,000,000 entries, 365 days, 16 MiB bodies). */
function checkInboxBounds(settings: ApiSettings): void {
  const limits = { inboxSize: 1_000_000, inboxDays: 365, inboxBodyBytes: 16 * 1024 * 1024 } as const;
  for (const [name, max] of Object.entries(limits) as [keyof typeof limits, number][]) {
    const value = settings[name];
    if (!Number.isInteger(value) || value < 1 || value > max)
      throw new TypeError(`${name} must be an integer from 1 to ${max.toLocaleString("en-US")}`);
  }
}

/** The admin token: 24 or more printable ASCII characters, or none. */
function checkAdminToken(token: string | null): void {
  if (token !== null && (typeof token !== "string" || !/^[\x21-\x7e]{24,}$/.test(token))) {
    throw new TypeError("adminToken must be at least 24 printable characters (no spaces)");
  }
}
