export { createClient, type ClientOptions, type DataportClient, type PageOptions, type PollOptions, type RequestOptions } from "./client.js";
export { DataportError, type ErrorEnvelope } from "./errors.js";
export { parseRetryAfter, type FetchLike, type RetryOptions } from "./transport.js";
export type * from "./types.js";
