/** Error codes of the error envelope (docs/authentication-and-errors.md, "The error envelope"). */
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
 * The one error type: thrown anywhere, turned into the envelope
 * `{ error: { code, message, details?, requestId } }` in exactly one place
 * (`errorReply` in src/server/pipeline.ts).
 */
export class ApiError extends Error {
  readonly status: number;
  readonly code: ErrorCode;
  readonly details: Record<string, unknown> | undefined;
  readonly headers: Record<string, string> | undefined;

  constructor(
    status: number,
    code: ErrorCode,
    message: string,
    extra: { details?: Record<string, unknown>; headers?: Record<string, string>; cause?: unknown } = {},
  ) {
    super(message, extra.cause === undefined ? undefined : { cause: extra.cause });
    this.name = "ApiError";
    this.status = status;
    this.code = code;
    this.details = extra.details;
    this.headers = extra.headers;
  }
}

export const invalidParameter = (parameter: string, message: string, details: Record<string, unknown> = {}) =>
  new ApiError(400, "invalid_parameter", message, { details: { parameter, ...details } });

export const notFound = (what = "resource") => new ApiError(404, "not_found", `${what} not found`);

export const invalidBody = (message: string) => new ApiError(400, "invalid_body", message);

/**
 * The one answer of a store that cannot answer now (the storage port's fault
 * clause): 503 `storage_unavailable` with `Retry-After`. `message` says what
 * happened without naming a host, a user or a statement (the `cause` stays on
 * the error for the log). `retryAfterSeconds`: 1 for what passes in moments (a
 * deadline, a lost connection, a lock), longer where an operator must act (a
 * full disk).
 */
export function storageUnavailable(
  message = "the database is unavailable; retry later",
  options: { retryAfterSeconds?: number; cause?: unknown } = {},
): ApiError {
  return new ApiError(503, "storage_unavailable", message, {
    headers: { "retry-after": String(options.retryAfterSeconds ?? 1) },
    cause: options.cause,
  });
}

/** Whether `error` is that answer (`storageUnavailable`), however it was reached. */
export function isStorageUnavailable(error: unknown): error is ApiError {
  return error instanceof ApiError && error.code === "storage_unavailable";
}
