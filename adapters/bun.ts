import type { DataApi } from "../src/server/api.js";
import { DEFAULT_HOSTNAME, normalizeClientAddress } from "./address.js";

/** The part of Bun's `Server` this adapter uses. */
export interface BunServerLike {
  requestIP(request: Request): { address: string; family: string; port: number } | null;
}

/** The part of `Bun.serve`'s options this adapter passes through. */
export interface BunServeOptions {
  /** Default: Bun's (3000; 0 picks a free port). */
  port?: number;
  /** The interface to listen on. Default: `127.0.0.1`, this machine only; `0.0.0.0` (or `::`) for every interface. */
  hostname?: string;
  /** Seconds a connection may stay idle (Bun's default is 10). */
  idleTimeout?: number;
}

/** What `Bun.serve` returns, as far as callers of `serveBun` need it. */
export interface BunServer extends BunServerLike {
  readonly port: number;
  readonly hostname: string;
  readonly url: URL;
  stop(closeActiveConnections?: boolean): Promise<void> | void;
}

type BunFetch = (request: Request, server: BunServerLike) => Promise<Response>;

/**
 * A `fetch` handler for `Bun.serve`: the client address comes from
 * `server.requestIP(request)` (an IPv4-mapped `::ffff:a.b.c.d` as `a.b.c.d`);
 * everything else is the core's.
 *
 *   Bun.serve({ port: 8787, fetch: toBunHandler(api) })
 */
export function toBunHandler(api: Pick<DataApi, "fetch">): BunFetch {
  return (request, server) =>
    api.fetch(request, { clientAddress: normalizeClientAddress(server.requestIP(request)?.address) });
}

/**
 * `Bun.serve` with Dataport as its fetch handler, on `127.0.0.1` unless
 * `hostname` says otherwise (Bun itself would listen on every interface).
 * Only callable under Bun.
 */
export function serveBun(api: Pick<DataApi, "fetch">, options: BunServeOptions = {}): BunServer {
  const bun = (globalThis as { Bun?: { serve(options: BunServeOptions & { fetch: BunFetch }): BunServer } }).Bun;
  if (!bun) throw new Error("serveBun needs the Bun runtime; on Node use dataport/node");
  return bun.serve({ ...options, hostname: options.hostname ?? DEFAULT_HOSTNAME, fetch: toBunHandler(api) });
}
