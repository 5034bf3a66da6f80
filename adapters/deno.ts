import type { DataApi } from "../src/api.js";

/** The part of Deno's `ServeHandlerInfo` this adapter uses. */
export interface DenoServeInfo {
  remoteAddr: { transport: string; hostname?: string; path?: string };
}

/** The part of `Deno.serve`'s options this adapter passes through. */
export interface DenoServeOptions {
  port?: number;
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
 * `info.remoteAddr` (a TCP peer's hostname; null on a Unix socket).
 *
 *   Deno.serve({ port: 8787 }, toDenoHandler(api))
 */
export function toDenoHandler(api: Pick<DataApi, "fetch">): DenoHandler {
  return (request, info) => api.fetch(request, { clientAddress: info.remoteAddr.hostname ?? null });
}

/** `Deno.serve` with Dataport as its handler. Only callable under Deno. */
export function serveDeno(api: Pick<DataApi, "fetch">, options: DenoServeOptions = {}): DenoServer {
  const deno = (globalThis as { Deno?: { serve(options: DenoServeOptions, handler: DenoHandler): DenoServer } }).Deno;
  if (!deno) throw new Error("serveDeno needs the Deno runtime; on Node use dataport/node");
  return deno.serve(options, toDenoHandler(api));
}
