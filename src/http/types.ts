/**
 * The lean request/response pair the core runs on. `api.fetch` wraps a Web
 * `Request` into an ApiRequest; the Node adapter builds one straight from
 * `IncomingMessage`, so no WHATWG Request or Response is materialised on
 * Node's hot path.
 */
import type { Awaitable } from "../base/awaitable.js";
import type { HeaderReader } from "../base/headers.js";

export interface ApiRequest {
  method: string;
  /** Absolute URL (scheme and host may be nominal). */
  url: string;
  /**
   * Optional: the request target as sent, path and query (`/api/v1/me`),
   * when the adapter has it without building `url`. Routing results are
   * remembered by it; `url` is then read only for a target not seen before.
   */
  path?: string;
  headers: HeaderReader;
  /**
   * Read the whole body, refusing more than `limit` bytes with 413 (the
   * reader stops as soon as the limit is crossed). An empty body is an
   * empty array. An adapter that already holds the whole body may answer
   * with it directly (or throw the 413) instead of a promise.
   */
  readBody(limit: number): Awaitable<Uint8Array>;
  /**
   * Optional: the body as it arrives, chunk by chunk, for routes that stream
   * it into storage (bulk row uploads) instead of holding it whole. Crossing
   * `limit` bytes makes the iteration throw 413; a client that goes away
   * makes it throw 400 (the body was cut off). Without it the core falls
   * back to `readBody`.
   */
  streamBody?(limit: number): AsyncIterable<Uint8Array>;
  /** Aborted when the client goes away. */
  signal?: AbortSignal;
  /** The peer address as the runtime reports it. */
  clientAddress: string | null;
}

/** A reply's body: whole (text or bytes), streamed (text chunks, or bytes once compressed), or none. */
export type ReplyBody = string | Uint8Array | AsyncIterable<string | Uint8Array> | null;

export interface ApiReply {
  status: number;
  /** Lower-case header names. */
  headers: Record<string, string>;
  body: ReplyBody;
}

/** A request body as it arrives, chunk by chunk (bulk uploads that must not be held whole). */
export interface StreamBody {
  chunks: AsyncIterable<Uint8Array>;
  contentType: string | null;
}

/** A request body as its exact bytes (webhook signatures are computed over them). */
export interface RawBody {
  bytes: Uint8Array;
  contentType: string | null;
  /**
   * The 413 of a body over the limit, for a route that answers it itself (`tooLarge: "handler"`); `bytes` is then
   * empty.
   */
  tooLarge?: Error;
}
