import { Agent as HttpAgent, type IncomingMessage, request as httpRequest } from "node:http";
import { Agent as HttpsAgent, request as httpsRequest } from "node:https";
import { type DialOptions, dialProblem, guardedLookup } from "./dial-guard.js";

/** An upstream's answer: status, headers, and the body as it streams. */
export interface UpstreamResponse {
  status: number;
  header(name: string): string | null;
  body: AsyncIterable<Uint8Array>;
  /** Drop the rest of the body (and its socket). */
  discard(): void;
}

/** GET requests that reach only addresses the dial options allow. */
export interface GuardedHttp {
  /** Never follows a redirect; rejects with `ForbiddenAddressError` before connecting to a forbidden address. */
  get(url: URL, init: { signal: AbortSignal; headers: Record<string, string> }): Promise<UpstreamResponse>;
  /** Close the idle sockets this client keeps. */
  close(): void;
}

/**
 * HTTP(S) GETs whose every socket is dialled through `guardedLookup`: a
 * literal address is judged as written, a name by the addresses it resolves
 * to, which are the addresses connected to. The sockets are pooled in
 * agents of this client alone, so a request never rides a connection that
 * something else opened without the check.
 */
export function guardedHttp(options: DialOptions): GuardedHttp {
  const lookup = guardedLookup(options);
  const pooled = { keepAlive: true, timeout: 30_000 };
  const agents = { http: new HttpAgent(pooled), https: new HttpsAgent(pooled) };
  return {
    get(url, init) {
      const refused = dialProblem(url.hostname.replace(/^\[|\]$/g, ""), options);
      if (refused) return Promise.reject(refused);
      const secure = url.protocol === "https:";
      const send = secure ? httpsRequest : httpRequest;
      return new Promise((resolve, reject) => {
        const agent = secure ? agents.https : agents.http;
        const options = { method: "GET", headers: init.headers, signal: init.signal, agent, lookup: lookup as never };
        const request = send(url, options, (response) => resolve(upstreamResponse(response)));
        request.on("error", reject);
        request.end();
      });
    },
    close() {
      agents.http.destroy();
      agents.https.destroy();
    },
  };
}

function upstreamResponse(response: IncomingMessage): UpstreamResponse {
  return {
    status: response.statusCode ?? 0,
    header(name) {
      const value = response.headers[name.toLowerCase()];
      return value === undefined ? null : Array.isArray(value) ? value.join(", ") : value;
    },
    body: response,
    discard() {
      response.destroy();
    },
  };
}
