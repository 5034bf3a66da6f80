import type { Admin } from "../admin/index.js";
import {
  actorOf,
  assertKeyPlan,
  assertScope,
  authenticate,
  bearerToken,
  type Credential,
  unauthorized,
} from "../core/auth.js";
import { andThen, type Awaitable, isPromiseLike } from "../base/awaitable.js";
import type { Caches } from "../core/caches.js";
import type { ApiSettings } from "../context/settings.js";
import type { Ports } from "../context/ports.js";
import type { HandlerContext, Operations } from "../context/handler.js";
import { deprecationsOf } from "../routes/deprecation.js";
import { eventId, idSource, safeEqual } from "../domain/crypto.js";
import type { AuditEvent } from "../domain/model.js";
import { isoTime } from "../domain/time.js";
import { ApiError } from "../base/api-error.js";
import type { Guard } from "../core/guard.js";
import type { WebhookInbox } from "../core/webhook-inbox.js";
import { checkDeclaredLength, isJsonType, jsonBodyLimit, parseJsonObject, parseJsonValue } from "../http/body.js";
import { parseQuery } from "../http/query.js";
import { compressReply } from "../http/compression.js";
import { JSON_CONTENT_TYPE, Reply } from "../http/reply.js";
import type { ApiReply, ApiRequest, RawBody } from "../http/types.js";
import type { RequestObserver } from "./observe.js";
import type { RequestTrace, Tracing } from "./tracing.js";
import type { Logger } from "../ports/logger.js";
import type { SessionAuthenticator } from "../ports/session.js";
import { resolveClientAddress } from "./client-address.js";
import { isRateLimit, rateLimitHeaders, tokenBucket } from "../core/rate-limit.js";
import type { RouteMatch, Router } from "./router.js";
import type { AuthedRoute, RouteDef, RouteInput } from "../routes/route-def.js";

/** What the pipeline works with, built once by `createDataApi`. */
export interface PipelineParts {
  router: Router;
  ports: Ports;
  settings: ApiSettings;
  sessions: SessionAuthenticator;
  caches: Caches;
  guard: Guard;
  /** The webhook delivery log's writer of refusals. */
  inbox: WebhookInbox;
  /** The admin functions and token, when the admin API is mounted. */
  admin: { functions: Admin; token: Uint8Array } | null;
  logger: Logger;
  observe: RequestObserver | null;
  operations: Operations;
  /** OpenTelemetry, when the host uses it (src/server/tracing.ts); null otherwise. */
  tracing: Tracing | null;
}

/** One request on its way through the stages: what later stages, `fail` and `finish` read. */
class Exchange {
  readonly startedAt = performance.now();
  clientAddress: string | null = null;
  match: RouteMatch | null = null;
  route: RouteDef | null = null;
  params: Readonly<Record<string, string>> | null = null;
  credential: Credential | undefined = undefined;
  rateHeaders: Record<string, string> | null = null;
  failure: unknown = undefined;
  constructor(
    readonly req: ApiRequest,
    readonly requestId: string,
    /** The request's span, when tracing is on. */
    readonly trace: RequestTrace | null,
  ) {}
}

/**
 * The request pipeline: an ApiRequest in, its ApiReply out, in five stages.
 *
 *   1. route   the route table's entry for the method and target: a
 *              preflight is answered here; 404, 405; path parameters decoded
 *   2. admit   what the route asks of the caller: nothing, the admin token,
 *              or a bearer key or session, then its rate limit, plan and scope
 *   3. input   query and body, parsed as the route declares them
 *   4. run     the handler
 *   5. finish  its value as a reply (a plain value is 200 JSON), the headers
 *              every reply carries, the usage log, the observer
 *
 * A failure in any stage, thrown or rejected, becomes the error envelope
 * (`fail`) and is finished like any reply.
 *
 * The async rule (src/base/awaitable.ts): ports answer with promises, handlers
 * return a value or a promise; each stage continues at once when the one
 * before gave a plain value (`andThen`), so a request that waits for
 * nothing is answered without a promise and the adapter writes it at once.
 */
export function createPipeline(parts: PipelineParts): (req: ApiRequest) => Awaitable<ApiReply> {
  const { router, ports, settings, sessions, caches, guard, inbox, admin, logger, observe, operations, tracing } =
    parts;
  const { storage, clock } = ports;
  const nextRequestId = idSource();
  const log = (message: string, error?: unknown) => logger.error(message, error);
  const info = logger.info
    ? (message: string, fields: Record<string, unknown>) => logger.info!(message, fields)
    : undefined;
  /**
   * The usage log and audit writes failing because the store is away: one line per ten seconds, not one per request.
   */
  let unavailableLoggedAt = Number.NEGATIVE_INFINITY;
  const logRecordFailure = (message: string, error: unknown) => {
    if (error instanceof ApiError && error.code === "storage_unavailable") {
      const now = Date.now();
      if (now - unavailableLoggedAt < 10_000) return;
      unavailableLoggedAt = now;
    }
    log(message, error);
  };
  /** The headers of the deprecated routes (`route.deprecated`), by route. */
  const deprecations = deprecationsOf(
    router.routes.map(({ route }) => route),
    settings.appUrl,
  );
  /** How answers are compressed, or null when they are not (`compression: false`). */
  const compression = settings.compression ? { minBytes: settings.compressionMinBytes } : null;
  /** The Data Access API's per-credential bucket (`apiRatePerSecond`), or null when it is off. */
  const apiLimit = isRateLimit(settings.apiRatePerSecond) ? tokenBucket(settings.apiRatePerSecond) : null;

  // With tracing, each request runs inside its span's context; without, dispatch is called as it is.
  return tracing === null
    ? dispatch
    : (req) => {
        const trace = tracing.start(req);
        return tracing.within(trace, () => dispatch(req, trace));
      };

  function dispatch(req: ApiRequest, trace: RequestTrace | null = null): Awaitable<ApiReply> {
    const x = new Exchange(req, nextRequestId(), trace);
    let result: unknown;
    try {
      x.clientAddress = resolveClientAddress(req.clientAddress, req.headers, settings.trustedProxies);
      const route = routeStage(x);
      result =
        route === null
          ? preflight()
          : andThen(admit(x, route), () => andThen(input(x, route), (parsed) => run(x, route, parsed)));
    } catch (error) {
      return finish(x, fail(x, error));
    }
    if (!isPromiseLike(result)) return finish(x, replyOf(x, result));
    return Promise.resolve(result).then(
      (value) => finish(x, replyOf(x, value)),
      (error: unknown) => finish(x, fail(x, error)),
    );
  }

  /** Stage 1: the route, or null for a preflight (answered for any path). */
  function routeStage(x: Exchange): RouteDef | null {
    const { req } = x;
    const match = router.match(req.path ?? req.url);
    x.match = match;
    if (req.method === "OPTIONS") return null;
    if (match === null) throw new ApiError(404, "not_found", "no such endpoint");
    const route = match.group.byMethod.get(req.method);
    if (!route)
      throw new ApiError(405, "method_not_allowed", `${req.method} is not allowed here`, {
        headers: { allow: match.group.allow },
      });
    x.route = route;
    x.params = route.auth === "admin" ? adminParams(match) : match.params;
    return route;
  }

  /** Stage 2: the caller, as the route requires. */
  function admit(x: Exchange, route: RouteDef): Awaitable<void> {
    if (route.auth === "none") return;
    const authorization = x.req.headers.get("authorization");
    if (route.auth === "admin") return checkAdminAuthorization(authorization, admin!.token);
    return andThen(authenticate(authorization, storage, sessions, caches.tokenHashes), (credential) => {
      x.credential = credential;
      if (apiLimit === null) return authorize(credential, route);
      // One token from the credential's bucket, or 429.
      const key = credential.kind === "api-key" ? `api:key:${credential.key.id}` : `api:user:${credential.user.id}`;
      return andThen(ports.rateLimiter.take(key, apiLimit, clock.now()), (decision) => {
        x.rateHeaders = rateLimitHeaders(decision, apiLimit, API_REFUSAL, settings.rateLimitHeaders, "api");
        authorize(credential, route);
      });
    });
  }

  /** Stage 3: the handler's input. A body is read only once the caller is admitted. */
  function input(x: Exchange, route: RouteDef): Awaitable<RouteInput<unknown, unknown>> {
    const { req } = x;
    const params = x.params!;
    const query = route.query ? parseQuery(route.query, x.match!.query) : {};
    const kind = route.body?.kind;
    if (kind === undefined) return { params, query, body: undefined, headers: req.headers };
    if (kind === "stream") {
      const limit = settings.maxUploadBytes;
      const contentType = checkBodyHeaders(req, kind, limit);
      const chunks = req.streamBody ? req.streamBody(limit) : wholeBody(req, limit);
      return { params, query, body: { chunks, contentType }, headers: req.headers };
    }
    // Admin batches carry up to 10,000 items: their bodies may exceed the API's limit (jsonBodyLimit).
    const limit = jsonBodyLimit(route.auth, settings.maxBodyBytes);
    if (route.body!.kind === "raw" && route.body!.tooLarge === "handler")
      return rawBody(req, limit, (body) => ({ params, query, body, headers: req.headers }));
    const contentType = checkBodyHeaders(req, kind, limit);
    return andThen(req.readBody(limit), (bytes) => {
      const body =
        kind === "raw" ? { bytes, contentType } : kind === "json" ? parseJsonValue(bytes) : parseJsonObject(bytes);
      return { params, query, body, headers: req.headers };
    });
  }

  /** Stage 4: the handler, with the ports and the request's facts. */
  function run(x: Exchange, route: RouteDef, parsed: RouteInput<unknown, unknown>): unknown {
    const { req } = x;
    const isAdmin = route.auth === "admin";
    const ctx: HandlerContext & { credential?: Credential; admin?: Admin; actorUserId: string | null } = {
      storage,
      cache: ports.cache,
      clock,
      rateLimiter: ports.rateLimiter,
      connectors: ports.connectors,
      settings,
      requestId: x.requestId,
      clientAddress: x.clientAddress,
      userAgent: req.headers.get("user-agent"),
      // Called only by the few handlers that wait (an adapter may make the signal when first asked). A function,
      // not a getter: an object literal with an accessor costs about 0.6 µs per request to create, a closure 0.01.
      signal: () => req.signal,
      log,
      info,
      operations,
      audit: recordAudit,
      caches,
      guard,
      inbox,
      credential: x.credential,
      admin: isAdmin ? admin!.functions : undefined,
      actorUserId: isAdmin ? req.headers.get("x-actor-user-id") : null,
    };
    return (route.handle as (input: unknown, ctx: HandlerContext) => unknown)(parsed, ctx);
  }

  /**
   * A handler's value as a reply: a Reply as it is, anything else as 200 JSON (a value JSON cannot hold fails like a
   * stage).
   */
  function replyOf(x: Exchange, value: unknown): ApiReply {
    if (value instanceof Reply) return value;
    try {
      return { status: 200, headers: { "content-type": JSON_CONTENT_TYPE }, body: JSON.stringify(value) };
    } catch (error) {
      return fail(x, error);
    }
  }

  /** The error envelope for a failure in any stage; the API's own 5xx also reach the business feed. */
  function fail(x: Exchange, error: unknown): ApiReply {
    x.failure = error;
    const reply = errorReply(error, x.requestId, logger);
    // Without a credential no business can be named, so only the log in errorReply keeps it.
    const { credential } = x;
    if (reply.status >= 500 && credential) {
      void recordAudit({
        teamId: teamOf(credential, x.match?.query.teamId),
        category: "error",
        action: "api.error",
        actor: actorOf(credential),
        target: x.route ? { type: "route", id: `${x.req.method} ${x.match!.group.template}` } : null,
        outcome: "failure",
        ip: x.clientAddress,
        userAgent: x.req.headers.get("user-agent"),
        details: { requestId: x.requestId, status: reply.status },
      });
    }
    return reply;
  }

  /**
   * Stage 5: the headers every reply carries (a Reply owns its headers object, so they are added in
   * place), the usage log and the observer; then the body compressed when it is worth it.
   */
  function finish(x: Exchange, reply: ApiReply): Awaitable<ApiReply> {
    const { headers } = reply;
    const { route, match, credential, req } = x;
    if (x.rateHeaders !== null) for (const name in x.rateHeaders) headers[name] ??= x.rateHeaders[name]!;
    if (route?.deprecated !== undefined) Object.assign(headers, deprecations.get(route));
    headers["access-control-allow-origin"] = "*";
    headers["access-control-expose-headers"] = exposedHeaders(headers);
    headers["x-request-id"] = x.requestId;
    const durationMs = performance.now() - x.startedAt;
    if (route && route.logged !== false && match) {
      recordCall({
        at: isoTime(clock.now()),
        teamId: credential ? teamOf(credential, match.query.teamId) : null,
        credentialKind: credential ? credential.kind : "anonymous",
        credentialId: credential ? (credential.kind === "api-key" ? credential.key.id : credential.user.id) : null,
        credentialName: credential
          ? credential.kind === "api-key"
            ? credential.key.name
            : credential.user.email
          : null,
        method: req.method,
        route: match.group.template,
        objectId: x.params?.id ?? null,
        status: reply.status,
        latencyMs: Math.round(durationMs),
      });
    }
    const template = match ? match.group.template : null;
    observe?.(x.requestId, req.method, template, reply.status, x.failure, durationMs, credential, x.trace);
    if (x.trace !== null) {
      const facts = {
        method: req.method,
        template,
        failure: x.failure,
        clientAddress: x.clientAddress,
        requestId: x.requestId,
      };
      reply = x.trace.finish(reply, facts);
    }
    if (req.method === "HEAD") return withoutBody(reply);
    return compression === null ? reply : compressReply(reply, req.headers, compression);
  }

  /** The usage log, off the critical path: a failing write never fails or slows the request. */
  function recordCall(call: Parameters<typeof storage.usage.recordApiCall>[0]): void {
    void offPath("could not record an API call", () => storage.usage.recordApiCall(call));
  }

  /** An audit event the library writes (handlers' `ctx.audit`, 5xx), off the critical path like the usage log. */
  function recordAudit(event: Omit<AuditEvent, "id" | "time"> & { time?: string }): Promise<void> {
    const now = clock.now();
    const full: AuditEvent = { ...event, id: eventId(), time: event.time ?? isoTime(now) };
    return offPath("could not store an audit event", () => storage.audit.appendAuditEvent(full, now));
  }

  /** A record's write (the usage log, an audit event): never rejects and never throws; a failure is logged. */
  function offPath(message: string, write: () => Promise<void>): Promise<void> {
    try {
      return write().catch((error: unknown) => logRecordFailure(message, error));
    } catch (error) {
      logRecordFailure(message, error);
      return Promise.resolve();
    }
  }
}

const API_REFUSAL = "too many requests for this credential; retry later";

const PREFLIGHT_HEADERS: Readonly<Record<string, string>> = {
  "access-control-allow-methods": "GET, POST, PATCH, DELETE, OPTIONS",
  "access-control-allow-headers":
    "Content-Type, Authorization, Idempotency-Key, Cache-Control, If-None-Match, If-Match, X-Webhook-Signature, " +
    "X-Hub-Signature-256, Webhook-Id, Webhook-Timestamp, Webhook-Signature, Dataport-Retry-Count",
  "access-control-max-age": "86400",
};

function preflight(): Reply {
  return new Reply(204, null, { ...PREFLIGHT_HEADERS });
}

/**
 * A HEAD reply: the GET reply's status and headers, with the length its
 * body would have had, and no body (a streamed one is closed unread).
 */
function withoutBody(reply: ApiReply): ApiReply {
  const { body, headers } = reply;
  if (typeof body === "string") headers["content-length"] = String(Buffer.byteLength(body));
  else if (body instanceof Uint8Array) headers["content-length"] = String(body.byteLength);
  else if (body !== null) Promise.resolve(body[Symbol.asyncIterator]().return?.()).catch(() => {});
  return { status: reply.status, headers, body: null };
}

/** Response headers a browser script may read, named only when the response carries them (most carry just the id). */
const EXPOSABLE: ReadonlyArray<[header: string, exposed: string]> = [
  ["retry-after", "Retry-After"],
  ["ratelimit-limit", "RateLimit-Limit, RateLimit-Remaining, RateLimit-Reset"],
  ["ratelimit", "RateLimit, RateLimit-Policy"],
  ["idempotent-replayed", "Idempotent-Replayed"],
  ["www-authenticate", "WWW-Authenticate"],
  ["etag", "ETag"],
  ["deprecation", "Deprecation, Sunset, Link"],
];

function exposedHeaders(headers: Record<string, string>): string {
  let exposed = "X-Request-Id";
  for (const [name, names] of EXPOSABLE) if (name in headers) exposed += `, ${names}`;
  return exposed;
}

/**
 * The team a call is counted for: a key's own team; for a session, the `teamId` it sent when it is a member, else its
 * first team.
 */
function teamOf(credential: Credential, requestedTeamId?: string | string[]): string {
  if (credential.kind === "api-key") return credential.team.id;
  const requested =
    typeof requestedTeamId === "string" ? credential.memberships.find((m) => m.teamId === requestedTeamId) : undefined;
  return requested?.teamId ?? credential.memberships[0]?.teamId ?? "";
}

/**
 * An admin route's path parameters. Its ids are names (admin-api.md, Revision 2): one that cannot be
 * decoded or holds NUL is 422 `validation_failed` naming it (`$.id`), as any other malformed id, never 400 or 404.
 */
function adminParams(match: RouteMatch): Readonly<Record<string, string>> {
  const invalid = match.invalidParam();
  if (invalid !== null) {
    throw new ApiError(
      422,
      "validation_failed",
      `$.${invalid}: an id is 1 to 200 letters, digits, '_', '-', '.' or ':'`,
      {
        details: { path: `$.${invalid}` },
      },
    );
  }
  return match.params;
}

/** `Bearer <admin token>`, compared in constant time; anything else is 401. */
function checkAdminAuthorization(authorization: string | null, adminToken: Uint8Array): void {
  const token = authorization === null ? null : bearerToken(authorization);
  if (token === null || !safeEqual(Buffer.from(token, "utf8"), adminToken))
    throw unauthorized("a valid admin token is required");
}

/** What a credential must have besides being valid: a paid plan (keys) and the route's scope. */
function authorize(credential: Credential, route: AuthedRoute<unknown, unknown>): void {
  assertKeyPlan(credential);
  assertScope(credential, route.scope);
}

/**
 * Refusals a body earns before it is read (declared length over the limit; a JSON route's media type). Returns the
 * content type.
 */
function checkBodyHeaders(
  req: ApiRequest,
  kind: "json-object" | "json" | "raw" | "stream",
  limit: number,
): string | null {
  checkDeclaredLength(req.headers.get("content-length"), limit);
  const contentType = req.headers.get("content-type");
  if ((kind === "json-object" || kind === "json") && !isJsonType(contentType)) {
    throw new ApiError(415, "unsupported_media_type", "send the body as application/json");
  }
  return contentType;
}

/** A raw body, or its 413 handed to the handler (`RawBody.tooLarge`) instead of failing the stage. */
function rawBody<T>(req: ApiRequest, limit: number, input: (body: RawBody) => T): Awaitable<T> {
  const contentType = req.headers.get("content-type");
  const tooLarge = (error: unknown): T => {
    if (!(error instanceof ApiError) || error.status !== 413) throw error;
    return input({ bytes: new Uint8Array(0), contentType, tooLarge: error });
  };
  let read: Awaitable<Uint8Array>;
  try {
    checkDeclaredLength(req.headers.get("content-length"), limit);
    read = req.readBody(limit);
  } catch (error) {
    return tooLarge(error);
  }
  if (!isPromiseLike(read)) return input({ bytes: read, contentType });
  return Promise.resolve(read).then((bytes) => input({ bytes, contentType }), tooLarge);
}

/** A body the adapter can only hand over whole, as a stream of one chunk. */
async function* wholeBody(req: ApiRequest, limit: number): AsyncIterable<Uint8Array> {
  yield await req.readBody(limit);
}

/**
 * The error envelope: an ApiError as it says; anything else is logged with the request id and becomes a 500 that
 * reveals nothing.
 */
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
