import type { IncomingMessage, ServerResponse } from "node:http";
import type { DataApi } from "../src/server/api.js";
import { isPromiseLike } from "../src/base/awaitable.js";
import { ApiError } from "../src/base/api-error.js";
import { payloadTooLarge } from "../src/http/body.js";
import type { HeaderReader } from "../src/base/headers.js";
import type { ApiReply, ApiRequest } from "../src/http/types.js";
import { normalizeClientAddress } from "./address.js";

export interface NodeHandlerOptions {
  /**
   * Paths this handler answers; others go to `next()` when used as
   * Express/Connect middleware (and 404 otherwise). Default: `/api/`.
   * Under a mount path (`app.use("/bi", …)`) it is matched below the mount.
   */
  prefix?: string;
}

type Next = (error?: unknown) => void;

/**
 * A Node `http` request listener (and Express/Connect middleware) for a
 * Dataport API. It never materialises a WHATWG Request or Response: the
 * request is read lazily straight from `IncomingMessage`, and the reply is
 * written straight to `ServerResponse` (strings and buffers in one write,
 * streams chunk by chunk with back-pressure, stopped when the client goes away).
 *
 *   http.createServer(toNodeHandler(api)).listen(8787)
 *   app.use(toNodeHandler(api))            // Express: /api/v1/…
 *   app.use("/bi", toNodeHandler(api))     // Express under a mount path: /bi/api/v1/…
 */
export function toNodeHandler(
  api: Pick<DataApi, "handle"> & Partial<Pick<DataApi, "dispatch">>,
  options: NodeHandlerOptions = {},
): (req: IncomingMessage, res: ServerResponse, next?: Next) => void {
  const prefix = options.prefix ?? "/api/";
  // dispatch answers without a promise when nothing had to wait; a bare { handle } (a host's own) works too.
  const serve: Serve = api.dispatch ?? api.handle;
  return (req, res, next) => {
    const routed = routedPath(req, prefix);
    if (routed === null && next) return next();
    // A plain http server answers everything itself (a 404 outside the API).
    const path = routed ?? req.url ?? "/";
    if (prefetchable(req)) {
      readWhole(req, (body) => respond(serve, new NodeRequest(req, res, path, body), res, next));
      return;
    }
    respond(serve, new NodeRequest(req, res, path, undefined), res, next);
  };
}

/**
 * The path the core routes, or null when the request is not one of ours.
 * Express and Connect strip a mount path from `req.url` and keep the target
 * as sent in `req.originalUrl`. The API's paths (`/api/…`) are found in the
 * target as sent, starting inside the mount path or right after it:
 *
 *   app.use(h)             /api/v1/me        → /api/v1/me
 *   app.use("/bi", h)      /bi/api/v1/me     → /api/v1/me   (served below the mount, as Express does)
 *   app.use("/api", h)     /api/v1/me        → /api/v1/me   (mounted at the API's own prefix)
 *   app.use("/bi/api", h)  /bi/api/v1/me     → /api/v1/me
 *
 * A prefix that starts further in (`/bi/reports/api/…` under `/bi`) is the host's path, not ours.
 */
function routedPath(req: IncomingMessage & { originalUrl?: string }, prefix: string): string | null {
  const below = req.url ?? "/";
  if (below.startsWith(prefix)) return below;
  const sent = req.originalUrl;
  if (sent === undefined || sent === below || !sent.endsWith(below)) return sent?.startsWith(prefix) ? sent : null;
  const mountLength = sent.length - below.length;
  const at = sent.indexOf(prefix);
  return at >= 0 && at <= mountLength ? sent.slice(at) : null;
}

const BODY_ALREADY_READ =
  "the request body was read before Dataport saw it: mount toNodeHandler before body-parsing middleware such as express.json(), or limit that to your own routes";

type Serve = (request: ApiRequest) => ApiReply | PromiseLike<ApiReply>;

/**
 * Small bodies of a declared length (the usual JSON POST, a webhook delivery)
 * are read before the request is handled, so the core finds the body ready:
 * no promise, no pause between routing and the handler. Larger or chunked
 * bodies are read when the route asks, within its limit.
 */
const PREFETCH_BYTES = 64 * 1024;

function prefetchable(req: IncomingMessage): boolean {
  const declared = req.headers["content-length"];
  if (declared === undefined || req.readableEnded || req.headers["transfer-encoding"] !== undefined) return false;
  // Node's parser has refused a malformed or conflicting Content-Length before we get here.
  const length = Number(declared);
  return length > 0 && length <= PREFETCH_BYTES;
}

/**
 * The whole (declared, small) body to `done`. A client that leaves before the end gets no answer: nobody is there to
 * read one.
 */
function readWhole(req: IncomingMessage, done: (body: Buffer) => void): void {
  const chunks: Buffer[] = [];
  let size = 0;
  req.on("data", (chunk: Buffer) => {
    chunks.push(chunk);
    size += chunk.length;
  });
  req.on("end", () => done(joined(chunks, size)));
}

/** The body's chunks as one buffer (the usual single chunk as it is). */
function joined(chunks: Buffer[], size: number): Buffer {
  return chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size);
}

/** One request, start to finish: written at once when the reply came without a promise. */
function respond(serve: Serve, request: NodeRequest, res: ServerResponse, next: Next | undefined): void {
  let reply: ApiReply | PromiseLike<ApiReply>;
  try {
    reply = serve(request);
  } catch (error) {
    failed(error, res, next);
    return;
  }
  if (isPromiseLike(reply))
    reply.then(
      (settled) => write(settled, res),
      (error: unknown) => failed(error, res, next),
    );
  else write(reply, res);
}

function write(reply: ApiReply, res: ServerResponse): void {
  if (typeof reply.body === "string") writeWhole(reply, reply.body, res);
  else void writeReply(reply, res);
}

/** A handler that failed outside the core's own error handling: Express's error chain, else a bare 500. */
function failed(error: unknown, res: ServerResponse, next: Next | undefined): void {
  if (next) return next(error);
  if (!res.headersSent) res.writeHead(500, { "content-type": "application/json; charset=utf-8" });
  res.end('{"error":{"code":"internal","message":"internal error","requestId":""}}');
}

class NodeHeaders implements HeaderReader {
  constructor(private readonly raw: IncomingMessage["headers"]) {}
  get(name: string): string | null {
    // Node lower-cases the names it received; the core asks in lower case, so lower-casing is the rare path.
    const value = this.raw[name] ?? (isLowerCase(name) ? undefined : this.raw[name.toLowerCase()]);
    if (value === undefined) return null;
    return Array.isArray(value) ? value.join(", ") : value;
  }
  /** Lower-case names of the headers sent (Node lower-cases them). */
  keys(): Iterable<string> {
    return Object.keys(this.raw);
  }
}

/** No ASCII capital in `name` (the core asks in lower case, so a miss needs no lower-cased copy). */
function isLowerCase(name: string): boolean {
  for (let i = 0; i < name.length; i++) {
    const c = name.charCodeAt(i);
    if (c >= 65 && c <= 90) return false;
  }
  return true;
}

/**
 * An ApiRequest read lazily from IncomingMessage. A class (not an object
 * literal with a getter): the lazy `signal` accessor lives on the prototype,
 * so every request object has the same fast shape.
 */
class NodeRequest implements ApiRequest {
  readonly method: string;
  readonly path: string;
  readonly headers: NodeHeaders;
  readonly clientAddress: string | null;
  private controller: AbortController | undefined;

  constructor(
    private readonly req: IncomingMessage,
    private readonly res: ServerResponse,
    path: string,
    /** The body, when it was read before handling (see prefetchable). */
    private readonly prefetched: Buffer | undefined,
  ) {
    this.method = req.method ?? "GET";
    this.path = path.startsWith("/") ? path : `/${path}`;
    this.headers = new NodeHeaders(req.headers);
    this.clientAddress = normalizeClientAddress(req.socket.remoteAddress);
  }

  /**
   * Built on first use (a target routed before needs none). The origin is nominal: a hostile Host header cannot break
   * URL parsing.
   */
  get url(): string {
    return `http://localhost${this.path}`;
  }

  /** Aborted when the client goes away before the reply is finished. */
  get signal(): AbortSignal {
    if (!this.controller) {
      const controller = new AbortController();
      this.controller = controller;
      const res = this.res;
      res.once("close", () => {
        if (!res.writableFinished) controller.abort();
      });
    }
    return this.controller.signal;
  }

  /**
   * The whole body through plain 'data'/'end' listeners (a readable's async
   * iterator costs several promises per chunk on every POST). Over `limit`:
   * 413, and the rest is discarded so the answer can still be written. Once
   * settled the listeners ignore what follows; they are not removed (four
   * removals cost more than the request object they die with).
   */
  readBody(limit: number): Uint8Array | Promise<Uint8Array> {
    const prefetched = this.prefetched;
    if (prefetched !== undefined) {
      if (prefetched.length > limit) throw payloadTooLarge(limit);
      return prefetched;
    }
    const req = this.req;
    if (req.readableEnded) {
      // Read to the end by someone else (a body parser mounted before Dataport): a host's mistake, not the
      // client's, so a 500 the sender will retry (a 400 would make it drop the delivery), and a log saying why.
      if (Number(req.headers["content-length"] ?? 0) > 0 || req.headers["transfer-encoding"] !== undefined)
        throw new Error(BODY_ALREADY_READ);
      return new Uint8Array(0);
    }
    return new Promise((resolve, reject) => {
      const chunks: Buffer[] = [];
      let size = 0;
      let settled = false;
      req.on("data", (chunk: Buffer) => {
        if (settled) return;
        size += chunk.length;
        if (size > limit) {
          settled = true;
          req.resume();
          reject(payloadTooLarge(limit));
          return;
        }
        chunks.push(chunk);
      });
      req.on("end", () => {
        if (settled) return;
        settled = true;
        resolve(joined(chunks, size));
      });
      // The client went away mid-body ("aborted", a reset): a bad request, not a server error.
      const cutOff = () => {
        if (settled) return;
        settled = true;
        reject(new ApiError(400, "invalid_body", "the request body was cut off"));
      };
      req.on("error", cutOff);
      req.on("close", cutOff);
    });
  }

  /**
   * The body chunk by chunk as it arrives, for routes that stream it into
   * storage. The request is paused while the consumer works on a chunk, so
   * a slow store slows the socket instead of filling memory. Over `limit`
   * (declared or counted): 413. A client that goes away: 400. When the
   * consumer stops early (a refused row), the rest of the body is read and
   * discarded so the answer can still be written on this connection.
   */
  async *streamBody(limit: number): AsyncGenerator<Uint8Array> {
    const prefetched = this.prefetched;
    if (prefetched !== undefined) {
      if (prefetched.length > limit) throw payloadTooLarge(limit);
      if (prefetched.length > 0) yield prefetched;
      return;
    }
    const req = this.req;
    if (req.readableEnded) {
      if (Number(req.headers["content-length"] ?? 0) > 0 || req.headers["transfer-encoding"] !== undefined)
        throw new Error(BODY_ALREADY_READ);
      return;
    }
    if (Number(req.headers["content-length"] ?? 0) > limit) {
      req.resume();
      throw payloadTooLarge(limit);
    }
    const body = new PausedBody(req, limit);
    try {
      for (let chunk = await body.next(); chunk !== null; chunk = await body.next()) yield chunk;
    } finally {
      body.stop();
    }
  }
}

/**
 * An IncomingMessage read one chunk at a time: it flows only while the
 * reader waits for a chunk and is paused as soon as one arrives.
 */
class PausedBody {
  private readonly chunks: Buffer[] = [];
  private size = 0;
  private ended = false;
  private failure: Error | null = null;
  private stopped = false;
  private wake: (() => void) | null = null;

  constructor(
    private readonly req: IncomingMessage,
    private readonly limit: number,
  ) {
    req.pause();
    req.on("data", (chunk: Buffer) => {
      if (this.stopped) return;
      this.size += chunk.length;
      if (this.size > limit) return this.fail(payloadTooLarge(limit));
      this.chunks.push(chunk);
      req.pause();
      this.notify();
    });
    req.on("end", () => {
      this.ended = true;
      this.notify();
    });
    // The client went away mid-body ("aborted", a reset): a bad request, not a server error.
    const cutOff = () => {
      if (!this.ended) this.fail(new ApiError(400, "invalid_body", "the request body was cut off"));
    };
    req.on("error", cutOff);
    req.on("close", cutOff);
  }

  /** The next chunk, or null at the end of the body. */
  async next(): Promise<Buffer | null> {
    for (;;) {
      const chunk = this.chunks.shift();
      if (chunk !== undefined) return chunk;
      if (this.failure) throw this.failure;
      if (this.ended) return null;
      await new Promise<void>((resolve) => {
        this.wake = resolve;
        this.req.resume();
      });
    }
  }

  /** The reader is done: whatever is left of the body is discarded. */
  stop(): void {
    this.stopped = true;
    this.chunks.length = 0;
    if (!this.ended) this.req.resume();
  }

  private fail(error: Error): void {
    if (this.failure) return;
    this.failure = error;
    this.stopped = true;
    this.chunks.length = 0;
    // Past the limit the rest is read and dropped, so the 413 can still be written.
    this.req.resume();
    this.notify();
  }

  private notify(): void {
    const wake = this.wake;
    this.wake = null;
    wake?.();
  }
}

/** The common case, kept synchronous: a whole string body in one write with its exact length. */
function writeWhole(reply: ApiReply, body: string, res: ServerResponse): void {
  reply.headers["content-length"] = String(Buffer.byteLength(body));
  res.writeHead(reply.status, reply.headers);
  res.end(body);
}

async function writeReply(reply: ApiReply, res: ServerResponse): Promise<void> {
  const { body } = reply;
  if (body === null) {
    res.writeHead(reply.status, reply.headers);
    res.end();
    return;
  }
  if (typeof body === "string" || body instanceof Uint8Array) {
    reply.headers["content-length"] = String(typeof body === "string" ? Buffer.byteLength(body) : body.byteLength);
    res.writeHead(reply.status, reply.headers);
    res.end(body);
    return;
  }
  res.writeHead(reply.status, reply.headers);
  const flow = new Flow(res);
  try {
    for await (const chunk of body) {
      if (flow.closed) break; // leaving the loop closes the source (iterator.return)
      if (!res.write(chunk)) await flow.drained();
    }
  } catch {
    // A failing source mid-stream: the status is already sent; cut the connection so the client sees a broken body.
    res.destroy();
    return;
  } finally {
    flow.release();
  }
  if (!flow.closed) res.end();
}

/**
 * A streamed body's wait for the socket: ONE 'drain' and one 'close'
 * listener for the whole body, however many times it waits. A listener per
 * wait, removed after it, piles up behind middleware that reroutes
 * `res.on("drain")` to a stream of its own but not `res.off` (Express's
 * `compression()`): eleven waits and Node warns `MaxListenersExceededWarning`.
 */
class Flow {
  closed = false;
  private wake: (() => void) | null = null;
  private readonly onDrain = () => {
    const wake = this.wake;
    this.wake = null;
    wake?.();
  };
  private readonly onClose = () => {
    this.closed = true;
    this.onDrain();
  };

  constructor(private readonly res: ServerResponse) {
    res.on("drain", this.onDrain);
    res.on("close", this.onClose);
  }

  /** Resolves once the socket drained or closed. */
  drained(): Promise<void> {
    if (this.closed) return Promise.resolve();
    return new Promise((resolve) => {
      this.wake = resolve;
    });
  }

  release(): void {
    this.res.off("drain", this.onDrain);
    this.res.off("close", this.onClose);
  }
}
