/**
 * One line per request, written after the reply is built. Built only from
 * facts the core already holds: the route TEMPLATE, never the URL, so no
 * query string, token, signature or path id reaches a log.
 */
export interface RequestLogLine {
  /** ISO 8601 time the request ended, on the API's clock. */
  time: string;
  /** Also the `X-Request-Id` header and the `requestId` of an error envelope. */
  requestId: string;
  method: string;
  /** The matched route with its mount (`/api/v1/datasets/:id/rows`); null when no route matched (404). */
  route: string | null;
  status: number;
  /** The envelope's `error.code` when the request failed, else null. */
  errorCode: string | null;
  /** Wall time spent in the core, ms (microsecond precision). A streamed body may still be flowing. */
  durationMs: number;
  credentialKind: "api-key" | "session-token" | "anonymous";
  /** The API key's id (never its token), or null. */
  keyId: string | null;
  /** The signed-in user's id for a session token, or null. */
  userId: string | null;
  /** With OpenTelemetry tracing on: the trace the request's span belongs to (32 hex), to join the line to it. */
  traceId?: string;
  /** With tracing on: the request's span (16 hex). */
  spanId?: string;
}

/** Context of an error line. */
export interface ErrorLogFields {
  /** The request during which it happened, when there is one. */
  requestId?: string;
}

/**
 * Where Dataport writes what it has to say. `request` is optional: without
 * it nothing is written per request, and the core pays one `if` for it.
 * `error` receives failures that must not fail a request (a usage-log
 * write, an audit append) and the cause of every 500, with its request id;
 * the client sees only the id.
 */
export interface Logger {
  request?(line: RequestLogLine): void;
  error(message: string, error?: unknown, fields?: ErrorLogFields): void;
  /**
   * Optional: what is worth telling while it goes on, not a failure — the
   * progress of a long upload (`upload progress`, with `requestId`,
   * `datasetId`, `rows`, `bytes`, `elapsedMs`). Without it nothing is written.
   */
  info?(message: string, fields: Record<string, unknown>): void;
}
