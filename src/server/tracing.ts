import { ApiError } from "../base/api-error.js";
import { isPromiseLike } from "../base/awaitable.js";
import type { HeaderReader } from "../base/headers.js";
import type { ApiReply, ApiRequest, ReplyBody } from "../http/types.js";
import type { Cache } from "../ports/cache.js";
import type { Connector, ConnectorRegistry } from "../ports/connector.js";
import type { Logger } from "../ports/logger.js";
import type { Span, Tracer } from "../ports/tracer.js";
import { loadOpenTelemetry, type OpenTelemetryApi, tracerProviderRegistered } from "../peers/opentelemetry.js";

/**
 * OpenTelemetry, when the host uses it: one SERVER span per request, named
 * after its route template (`GET /api/v1/datasets/{id}/rows`) with the HTTP
 * semantic conventions' attributes, continuing the trace of an incoming
 * `traceparent`; child spans for store calls, upstream connector calls and
 * the cache, through the active context (the host's context manager: the
 * SDK's `NodeSDK` and `NodeTracerProvider.register()` install one).
 *
 * Without a tracer (no `@opentelemetry/api`, or no tracer provider
 * registered) `createTracing` answers null: nothing is loaded, nothing is
 * wrapped, and the request path pays one null check.
 */
export interface Tracing {
  /** The request's span, a child of the trace its headers carry (if any). */
  start(request: ApiRequest): RequestTrace;
  /** `run` inside the request's context, so the spans started under it are its children. */
  within<T>(trace: RequestTrace, run: () => T): T;
  /** A child span of the active one around `call`, ended when its result settles. */
  around<T>(name: string, kind: "internal" | "client", attributes: Attributes, call: () => T): T;
}

type Attributes = Record<string, string | number | boolean>;

/** The instrumentation scope's version: the package's (test/tracing.test.ts keeps them equal). */
export const INSTRUMENTATION_VERSION = "0.1.0";

/**
 * The tracing of a `tracer` option: a tracer of the host's choosing; null
 * turns tracing off; absent, the tracer provider the host registered with
 * `@opentelemetry/api`, when it did (else null, and nothing is loaded).
 */
export function createTracing(option: Tracer | null | undefined, logger: Logger): Tracing | null {
  if (option === null) return null;
  if (option === undefined && !tracerProviderRegistered()) return null;
  let api: OpenTelemetryApi;
  try {
    api = loadOpenTelemetry();
  } catch (error) {
    // Asked for: the host must hear which package is missing.
    if (option !== undefined) throw error;
    logger.error("a tracer provider is registered but Dataport cannot load @opentelemetry/api: requests are not traced", error);
    return null;
  }
  return otelTracing(api, option ?? api.trace.getTracer("dataport", INSTRUMENTATION_VERSION));
}

/** One request's span and what its log line and its end need. */
export class RequestTrace {
  readonly traceId: string;
  readonly spanId: string;

  constructor(
    readonly span: Span,
    /** The API's Context holding the span. */
    readonly context: unknown,
    private readonly routeName: (template: string) => string,
    /** The API's `SpanStatusCode.ERROR`. */
    private readonly errorCode: number,
  ) {
    const { traceId, spanId } = span.spanContext();
    this.traceId = traceId;
    this.spanId = spanId;
  }

  /**
   * The request's outcome on its span: the route (its name becomes `GET
   * /api/v1/…`), the status, the client, the failure of a 5xx. The span ends
   * now, or — a streamed body — once the body is sent or abandoned.
   */
  finish(reply: ApiReply, facts: { method: string; template: string | null; failure: unknown; clientAddress: string | null; requestId: string }): ApiReply {
    const { span } = this;
    const { status } = reply;
    if (facts.template !== null) {
      const route = this.routeName(facts.template);
      span.setAttribute("http.route", route);
      span.updateName(`${facts.method} ${route}`);
    }
    span.setAttribute("http.response.status_code", status);
    span.setAttribute("dataport.request_id", facts.requestId);
    if (facts.clientAddress !== null) span.setAttribute("client.address", facts.clientAddress);
    if (status >= 500) {
      const { failure } = facts;
      span.setAttribute("error.type", failure instanceof ApiError ? failure.code : String(status));
      if (failure !== undefined && !(failure instanceof ApiError)) span.recordException(failure instanceof Error ? failure : String(failure));
      // A server span's status is left unset below 500: a 4xx is the client's mistake, not a failure here.
      span.setStatus({ code: this.errorCode });
    }
    const { body } = reply;
    if (body === null || typeof body === "string" || body instanceof Uint8Array) {
      span.end();
      return reply;
    }
    return { status, headers: reply.headers, body: endingWith(body, span) };
  }
}

/** The body, ending `span` once it has been read to its end, failed or been abandoned. */
async function* endingWith(body: Exclude<ReplyBody, string | Uint8Array | null>, span: Span): AsyncGenerator<string | Uint8Array> {
  try {
    yield* body;
  } finally {
    span.end();
  }
}

/** HTTP methods the semantic conventions name; any other is `_OTHER`. */
const KNOWN_METHODS = new Set(["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "CONNECT", "TRACE"]);

function otelTracing(api: OpenTelemetryApi, tracer: Tracer): Tracing {
  const { context, propagation, trace, SpanKind, SpanStatusCode } = api;
  /** Route templates as OpenAPI writes them (`/datasets/:id` → `/datasets/{id}`), one per route. */
  const routes = new Map<string, string>();
  const routeName = (template: string) => {
    let name = routes.get(template);
    if (name === undefined) routes.set(template, (name = template.replace(/:([A-Za-z0-9_]+)\??/g, "{$1}")));
    return name;
  };
  const kinds = { internal: SpanKind.INTERNAL, client: SpanKind.CLIENT };

  return {
    start(request) {
      const parent = parentContext(request.headers);
      const method = KNOWN_METHODS.has(request.method) ? request.method : "_OTHER";
      const attributes: Attributes = { "http.request.method": method, "url.path": redactedPath(pathOf(request)) };
      if (method === "_OTHER") attributes["http.request.method_original"] = request.method;
      const userAgent = request.headers.get("user-agent");
      if (userAgent !== null) attributes["user_agent.original"] = userAgent;
      const span = tracer.startSpan(method === "_OTHER" ? "HTTP" : method, { kind: SpanKind.SERVER, attributes }, parent);
      return new RequestTrace(span, trace.setSpan(parent, span as never), routeName, SpanStatusCode.ERROR);
    },
    within(requestTrace, run) {
      return context.with(requestTrace.context as ReturnType<typeof context.active>, run);
    },
    around<T>(name: string, kind: "internal" | "client", attributes: Attributes, call: () => T): T {
      const span = tracer.startSpan(name, { kind: kinds[kind], attributes }, context.active());
      const failed = (error: unknown) => {
        span.recordException(error instanceof Error ? error : String(error));
        span.setStatus({ code: SpanStatusCode.ERROR, message: error instanceof Error ? error.message : String(error) });
        span.end();
      };
      let result: T;
      try {
        result = context.with(trace.setSpan(context.active(), span as never), call);
      } catch (error) {
        failed(error);
        throw error;
      }
      if (!isPromiseLike(result)) {
        span.end();
        return result;
      }
      return Promise.resolve(result).then(
        (value) => {
          span.end();
          return value;
        },
        (error: unknown) => {
          failed(error);
          throw error;
        },
      ) as unknown as T;
    },
  };

  /** The trace context the request carries: the host's propagator's reading, else its `traceparent` read here. */
  function parentContext(headers: HeaderReader) {
    const extracted = propagation.extract(context.active(), headers, HEADER_GETTER);
    if (trace.getSpanContext(extracted) !== undefined) return extracted;
    const parent = parseTraceparent(headers.get("traceparent"));
    return parent === null ? extracted : trace.setSpanContext(extracted, { ...parent, isRemote: true });
  }
}

/** How the API's propagators read Dataport's request headers. */
const HEADER_GETTER = {
  keys: (headers: HeaderReader) => (headers.keys ? [...headers.keys()] : ["traceparent", "tracestate", "baggage"]),
  get: (headers: HeaderReader, key: string) => headers.get(key) ?? undefined,
};

/**
 * A W3C `traceparent` (`00-<32 hex trace id>-<16 hex parent id>-<2 hex flags>`),
 * for a host that registered no propagator; null when absent or malformed
 * (all-zero ids and version `ff` are invalid).
 */
export function parseTraceparent(header: string | null): { traceId: string; spanId: string; traceFlags: number } | null {
  if (header === null) return null;
  const found = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(?:-|$)/.exec(header.trim());
  if (found === null) return null;
  const [, version, traceId, spanId, flags] = found as unknown as [string, string, string, string, string];
  if (version === "ff" || (version === "00" && header.trim().length !== 55)) return null;
  if (/^0+$/.test(traceId) || /^0+$/.test(spanId)) return null;
  return { traceId, spanId, traceFlags: Number.parseInt(flags, 16) & 1 };
}

function pathOf(request: ApiRequest): string {
  const target = request.path ?? request.url;
  const path = target.startsWith("/") ? target : new URL(target).pathname;
  const end = path.search(/[?#]/);
  return end < 0 ? path : path.slice(0, end);
}

/** A webhook endpoint's id is its secret address: traces get its template instead. */
function redactedPath(path: string): string {
  return path.replace(/(\/api\/webhooks\/)[^/]+/, "$1{id}");
}

/** The cache with a child span per call (`cache get`, `cache set`, …; the key is not recorded: it may hold a query). */
export function tracedCache(cache: Cache, tracing: Tracing): Cache {
  const wrapped = Object.create(cache) as Record<string, unknown>;
  for (const name of ["get", "set", "delete", "claimFlight", "releaseFlight"] as const) {
    const method = cache[name] as ((...args: unknown[]) => unknown) | undefined;
    if (typeof method !== "function") continue;
    const attributes = { "dataport.cache.operation": name };
    wrapped[name] = (...args: unknown[]) => tracing.around(`cache ${name}`, "internal", attributes, () => method.apply(cache, args));
  }
  return wrapped as unknown as Cache;
}

/** The connectors with a CLIENT span around every upstream query (`upstream postgres`), naming the connection. */
export function tracedConnectors(registry: ConnectorRegistry, tracing: Tracing): ConnectorRegistry {
  const traced: Record<string, Connector> = {};
  for (const [type, connector] of Object.entries(registry)) {
    const wrapped = Object.create(connector) as Connector;
    wrapped.query = (connection, query) =>
      tracing.around(`upstream ${type}`, "client", { "dataport.connection.id": connection.id, "dataport.connection.type": type }, () =>
        connector.query(connection, query),
      );
    traced[type] = wrapped;
  }
  return traced;
}
