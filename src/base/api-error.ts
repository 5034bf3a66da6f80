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
