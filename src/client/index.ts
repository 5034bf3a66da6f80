export { createClient, type ClientOptions, type DataportClient, type PageOptions, type PollOptions, type RequestOptions } from "./client.js";
export {
  AuthenticationError,
  BadRequestError,
  ConflictError,
  DataportError,
  NetworkError,
  NotFoundError,
  PermissionDeniedError,
  RateLimitError,
  ServerError,
  TimeoutError,
  UnprocessableEntityError,
  type DataportErrorCode,
  type ErrorCode,
  type ErrorEnvelope,
  type RateLimitInfo,
  type ResponseMeta,
} from "./errors.js";
export { parseRetryAfter, type FetchLike, type RetryOptions } from "./transport.js";
export type * from "./types.js";
