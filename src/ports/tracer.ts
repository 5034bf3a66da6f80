/**
 * The part of an OpenTelemetry tracer (`@opentelemetry/api`) Dataport uses,
 * written out so that Dataport's types never name the optional package:
 * any `trace.getTracer(name)` (a `Tracer` of the API, 1.x) is one.
 *
 * A host rarely passes it: when `@opentelemetry/api` is installed and the
 * host registered a tracer provider (the OpenTelemetry SDK's `NodeSDK`,
 * `NodeTracerProvider.register()`, …), Dataport takes its tracer from there
 * (`createDataApi`'s `tracer` option).
 */
export interface Tracer {
  /**
   * Starts a span as the OpenTelemetry API does: `context` is the API's
   * `Context` the span is a child of (the active one when absent).
   */
  startSpan(name: string, options?: SpanOptions, context?: unknown): Span;
}

/** What Dataport gives `startSpan`: a kind (the API's `SpanKind`: 1 server, 2 client, 0 internal) and attributes. */
export interface SpanOptions {
  kind?: number;
  attributes?: Record<string, string | number | boolean>;
}

/** The span methods Dataport calls. */
export interface Span {
  spanContext(): { traceId: string; spanId: string; traceFlags: number };
  setAttribute(key: string, value: string | number | boolean): unknown;
  setStatus(status: { code: number; message?: string }): unknown;
  updateName(name: string): unknown;
  recordException(exception: Error | string): unknown;
  end(): void;
}
