/** The error envelope every Dataport error carries. */
export interface ErrorEnvelope {
  error: {
    code: string;
    message: string;
    details?: Record<string, unknown>;
    requestId: string;
  };
}

/**
 * A non-2xx answer, raised by every client method. `code` and `details` come
 * from the envelope; an answer that is not an envelope (a proxy's HTML page)
 * has code `unexpected_response` and a null `envelope`.
 */
export class DataportError extends Error {
  readonly status: number;
  readonly code: string;
  readonly details: Record<string, unknown> | undefined;
  readonly requestId: string | null;
  readonly envelope: ErrorEnvelope | null;
  /** Seconds from `Retry-After`, when the server sent one. */
  readonly retryAfter: number | null;

  constructor(status: number, envelope: ErrorEnvelope | null, requestId: string | null, retryAfter: number | null) {
    super(envelope ? envelope.error.message : `unexpected response with status ${status}`);
    this.name = "DataportError";
    this.status = status;
    this.code = envelope ? envelope.error.code : "unexpected_response";
    this.details = envelope?.error.details;
    this.requestId = envelope?.error.requestId ?? requestId;
    this.envelope = envelope;
    this.retryAfter = retryAfter;
  }
}

export function isErrorEnvelope(value: unknown): value is ErrorEnvelope {
  if (!value || typeof value !== "object") return false;
  const error = (value as { error?: unknown }).error;
  return (
    !!error &&
    typeof error === "object" &&
    typeof (error as { code?: unknown }).code === "string" &&
    typeof (error as { message?: unknown }).message === "string"
  );
}
