/**
 * Codes of the error envelope, as the server sends them (the server's `ErrorCode`; a type test keeps the two equal).
 */
export type ErrorCode =
  | "invalid_parameter"
  | "invalid_body"
  | "team_required"
  | "unauthorized"
  | "invalid_signature"
  | "plan_required"
  | "insufficient_scope"
  | "forbidden"
  | "not_found"
  | "method_not_allowed"
  | "conflict"
  | "precondition_failed"
  | "idempotency_key_in_use"
  | "payload_too_large"
  | "unsupported_media_type"
  | "validation_failed"
  | "idempotency_key_reused"
  | "cursor_expired"
  | "rate_limited"
  | "upstream_unavailable"
  | "storage_unavailable"
  | "rate_limiter_unavailable"
  | "upstream_timeout"
  | "internal";

/**
 * Every code a `DataportError` carries: the server's, and three of the
 * client's own — `timeout` (no answer within `timeoutMs`), `network_error`
 * (the request never got an answer) and `unexpected_response` (an answer
 * that is not what the API sends: a proxy's HTML page, a 200 that is not JSON).
 */
export type DataportErrorCode = ErrorCode | "timeout" | "network_error" | "unexpected_response";

/** The error envelope every Dataport error carries. */
export interface ErrorEnvelope {
  error: {
    code: ErrorCode;
    message: string;
    details?: Record<string, unknown>;
    requestId: string;
  };
}

/** `RateLimit-*` headers, when the server sent them. */
export interface RateLimitInfo {
  /** Requests allowed in the window. */
  limit: number;
  /** Requests left in the window. */
  remaining: number;
  /** Seconds until the window resets. */
  resetSeconds: number;
}

/** What an answer said besides its body: read with `client.meta(result)`, `onResponse`, or `error.meta`. */
export interface ResponseMeta {
  status: number;
  /** `X-Request-Id`: quote it when reporting a problem. */
  requestId: string | null;
  rateLimit: RateLimitInfo | null;
  /** Seconds from `Retry-After`, when sent. */
  retryAfter: number | null;
  /** Requests made for this call (1 without retries). */
  attempts: number;
  /** Milliseconds from sending the first attempt to the end of the last answer, retry waits included. */
  durationMs: number;
  headers: Headers;
}

/**
 * Raised by every client method for anything but a successful answer.
 * `code` and `details` come from the envelope. Subclasses name the common
 * cases (`NotFoundError`, `RateLimitError`, `TimeoutError`, …) for
 * `instanceof`; every one is a `DataportError` named "DataportError".
 * Errors the client raises itself (timeout, network) have status 0.
 */
export class DataportError extends Error {
  readonly status: number;
  readonly code: DataportErrorCode;
  readonly details: Record<string, unknown> | undefined;
  readonly requestId: string | null;
  readonly envelope: ErrorEnvelope | null;
  /** Seconds from `Retry-After`, when the server sent one. */
  readonly retryAfter: number | null;
  /** The answer's metadata; null when there was no answer (timeout, network). */
  readonly meta: ResponseMeta | null;

  constructor(
    status: number,
    envelope: ErrorEnvelope | null,
    requestId: string | null,
    retryAfter: number | null,
    extra: { code?: DataportErrorCode; message?: string; meta?: ResponseMeta | null; cause?: unknown } = {},
  ) {
    super(
      extra.message ?? (envelope ? envelope.error.message : `unexpected response with status ${status}`),
      extra.cause === undefined ? undefined : { cause: extra.cause },
    );
    this.name = "DataportError";
    this.status = status;
    this.code = envelope ? envelope.error.code : (extra.code ?? "unexpected_response");
    this.details = envelope?.error.details;
    this.requestId = envelope?.error.requestId ?? requestId;
    this.envelope = envelope;
    this.retryAfter = retryAfter;
    this.meta = extra.meta ?? null;
  }

  /** The rate limit the answer reported, if any. */
  get rateLimit(): RateLimitInfo | null {
    return this.meta?.rateLimit ?? null;
  }
}

/** 400: `invalid_parameter` (details.parameter names it), `invalid_body`, `team_required`. */
export class BadRequestError extends DataportError {}
/** 401: `unauthorized` — a wrong, revoked or expired token. */
export class AuthenticationError extends DataportError {}
/** 403: `plan_required`, `insufficient_scope`, `forbidden`. */
export class PermissionDeniedError extends DataportError {}
/** 404: `not_found` — unknown, or out of the credential's reach (indistinguishable). */
export class NotFoundError extends DataportError {}
/** 409: `conflict` (details.current holds the current row), `idempotency_key_in_use`. */
export class ConflictError extends DataportError {}
/** 412: `precondition_failed` — `If-Match` named a version the row no longer has (details.current holds the row). */
export class PreconditionFailedError extends DataportError {}
/** 422: `validation_failed`, `idempotency_key_reused`. */
export class UnprocessableEntityError extends DataportError {}
/** 429: `rate_limited`, raised once the retries (or `maxRetryAfterMs`) are spent. */
export class RateLimitError extends DataportError {}
/** 5xx: `internal`, `upstream_unavailable`, `storage_unavailable`, `rate_limiter_unavailable`, `upstream_timeout`. */
export class ServerError extends DataportError {}
/** No answer within `timeoutMs` (after the retries): code `timeout`, status 0. */
export class TimeoutError extends DataportError {}
/** The request got no answer (DNS, refused, reset): code `network_error`, status 0, the failure as `cause`. */
export class NetworkError extends DataportError {}

const BY_STATUS: Record<number, typeof DataportError> = {
  400: BadRequestError,
  401: AuthenticationError,
  403: PermissionDeniedError,
  404: NotFoundError,
  409: ConflictError,
  412: PreconditionFailedError,
  422: UnprocessableEntityError,
  429: RateLimitError,
};

/** The error for a non-2xx answer, of the class its status names. */
export function errorForResponse(status: number, envelope: ErrorEnvelope | null, meta: ResponseMeta): DataportError {
  const Class = BY_STATUS[status] ?? (status >= 500 ? ServerError : DataportError);
  return new Class(status, envelope, meta.requestId, meta.retryAfter, { meta });
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
