import { randomUUID } from "node:crypto";
import { andThen, type Awaitable, isPromiseLike } from "./awaitable.js";
import { idSource } from "./domain/crypto.js";
import { IttyRouter } from "itty-router";
import { type Admin, createAdmin } from "./admin/index.js";
import { actorOf, assertKeyPlan, assertScope, authenticate, bearerToken, type Credential, storageSessions, unauthorized } from "./auth.js";
import { safeEqual } from "./domain/crypto.js";
import { createTokenHashes } from "./token-hashes.js";
import type { ApiSettings, HandlerContext, Ports } from "./context.js";
import type { AuditEvent } from "./domain/model.js";
import { isoTime } from "./domain/time.js";
import { ApiError } from "./errors.js";
import { checkDeclaredLength, checkText, isJsonType, parseJsonObject, parseJsonValue, payloadTooLarge, readLimited } from "./http/body.js";
import { parseQuery, type RawQuery, rawQuery } from "./http/query.js";
import { JSON_CONTENT_TYPE, Reply } from "./http/reply.js";
import type { ApiReply, ApiRequest, ReplyBody } from "./http/types.js";
import { createMemoryCache } from "./memory/cache.js";
import { systemClock } from "./memory/clock.js";
import { createMemoryRateLimiter } from "./memory/rate-limiter.js";
import { createMemoryStorage } from "./memory/storage.js";
import { toLogger } from "./logging.js";
import { createRequestObserver } from "./observe.js";
import type { Logger } from "./ports/logger.js";
import type { Metrics } from "./ports/metrics.js";
import { isRateLimit, takeRateToken } from "./rate-limit.js";
import { instrumentStorage } from "./timed-storage.js";
import type { ConnectorRegistry } from "./ports/connector.js";
import type { SessionAuthenticator } from "./ports/session.js";
import type { Storage } from "./ports/storage.js";
import { resolveClientAddress } from "./proxy.js";
import type { AuthedRoute, RouteDef } from "./routing.js";
import { adminMount, defaultConnectors, mounts } from "./routes.js";

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
   * every step answered synchronously (the memory store, a body the adapter
   * already holds), else a promise of it. Failures are error replies, as with `handle`.
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
  webhookRatePerSecond: 50,
  webhookRetainRows: 10_000,
  trustedProxies: [],
  tableSchemas: {},
  idempotencyWaitMs: 2000,
  apiRatePerSecond: 0,
  storageTimeoutMs: 0,
  upstreamTimeoutMs: 15_000,
  healthTimeoutMs: 2000,
  metricsToken: null,
  tokenHashCacheSize: 1024,
  adminToken: null,
  maxUploadBytes: 1024 * 1024 * 1024,
};

const CORS_ORIGIN = "*";
/** Routing results remembered by URL; the map starts over when full. */
const MATCH_CACHE_SIZE = 1000;
/** Longer URLs are routed afresh every time, so the cache holds at most about 256 KB of URLs. */
const MATCH_CACHE_URL_LENGTH = 256;
/** Response headers a browser script may read, named only when the response carries them (most carry just the id). */
const EXPOSABLE: ReadonlyArray<[string, string]> = [
  ["retry-after", "Retry-After"],
  ["ratelimit-limit", "RateLimit-Limit, RateLimit-Remaining, RateLimit-Reset"],
  ["idempotent-replayed", "Idempotent-Replayed"],
  ["www-authenticate", "WWW-Authenticate"],
];

/** Every combination's header value, built once: index bit i set when EXPOSABLE[i] is present. */
const EXPOSED_BY_MASK: readonly string[] = Array.from({ length: 1 << EXPOSABLE.length }, (_, mask) =>
  ["X-Request-Id", ...EXPOSABLE.filter((_, i) => mask & (1 << i)).map(([, exposed]) => exposed)].join(", "),
);

function exposedHeaders(headers: Record<string, string>): string {
  let mask = 0;
  for (let i = 0; i < EXPOSABLE.length; i++) if (EXPOSABLE[i]![0] in headers) mask |= 1 << i;
  return EXPOSED_BY_MASK[mask]!;
}

const PREFLIGHT_HEADERS: Record<string, string> = {
  "access-control-allow-methods": "GET, POST, PATCH, DELETE, OPTIONS",
  "access-control-allow-headers":
    "Content-Type, Authorization, Idempotency-Key, Cache-Control, X-Webhook-Signature, X-Hub-Signature-256, Webhook-Id, Webhook-Timestamp, Webhook-Signature",
  "access-control-max-age": "86400",
};

/** What routing reads and fills in: itty sets `params` and `query`; `decoded` says `params` is already percent-decoded. */
interface Probe {
  method: string;
  url: string;
  params?: Record<string, string>;
  query?: RawQuery;
  decoded?: boolean;
}

/** One request on its way through `dispatch`'s steps: what later steps, the error reply and `finish` read. Every field from the start, so its shape never changes. */
class Exchange {
  clientAddress: string | null = null;
  /** Routing fills it in without changing its shape. */
  readonly probe: Probe = { method: "GET", url: "", params: undefined, query: undefined, decoded: false };
  group: RouteGroup | undefined = undefined;
  route: RouteDef | undefined = undefined;
  params: Record<string, string> | undefined = undefined;
  credential: Credential | undefined = undefined;
  rateHeaders: Record<string, string> | undefined = undefined;
  failure: unknown = undefined;
  constructor(
    readonly req: ApiRequest,
    readonly requestId: string,
    /** performance.now() at the start, or -1: timed only when something reads the duration (the observer, or the usage log of a logged route). */
    public startedAt: number,
  ) {}
}

/** The query of a URL without one (shared, never written). */
const EMPTY_QUERY: RawQuery = Object.freeze(Object.create(null) as RawQuery);

interface RouteGroup {
  /** Mount and pattern, `/api/v1/datasets/:id/rows`: what logs, metrics and the usage log name. */
  template: string;
  byMethod: Map<string, RouteDef>;
  allow: string;
}

export function createDataApi(options: DataApiOptions = {}): DataApi {
  const settings: ApiSettings = { ...DEFAULT_SETTINGS };
  for (const key of Object.keys(DEFAULT_SETTINGS) as (keyof ApiSettings)[]) {
    if (options[key] !== undefined) (settings as unknown as Record<string, unknown>)[key] = options[key];
  }
  if (options.viewUrl === undefined && options.appUrl !== undefined) settings.viewUrl = options.appUrl;
  settings.appUrl = settings.appUrl.replace(/\/+$/, "");
  settings.viewUrl = settings.viewUrl.replace(/\/+$/, "");
  checkAdminToken(settings.adminToken);

  const clock = options.clock ?? systemClock;
  const metrics = options.metrics ?? null;
  // Wrapped only when a storage timeout or metrics ask for it; otherwise the store itself.
  const storage = instrumentStorage(options.storage ?? createMemoryStorage(), { timeoutMs: settings.storageTimeoutMs, metrics });
  const ports: Ports = {
    storage,
    clock,
    cache: options.cache ?? createMemoryCache({ clock }),
    rateLimiter: options.rateLimiter ?? createMemoryRateLimiter(),
    connectors: { ...defaultConnectors(), ...options.connectors },
  };
  const tokenHashes = createTokenHashes(settings.tokenHashCacheSize, clock);
  const sessions = options.sessions ?? storageSessions(storage, clock, tokenHashes);
  const logger = toLogger(options.logger);
  const log = (message: string, error?: unknown) => logger.error(message, error);
  const operations = { draining: false, metrics };
  const observe = createRequestObserver(logger, metrics, clock);
  const nextRequestId = idSource();

  const router = IttyRouter();
  const groups = new Map<string, RouteGroup>();
  const allRoutes: Array<{ mount: string; route: RouteDef }> = [];
  const admin = settings.adminToken === null ? null : createAdmin({ ports, settings });
  const adminToken = settings.adminToken === null ? null : Buffer.from(settings.adminToken, "utf8");
  for (const { base, routes } of admin === null ? mounts : [...mounts, adminMount]) {
    for (const route of routes) {
      allRoutes.push({ mount: base, route });
      const key = base + route.path;
      let group = groups.get(key);
      if (!group) {
        group = { template: key, byMethod: new Map(), allow: "" };
        groups.set(key, group);
        const found = group;
        router.all(key, () => found);
      }
      group.byMethod.set(route.method, route);
      group.allow = [...group.byMethod.keys(), "OPTIONS"].join(", ");
    }
  }

  // Routing results by request target (the adapter's path, else the URL), for
  // targets without a query string (the hot paths): itty's `fetch` parses a URL
  // and tries every pattern per request. Only the result for the same target
  // string is reused, so it is the same match; its path parameters are kept
  // decoded (and frozen: handlers only read them).
  const matches = new Map<string, { group: RouteGroup; params: Readonly<Record<string, string>> }>();
  // A hit answers without an await (one async hop less on the hot path).
  function cachedMatch(target: string, probe: Probe): RouteGroup | undefined {
    if (target.includes("?")) return undefined;
    const hit = matches.get(target);
    if (!hit) return undefined;
    probe.params = hit.params;
    probe.decoded = true;
    probe.query = EMPTY_QUERY;
    return hit.group;
  }
  /**
   * Route a target not remembered. The path is matched as sent: an adapter's
   * request target (`req.path`) is split at `?` by hand, never parsed as a
   * URL, because a URL parser resolves dot segments (`%2e%2e` included) and
   * `/api/webhooks/%2e%2e/v1/tables/{id}/rows` would be served by another
   * mount. A Web Request's URL was parsed by its runtime before it got here.
   */
  function match(target: string, probe: Probe): RouteGroup | undefined {
    let path: string;
    let search: string;
    if (target.startsWith("/")) {
      const hash = target.indexOf("#");
      const sent = hash < 0 ? target : target.slice(0, hash);
      const mark = sent.indexOf("?");
      path = mark < 0 ? sent : sent.slice(0, mark);
      search = mark < 0 ? "" : sent.slice(mark + 1);
    } else {
      const url = new URL(probe.url);
      path = url.pathname;
      search = url.search.slice(1);
    }
    probe.query = search === "" ? EMPTY_QUERY : rawQuery(new URLSearchParams(search));
    let group: RouteGroup | undefined;
    // itty compiles the patterns (`/datasets/:id/rows`); each route's one handler answers its group.
    for (const [, pattern, handlers] of router.routes) {
      const found = pattern.exec(path);
      if (found === null) continue;
      probe.params = found.groups ?? {};
      group = (handlers[0] as (request: Probe) => RouteGroup)(probe);
      break;
    }
    if (group && target.length <= MATCH_CACHE_URL_LENGTH && !target.includes("?")) {
      let decoded: Record<string, string> | null = null;
      try {
        decoded = decodeParams(probe.params ?? {});
      } catch {
        // Malformed percent-encoding or a refused character: not remembered; the request is refused below.
      }
      if (decoded !== null) {
        if (matches.size >= MATCH_CACHE_SIZE) matches.clear();
        matches.set(target, { group, params: Object.freeze(decoded) });
        probe.params = decoded;
        probe.decoded = true;
      }
    }
    return group;
  }

  function recordAudit(event: Omit<AuditEvent, "id" | "time"> & { time?: string }): void {
    const now = clock.now();
    const full: AuditEvent = { ...event, id: `evt_${randomUUID()}`, time: event.time ?? isoTime(now) };
    storage.appendAuditEvent(full, now).catch((error: unknown) => log("could not store an audit event", error));
  }

  /**
   * One request, start to finish, as a chain of steps (route, authenticate,
   * rate limit, read the body, run the handler). Each step continues at once
   * when the one before answered without a promise, so a request whose ports
   * all answer synchronously (the memory store, a body the adapter already
   * holds) is answered without a single microtask; otherwise the chain
   * continues when the promise settles. Every failure, thrown or rejected,
   * becomes the error envelope in `fail`.
   */
  function dispatch(req: ApiRequest): Awaitable<ApiReply> {
    const x = new Exchange(req, nextRequestId(), observe !== null ? performance.now() : -1);
    let answer: Awaitable<ApiReply>;
    try {
      x.clientAddress = resolveClientAddress(req.clientAddress, req.headers, settings.trustedProxies);
      answer = routeStep(x);
    } catch (error) {
      return finish(x, fail(x, error));
    }
    if (!isPromiseLike(answer)) return finish(x, answer);
    return Promise.resolve(answer).then(
      (reply) => finish(x, reply),
      (error: unknown) => finish(x, fail(x, error)),
    );
  }

  function routeStep(x: Exchange): Awaitable<ApiReply> {
    const target = x.req.path ?? x.req.url;
    const group = cachedMatch(target, x.probe);
    if (group !== undefined) return routed(x, group);
    if (!target.startsWith("/")) x.probe.url = x.req.url; // parsed only for a target that is not a path
    return routed(x, match(target, x.probe));
  }

  function routed(x: Exchange, group: RouteGroup | undefined): Awaitable<ApiReply> {
    x.group = group;
    const req = x.req;
    if (req.method === "OPTIONS") return { status: 204, headers: { ...PREFLIGHT_HEADERS }, body: null };
    if (!group) throw new ApiError(404, "not_found", "no such endpoint");
    const route = group.byMethod.get(req.method);
    if (!route) throw new ApiError(405, "method_not_allowed", `${req.method} is not allowed here`, { headers: { allow: group.allow } });
    x.route = route;
    if (x.startedAt < 0 && route.logged !== false) x.startedAt = performance.now();
    x.params = x.probe.decoded ? x.probe.params! : decodeParams(x.probe.params ?? {});
    if (route.auth === "admin") {
      checkAdminAuthorization(req.headers.get("authorization"), adminToken!);
      return run(x, route);
    }
    if (route.auth !== "bearer") return run(x, route);
    return andThen(authenticate(req.headers.get("authorization"), storage, sessions, tokenHashes), (credential) => {
      x.credential = credential;
      if (!isRateLimit(settings.apiRatePerSecond)) return authorized(x, route, credential);
      return andThen(takeApiToken(credential), (rateHeaders) => {
        x.rateHeaders = rateHeaders;
        return authorized(x, route, credential);
      });
    });
  }

  function authorized(x: Exchange, route: AuthedRoute<any, any>, credential: Credential): Awaitable<ApiReply> {
    assertKeyPlan(credential);
    assertScope(credential, route.scope);
    return run(x, route);
  }

  function run(x: Exchange, route: RouteDef): Awaitable<ApiReply> {
    const req = x.req;
    // One object per request (the hot path): the ports, the request's facts and, for bearer routes, the credential.
    const ctx: HandlerContext & { credential?: Credential; admin?: Admin; actorUserId: string | null } = {
      storage: ports.storage,
      cache: ports.cache,
      clock: ports.clock,
      rateLimiter: ports.rateLimiter,
      connectors: ports.connectors,
      settings,
      requestId: x.requestId,
      clientAddress: x.clientAddress,
      userAgent: req.headers.get("user-agent"),
      log,
      operations,
      audit: recordAudit,
      credential: x.credential,
      admin: route.auth === "admin" ? admin! : undefined,
      actorUserId: route.auth === "admin" ? req.headers.get("x-actor-user-id") : null,
    };
    const query = route.query ? parseQuery(route.query, x.probe.query ?? {}) : {};
    const params = x.params!;
    const bodyKind = route.body?.kind;
    if (bodyKind === undefined) return answer(route, { params, query, body: undefined, headers: req.headers }, ctx);
    if (bodyKind === "stream") {
      const contentType = checkBodyHeaders(req, bodyKind, settings.maxUploadBytes);
      const limit = settings.maxUploadBytes;
      const chunks = req.streamBody ? req.streamBody(limit) : wholeBody(req, limit);
      return answer(route, { params, query, body: { chunks, contentType }, headers: req.headers }, ctx);
    }
    const contentType = checkBodyHeaders(req, bodyKind, settings.maxBodyBytes);
    // The body as the adapter has it: at once when it already holds it, else when it has been read.
    return andThen(req.readBody(settings.maxBodyBytes), (bytes) => {
      const body = bodyKind === "raw" ? { bytes, contentType } : bodyKind === "json" ? parseJsonValue(bytes) : parseJsonObject(bytes);
      return answer(route, { params, query, body, headers: req.headers }, ctx);
    });
  }

  /** The handler's result as a reply. A handler may answer without a promise (GET /me for a key, a webhook on the memory store). */
  function answer(route: RouteDef, input: unknown, ctx: HandlerContext): Awaitable<ApiReply> {
    const result = (route.handle as (input: unknown, ctx: HandlerContext) => unknown)(input, ctx);
    return andThen(result, (value) =>
      // A Reply owns its headers object, so `finish` adds the edge's headers to it in place.
      value instanceof Reply ? value : { status: 200, headers: { "content-type": JSON_CONTENT_TYPE }, body: JSON.stringify(value) },
    );
  }

  /** The error envelope for a failure anywhere on the way; the API's own 5xx also reach the business feed. */
  function fail(x: Exchange, error: unknown): ApiReply {
    x.failure = error;
    const reply = errorReply(error, x.requestId, logger);
    // Without a credential no business can be named, so only the log in errorReply keeps it.
    const credential = x.credential;
    if (reply.status >= 500 && credential) {
      recordAudit({
        teamId: teamOf(credential, x.probe.query?.teamId),
        category: "error",
        action: "api.error",
        actor: actorOf(credential),
        target: x.route ? { type: "route", id: `${x.req.method} ${x.group!.template}` } : null,
        outcome: "failure",
        ip: x.clientAddress,
        userAgent: x.req.headers.get("user-agent"),
        details: { requestId: x.requestId, status: reply.status },
      });
    }
    return reply;
  }

  /** The headers every reply carries, the usage log and the observer. */
  function finish(x: Exchange, reply: ApiReply): ApiReply {
    const headers = reply.headers;
    const rateHeaders = x.rateHeaders;
    if (rateHeaders !== undefined) for (const name in rateHeaders) headers[name] ??= rateHeaders[name]!;
    headers["access-control-allow-origin"] = CORS_ORIGIN;
    headers["access-control-expose-headers"] = exposedHeaders(headers);
    headers["x-request-id"] = x.requestId;
    const { route, group, credential, req } = x;
    if (route && route.logged !== false && group) {
      const call = {
        at: isoTime(clock.now()),
        teamId: credential ? teamOf(credential, x.probe.query?.teamId) : null,
        credentialKind: credential ? credential.kind : ("anonymous" as const),
        credentialId: credential ? (credential.kind === "api-key" ? credential.key.id : credential.user.id) : null,
        credentialName: credential ? (credential.kind === "api-key" ? credential.key.name : credential.user.email) : null,
        method: req.method,
        route: group.template,
        objectId: x.params?.id ?? null,
        status: reply.status,
        latencyMs: x.startedAt < 0 ? 0 : Math.round(performance.now() - x.startedAt),
      };
      // Off the critical path: a failing usage log never fails or slows the request.
      try {
        storage.recordApiCall(call)?.catch((error: unknown) => log("could not record an API call", error));
      } catch (error) {
        log("could not record an API call", error);
      }
    }
    if (observe !== null) {
      observe(x.requestId, req.method, group ? group.template : null, reply.status, x.failure, performance.now() - x.startedAt, credential);
    }
    return reply;
  }

  /** The Data Access API's per-credential bucket (`apiRatePerSecond`, burst twice that), or 429. */
  function takeApiToken(credential: Credential): Awaitable<Record<string, string>> {
    const key = credential.kind === "api-key" ? `api:key:${credential.key.id}` : `api:user:${credential.user.id}`;
    return takeRateToken(ports.rateLimiter, key, settings.apiRatePerSecond, clock.now(), "too many requests for this credential; retry later");
  }

  return {
    dispatch,
    async handle(request) {
      return dispatch(request);
    },
    async fetch(request, context = {}) {
      const reply = await dispatch(fromWebRequest(request, context.clientAddress ?? null));
      return toWebResponse(reply);
    },
    ports,
    settings,
    routes: allRoutes,
    drain() {
      operations.draining = true;
    },
    get draining() {
      return operations.draining;
    },
  };
}

/** The team a call is counted for: a key's own team; for a session, the `teamId` it sent when it is a member, else its first team. */
function teamOf(credential: Credential, requestedTeamId?: string | string[]): string {
  if (credential.kind === "api-key") return credential.team.id;
  const requested = typeof requestedTeamId === "string" ? credential.memberships.find((m) => m.teamId === requestedTeamId) : undefined;
  return requested?.teamId ?? credential.memberships[0]?.teamId ?? "";
}

/** Path parameters percent-decoded: malformed encoding is 404; NUL or an unpaired surrogate is 400 invalid_parameter (checkText). */
function decodeParams(params: Record<string, string>): Record<string, string> {
  const out: Record<string, string> = Object.create(null);
  for (const key in params) {
    let value = params[key]!;
    if (value.includes("%")) {
      try {
        value = decodeURIComponent(value);
      } catch {
        throw new ApiError(404, "not_found", "no such endpoint");
      }
    }
    checkText(value, key);
    out[key] = value;
  }
  return out;
}

/** Refusals a body earns before it is read (declared length over the limit; a JSON route's media type). Returns the content type. */
function checkBodyHeaders(req: ApiRequest, kind: "json-object" | "json" | "raw" | "stream", limit: number): string | null {
  checkDeclaredLength(req.headers.get("content-length"), limit);
  const contentType = req.headers.get("content-type");
  if ((kind === "json-object" || kind === "json") && !isJsonType(contentType)) {
    throw new ApiError(415, "unsupported_media_type", "send the body as application/json");
  }
  return contentType;
}

/** A body the adapter can only hand over whole, as a stream of one chunk. */
async function* wholeBody(req: ApiRequest, limit: number): AsyncIterable<Uint8Array> {
  yield await req.readBody(limit);
}

/** The admin token: 24 or more printable ASCII characters, or none. */
function checkAdminToken(token: string | null): void {
  if (token !== null && (typeof token !== "string" || !/^[\x21-\x7e]{24,}$/.test(token))) {
    throw new TypeError("adminToken must be at least 24 printable characters (no spaces)");
  }
}

/** `Bearer <admin token>`, compared in constant time; anything else is 401. */
function checkAdminAuthorization(authorization: string | null, adminToken: Uint8Array): void {
  const token = authorization === null ? null : bearerToken(authorization);
  if (token === null || !safeEqual(Buffer.from(token, "utf8"), adminToken)) throw unauthorized("a valid admin token is required");
}

function errorReply(error: unknown, requestId: string, logger: Logger): ApiReply {
  let status = 500;
  let payload: Record<string, unknown>;
  let headers: Record<string, string> = {};
  if (error instanceof ApiError) {
    status = error.status;
    payload = { code: error.code, message: error.message };
    if (error.details) payload.details = error.details;
    headers = { ...error.headers };
  } else {
    logger.error("unexpected error", error, { requestId });
    payload = { code: "internal", message: "internal error" };
  }
  payload.requestId = requestId;
  return {
    status,
    headers: { "content-type": JSON_CONTENT_TYPE, ...headers },
    body: JSON.stringify({ error: payload }),
  };
}

/** Wrap a Web Request as an ApiRequest. */
export function fromWebRequest(request: Request, clientAddress: string | null): ApiRequest {
  return {
    method: request.method,
    url: request.url,
    headers: request.headers,
    signal: request.signal,
    clientAddress,
    async readBody(limit) {
      if (!request.body) return new Uint8Array(0);
      const reader = request.body.getReader();
      const chunks = {
        async *[Symbol.asyncIterator]() {
          for (;;) {
            const { done, value } = await reader.read();
            if (done) return;
            yield value;
          }
        },
      };
      return readLimited(chunks, limit, () => void reader.cancel().catch(() => {}));
    },
    async *streamBody(limit) {
      if (!request.body) return;
      const reader = request.body.getReader();
      let size = 0;
      try {
        for (;;) {
          const { done, value } = await reader.read();
          if (done) return;
          size += value.byteLength;
          if (size > limit) throw payloadTooLarge(limit);
          yield value;
        }
      } finally {
        // Stopped early (an error, a refusal, a consumer that gave up): let the sender go.
        void reader.cancel().catch(() => {});
      }
    },
  };
}

const encoder = new TextEncoder();

/** Turn an ApiReply into a Web Response; a streamed body becomes a ReadableStream that stops its source on cancel. */
export function toWebResponse(reply: ApiReply): Response {
  return new Response(toBodyInit(reply.body), { status: reply.status, headers: reply.headers });
}

function toBodyInit(body: ReplyBody): BodyInit | null {
  if (body === null || typeof body === "string") return body;
  if (body instanceof Uint8Array) return body as Uint8Array<ArrayBuffer>;
  const iterator = body[Symbol.asyncIterator]();
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      const { done, value } = await iterator.next();
      if (done) controller.close();
      else controller.enqueue(encoder.encode(value));
    },
    async cancel() {
      await iterator.return?.();
    },
  });
}
