export {
  createClient,
  type ClientOptions,
  type DataportClient,
  type PageOptions,
  type PollOptions,
  type RequestOptions,
  type TableRowsOptions,
} from "./client.js";
export {
  AuthenticationError,
  BadRequestError,
  ConflictError,
  DataportError,
  NetworkError,
  NotFoundError,
  PermissionDeniedError,
  PreconditionFailedError,
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
export { collect, type CollectOptions, type Paged } from "./paging.js";
export { CLIENT_VERSION } from "./runtime.js";
export {
  parseRetryAfter,
  RETRY_COUNT_HEADER,
  type FetchLike,
  type RequestInfo,
  type RetryOptions,
  type TransportConfig,
} from "./transport.js";
export type * from "./types.js";
