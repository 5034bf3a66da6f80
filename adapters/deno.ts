import type { DataApi } from "../src/server/api.js";
import { DEFAULT_HOSTNAME, normalizeClientAddress } from "./address.js";

/** The part of Deno's `ServeHandlerInfo` this adapter uses. */
export interface DenoServeInfo {
  remoteAddr: { transport: string; hostname?: string; path?: string };
}

/** The part of `Deno.serve`'s options this adapter passes through. */
export interface DenoServeOptions {
  /** Default: Deno's (8000; 0 picks a free port). */
  port?: number;
  /** The interface to listen on. Default: `127.0.0.1`, this machine only; `0.0.0.0` (or `::`) for every interface. */
  hostname?: string;
  signal?: AbortSignal;
  onListen?: (address: { hostname: string; port: number }) => void;
}

/** What `Deno.serve` returns, as far as callers of `serveDeno` need it. */
export interface DenoServer {
  readonly addr: { hostname: string; port: number };
  readonly finished: Promise<void>;
  shutdown(): Promise<void>;
}

type DenoHandler = (request: Request, info: DenoServeInfo) => Promise<Response>;

/**
 * A handler for `Deno.serve`: the client address comes from
 * `info.remoteAddr` (a TCP peer's hostname, an IPv4-mapped `::ffff:a.b.c.d`
 * as `a.b.c.d`; null on a Unix socket).
 *
 *   Deno.serve({ port: 8787 }, toDenoHandler(api))
 *
 * The core is handed a copy of the request that never reads Deno's
 * `request.signal`: Deno 2 prints a deprecation notice ("request.signal aborts
 * on successful responses (legacy behavior)") the first time a handler that
 * read it answers, and that signal would fire after every successful answer.
 * A streamed answer still stops when the client goes away (its stream is
 * cancelled); a client leaving before the answer starts no longer cuts an
 * upstream query short, which ends at `upstreamTimeoutMs` instead.
 */
export function toDenoHandler(api: Pick<DataApi, "fetch">): DenoHandler {
  return (request, info) =>
    api.fetch(withoutDenoSignal(request), { clientAddress: normalizeClientAddress(info.remoteAddr.hostname) });
}

/** The same method, URL, headers and body stream, without touching `request.signal`. */
function withoutDenoSignal(request: Request): Request {
  const init: RequestInit & { duplex?: "half" } = { method: request.method, headers: request.headers };
  if (request.body !== null) {
    init.body = request.body;
    init.duplex = "half";
  }
  return new Request(request.url, init);
}

/**
 * `Deno.serve` with Dataport as its handler, on `127.0.0.1` unless `hostname`
 * says otherwise (Deno itself would listen on every interface). Only callable under Deno.
 */
export function serveDeno(api: Pick<DataApi, "fetch">, options: DenoServeOptions = {}): DenoServer {
  const deno = (globalThis as { Deno?: { serve(options: DenoServeOptions, handler: DenoHandler): DenoServer } }).Deno;
  if (!deno) throw new Error("serveDeno needs the Deno runtime; on Node use dataport/node");
  return deno.serve({ ...options, hostname: options.hostname ?? DEFAULT_HOSTNAME }, toDenoHandler(api));
}
