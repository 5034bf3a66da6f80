import type { Credential } from "../core/auth.js";
import { isoTime } from "../domain/time.js";
import { ApiError } from "../base/api-error.js";
import type { Clock } from "../base/clock.js";
import type { Logger, RequestLogLine } from "../ports/logger.js";
import type { Metrics } from "../ports/metrics.js";
import { WEBHOOK_ROUTE } from "../routes/webhooks.js";
import { countedRefusals } from "../handlers/webhooks.js";

/**
 * Called once at the end of every request with facts `handle` already
 * holds. `failure` is what the request threw (undefined when it did not).
 */
export type RequestObserver = (
  requestId: string,
  method: string,
  route: string | null,
  status: number,
  failure: unknown,
  durationMs: number,
  credential: Credential | undefined,
  /** The request's span, when tracing is on: its ids join the line to the host's traces. */
  trace: { traceId: string; spanId: string } | null,
) => void;

/**
 * The per-request hook, or null when there is nobody to tell (no request
 * logger, no metrics): `handle` then pays one `if`. The line is built once
 * and handed to both. A logger or metrics sink that throws never fails the
 * request; the error goes to `logger.error`.
 */
export function createRequestObserver(logger: Logger, metrics: Metrics | null, clock: Clock): RequestObserver | null {
  const writeLine = logger.request ? (line: RequestLogLine) => logger.request!(line) : null;
  if (writeLine === null && metrics === null) return null;
  return (requestId, method, route, status, failure, durationMs, credential, trace) => {
    const line: RequestLogLine = {
      time: isoTime(clock.now()),
      requestId,
      method,
      route,
      status,
      errorCode: failure === undefined ? null : failure instanceof ApiError ? failure.code : "internal",
      durationMs: Math.round(durationMs * 1000) / 1000,
      credentialKind: credential ? credential.kind : "anonymous",
      keyId: credential?.kind === "api-key" ? credential.key.id : null,
      userId: credential?.kind === "session-token" ? credential.user.id : null,
    };
    if (trace !== null) {
      line.traceId = trace.traceId;
      line.spanId = trace.spanId;
    }
    try {
      if (metrics !== null) {
        metrics.request(line);
        // A refusal of a known endpoint was counted by the receiver, with its connection.
        if (route === WEBHOOK_ROUTE && method === "POST" && line.errorCode !== null && !isCounted(failure))
          metrics.webhook("rejected", line.errorCode, null);
      }
      if (writeLine !== null) writeLine(line);
    } catch (error) {
      try {
        logger.error("could not log or count a request", error, { requestId });
      } catch {
        // A logger that fails on errors too has nowhere left to report.
      }
    }
  };
}

function isCounted(failure: unknown): boolean {
  return failure !== null && typeof failure === "object" && countedRefusals.has(failure);
}
