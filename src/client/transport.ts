import {
  DataportError,
  errorForResponse,
  isErrorEnvelope,
  NetworkError,
  type RateLimitInfo,
  type ResponseMeta,
  TimeoutError,
} from "./errors.js";
import { defaultUserAgent, serverRuntime } from "./runtime.js";

export type FetchLike = (request: Request) => Promise<Response>;

export interface RetryOptions {
  /** Further attempts after the first (default 3). */
  retries?: number;
  /** First backoff in ms, doubled per attempt, with full jitter (default 250). */
  baseDelayMs?: number;
  /** Largest backoff in ms (default 8000). */
  maxDelayMs?: number;
  /**
   * A `Retry-After` longer than this (ms) is not waited for: the error is
   * raised (default 60000). A shorter one is waited for, plus a random extra
   * of up to half of it (at least up to `baseDelayMs`), so calls refused
   * together do not all come back at the same instant.
   */
  maxRetryAfterMs?: number;
}

export interface TransportOptions {
  baseUrl: string;
  token: string;
  fetch: FetchLike;
  retry: Required<RetryOptions>;
  /** Per attempt, from sending the request to reading the whole answer; 0 for none. */
  timeoutMs: number;
  headers: Record<string, string>;
  /** Waits `ms`; rejects when `signal` aborts. Replaceable for tests. */
  sleep: (ms: number, signal?: AbortSignal) => Promise<void>;
  random: () => number;
  newIdempotencyKey: () => string;
  /** Called with the metadata of every final answer (success or error). */
  onResponse: ((meta: ResponseMeta) => void) | undefined;
  /** Called before every attempt is sent. */
  onRequest: ((info: RequestInfo) => void) | undefined;
  /**
   * Send `Dataport-Retry-Count` on retries (not from browsers: a header the API's CORS does not list would fail the
   * preflight).
   */
  retryCountHeader: boolean;
}

/**
 * What a client is configured with: the API it calls, how, and what it is told. Shared by `createClient` and
 * `createAdminClient`.
 */
export interface TransportConfig {
  /**
   * The API base, ending in the version prefix: `https://bi.example.com/api/v1` (`…/api/admin/v1` for the admin
   * client).
   */
  baseUrl: string;
  /** An API key or a session token (the admin token for the admin client). */
  token: string;
  /** Default: the global `fetch`. Any `(Request) => Promise<Response>` works, `api.fetch` included. */
  fetch?: FetchLike;
  retry?: RetryOptions;
  /**
   * How long one attempt may take, from sending the request to the last byte
   * of the answer, in ms (default 30000; 0 for no limit). A timed-out attempt
   * is retried like a network failure; the last one raises `TimeoutError`
   * (code `timeout`).
   */
  timeoutMs?: number;
  /** Extra headers on every request. */
  headers?: Record<string, string>;
  /**
   * The `User-Agent` on Node, Bun and Deno (default `dataport-client/0.1.0 node/20.19.0`;
   * a `user-agent` in `headers` wins; `false` sends the runtime's own). Browsers send theirs.
   */
  userAgent?: string | false;
  /** Called before every attempt, retries included, with the method, URL, attempt number and headers (token masked). */
  onRequest?: (info: RequestInfo) => void;
  /** Called with the metadata of every answer a call ends with (request id, rate limit, attempts, `durationMs`). */
  onResponse?: (meta: ResponseMeta) => void;
  /** For tests: replaces timers (backoff and poll waits). */
  sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
  /** For tests: the jitter source, in [0, 1). */
  random?: () => number;
}

/** The transport a configuration describes, its defaults filled in. */
export function createTransport(config: TransportConfig): TransportOptions {
  const userAgent = config.userAgent === false ? null : (config.userAgent ?? defaultUserAgent());
  return {
    baseUrl: config.baseUrl.replace(/\/+$/, ""),
    token: config.token,
    fetch: config.fetch ?? ((request) => globalThis.fetch(request)),
    retry: { retries: 3, baseDelayMs: 250, maxDelayMs: 8000, maxRetryAfterMs: 60_000, ...config.retry },
    timeoutMs: config.timeoutMs ?? 30_000,
    headers: { ...(userAgent !== null && { "user-agent": userAgent }), ...lowerCased(config.headers) },
    sleep: config.sleep ?? sleep,
    random: config.random ?? Math.random,
    newIdempotencyKey: () => globalThis.crypto.randomUUID(),
    onResponse: config.onResponse,
    onRequest: config.onRequest,
    retryCountHeader: serverRuntime() !== null,
  };
}

/** Header names in lower case, so a caller's `User-Agent` replaces the default rather than joining it. */
export function lowerCased(headers: Record<string, string> | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers ?? {})) out[name.toLowerCase()] = value;
  return out;
}

/** What `onRequest` is told before each attempt. */
export interface RequestInfo {
  method: string;
  url: string;
  /** 1 for the first attempt, 2 for the first retry, … */
  attempt: number;
  /** The headers sent, `authorization` shown as `Bearer ***`. */
  headers: Record<string, string>;
}

/** Sent on every retry with the number of earlier attempts (1 on the first retry), as Stripe's and OpenAI's SDKs do. */
export const RETRY_COUNT_HEADER = "dataport-retry-count";

/** A body sent as it is rather than as JSON: text, bytes or a stream, with its content type. */
export interface RawBody {
  contentType: string;
  /** The body of one attempt; called again for each retry when `replayable`. */
  open: () => BodyInit;
  /** False for a body that can be read only once (a stream): the call is then one attempt. */
  replayable: boolean;
}

export interface CallOptions {
  query?: URLSearchParams;
  /** Sent as JSON. */
  body?: unknown;
  /** Sent as it is, instead of `body`. */
  raw?: RawBody;
  /**
   * Which failures are retried: `any` (default) for calls the server applies
   * once however often they arrive (GET, PUT, DELETE, and POST and PATCH with
   * their `Idempotency-Key`); `refused` for a write the server would apply
   * again: retried only after a 429 (refused before anything was done), never
   * after a 5xx, a timeout or a lost connection, and sent without an
   * `Idempotency-Key`.
   */
  retryOn?: "any" | "refused";
  headers?: Record<string, string>;
  /** POST and PATCH: the key sent as `Idempotency-Key` (default: a fresh UUID, reused on retries). */
  idempotencyKey?: string;
  signal?: AbortSignal;
  /** Overrides the client's `timeoutMs` for this call. */
  timeoutMs?: number;
  /** Overrides the client's `retry.retries` for this call (0: one attempt). */
  retries?: number;
  /** Send no `Authorization` header. */
  anonymous?: boolean;
}

/** A successful answer: its parsed JSON body and its metadata. */
export interface Answer<T> {
  body: T;
  meta: ResponseMeta;
}

const RETRYABLE = (status: number) => status === 429 || status >= 500;

/**
 * 409 `idempotency_key_in_use`: an earlier attempt of this very write (its
 * `Idempotency-Key`) is still being written — typically one that answered
 * 503 while its transaction went on. The server bounds that to seconds;
 * trying again after `Retry-After` gets its answer (or writes, if it
 * rolled back), so it is retried like a 503.
 */
const keyStillWriting = (status: number, text: string, retryOn: "any" | "refused") =>
  status === 409 && retryOn === "any" && envelopeOf(text)?.error.code === "idempotency_key_in_use";

/** What one attempt came to: an answer read whole, or a failure before one. */
type Attempt =
  { kind: "answer"; response: Response; text: string } | { kind: "timeout" } | { kind: "network"; error: unknown };

/**
 * One call: build the request, send it, retry 429 and 5xx answers, network
 * failures and timeouts with backoff honouring `Retry-After` (jittered),
 * parse JSON, raise a DataportError for anything else.
 */
export async function call<T>(
  transport: TransportOptions,
  method: string,
  path: string,
  options: CallOptions = {},
): Promise<Answer<T>> {
  const url = transport.baseUrl + path + (options.query && [...options.query].length > 0 ? `?${options.query}` : "");
  const headers: Record<string, string> = { accept: "application/json", ...transport.headers, ...options.headers };
  if (!options.anonymous) headers.authorization = `Bearer ${transport.token}`;
  let json: string | undefined;
  if (options.raw !== undefined) headers["content-type"] = options.raw.contentType;
  else if (options.body !== undefined) {
    json = JSON.stringify(options.body);
    headers["content-type"] = "application/json";
  }
  const body = (): BodyInit | undefined => options.raw?.open() ?? json;
  const retryOn = options.retryOn ?? "any";
  // One key per logical write, the same on every retry, so the server applies it once
  // (and answers a retry whose first attempt succeeded with that first answer).
  if ((method === "POST" || method === "PATCH") && retryOn === "any")
    headers["idempotency-key"] = options.idempotencyKey ?? transport.newIdempotencyKey();
  const timeoutMs = options.timeoutMs ?? transport.timeoutMs;

  // A stream is read by its first attempt: there is nothing left to send again.
  const retries = options.raw?.replayable === false ? 0 : (options.retries ?? transport.retry.retries);
  const startedAt = performance.now();
  for (let attempt = 0; ; attempt++) {
    options.signal?.throwIfAborted();
    if (attempt > 0 && transport.retryCountHeader) headers[RETRY_COUNT_HEADER] = String(attempt);
    transport.onRequest?.({ method, url, attempt: attempt + 1, headers: shown(headers) });
    const payload = body();
    // `duplex: "half"` sends a stream as it is read (Node, Bun and Deno require it for a stream body).
    const init: RequestInit & { duplex?: "half" } = {
      method,
      headers,
      body: payload ?? null,
      ...(payload instanceof ReadableStream && { duplex: "half" }),
    };
    const outcome = await send(transport, (signal) => new Request(url, { ...init, signal }), options.signal, timeoutMs);
    const last = attempt >= retries;
    if (outcome.kind !== "answer") {
      if (!last && retryOn === "any") {
        await transport.sleep(backoff(transport, attempt), options.signal);
        continue;
      }
      if (outcome.kind === "timeout") {
        throw new TimeoutError(0, null, null, null, {
          code: "timeout",
          message: `no answer from ${method} ${path} within ${timeoutMs} ms (${attempt + 1} attempts)`,
        });
      }
      throw new NetworkError(0, null, null, null, {
        code: "network_error",
        message: `${method} ${path} failed: ${messageOf(outcome.error)}`,
        cause: outcome.error,
      });
    }
    const { response, text } = outcome;
    const meta = metaOf(response, attempt + 1, performance.now() - startedAt);
    if (response.ok) {
      transport.onResponse?.(meta);
      return { body: parseAnswer<T>(response, text, meta), meta };
    }
    const retryable = RETRYABLE(response.status) || keyStillWriting(response.status, text, retryOn);
    if (retryable && !last && (retryOn === "any" || response.status === 429)) {
      const wait =
        meta.retryAfter === null ? backoff(transport, attempt) : retryAfterWait(transport, meta.retryAfter * 1000);
      if (wait !== null) {
        await transport.sleep(wait, options.signal);
        continue;
      }
    }
    transport.onResponse?.(meta);
    throw errorForResponse(response.status, envelopeOf(text), meta);
  }
}

/**
 * One attempt, bounded by `timeoutMs` from sending to the last byte of the
 * answer. The caller's abort wins and is rethrown as it is. A fetch that
 * ignores its signal still cannot hold the call past the timeout.
 */
async function send(
  transport: TransportOptions,
  request: (signal: AbortSignal) => Request,
  signal: AbortSignal | undefined,
  timeoutMs: number,
): Promise<Attempt> {
  const controller = new AbortController();
  const onAbort = () => controller.abort(signal!.reason);
  signal?.addEventListener("abort", onAbort, { once: true });
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timedOut = new Promise<Attempt>((resolve) => {
    if (timeoutMs > 0 && Number.isFinite(timeoutMs)) {
      timer = setTimeout(() => {
        controller.abort(new DOMException("the request timed out", "TimeoutError"));
        resolve({ kind: "timeout" });
      }, timeoutMs);
    }
  });
  const attempt = (async (): Promise<Attempt> => {
    const response = await transport.fetch(request(controller.signal));
    return { kind: "answer", response, text: await response.text() };
  })().catch((error: unknown): Attempt => {
    if (signal?.aborted) throw signal.reason;
    return controller.signal.aborted ? { kind: "timeout" } : { kind: "network", error };
  });
  try {
    return await Promise.race([attempt, timedOut]);
  } finally {
    clearTimeout(timer);
    signal?.removeEventListener("abort", onAbort);
    // A losing attempt settles later; its outcome is no longer wanted.
    attempt.catch(() => {});
  }
}

function backoff(transport: TransportOptions, attempt: number): number {
  const ceiling = Math.min(transport.retry.maxDelayMs, transport.retry.baseDelayMs * 2 ** attempt);
  return Math.round(ceiling * transport.random());
}

/** `Retry-After` plus jitter, or null when it is longer than the client waits. */
function retryAfterWait(transport: TransportOptions, retryAfterMs: number): number | null {
  if (retryAfterMs > transport.retry.maxRetryAfterMs) return null;
  const spread = Math.max(transport.retry.baseDelayMs, retryAfterMs / 2);
  return retryAfterMs + Math.round(spread * transport.random());
}

/** `Retry-After` as seconds: delta-seconds or an HTTP date; null when absent or unreadable. */
export function parseRetryAfter(value: string | null, now: number): number | null {
  if (value === null) return null;
  const text = value.trim();
  if (/^\d+$/.test(text)) return Number(text);
  const at = Date.parse(text);
  return Number.isFinite(at) ? Math.max(0, Math.ceil((at - now) / 1000)) : null;
}

function metaOf(response: Response, attempts: number, durationMs: number): ResponseMeta {
  const { headers } = response;
  return {
    status: response.status,
    requestId: headers.get("x-request-id"),
    rateLimit: rateLimitOf(headers),
    retryAfter: parseRetryAfter(headers.get("retry-after"), Date.now()),
    attempts,
    durationMs: Math.round(durationMs * 10) / 10,
    headers,
  };
}

/** The headers for a hook: the token never leaves the transport. */
function shown(headers: Record<string, string>): Record<string, string> {
  return headers.authorization === undefined ? { ...headers } : { ...headers, authorization: "Bearer ***" };
}

function rateLimitOf(headers: Headers): RateLimitInfo | null {
  const read = (name: string) => {
    const text = headers.get(name)?.trim();
    return text !== undefined && /^\d+$/.test(text) ? Number(text) : null;
  };
  const limit = read("ratelimit-limit");
  const remaining = read("ratelimit-remaining");
  const resetSeconds = read("ratelimit-reset");
  if (limit !== null && remaining !== null && resetSeconds !== null) return { limit, remaining, resetSeconds };
  return draftRateLimitOf(headers.get("ratelimit-policy"), headers.get("ratelimit"));
}

/**
 * The same from the current draft's fields (a server set to `rateLimitHeaders: "policy"`):
 * `RateLimit-Policy: "api";q=100;w=2` and `RateLimit: "api";r=42;t=1`, the first item of each.
 */
function draftRateLimitOf(policy: string | null, limit: string | null): RateLimitInfo | null {
  if (policy === null || limit === null) return null;
  const param = (field: string, name: string) => {
    const found = new RegExp(`;\\s*${name}=(\\d+)(?=;|,|\\s|$)`).exec(field.split(",")[0]!);
    return found ? Number(found[1]) : null;
  };
  const quota = param(policy, "q");
  const remaining = param(limit, "r");
  const resetSeconds = param(limit, "t");
  return quota === null || remaining === null || resetSeconds === null
    ? null
    : { limit: quota, remaining, resetSeconds };
}

/** A 2xx body: JSON (empty: null), else an `unexpected_response` error rather than a SyntaxError. */
function parseAnswer<T>(response: Response, text: string, meta: ResponseMeta): T {
  if (text === "") return null as T;
  try {
    return JSON.parse(text) as T;
  } catch (error) {
    const type = response.headers.get("content-type") ?? "no content type";
    throw new DataportError(response.status, null, meta.requestId, meta.retryAfter, {
      code: "unexpected_response",
      message: `the answer (status ${response.status}, ${type}) is not JSON`,
      meta,
      cause: error,
    });
  }
}

function envelopeOf(text: string) {
  try {
    const json: unknown = text === "" ? null : JSON.parse(text);
    return isErrorEnvelope(json) ? json : null;
  } catch {
    return null;
  }
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** A timer that an AbortSignal cancels. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal!.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/**
 * A call whose successful answer is streamed, not read: its body as bytes
 * (downloads). Refusals raise a DataportError as `call` does; 429 and 5xx
 * answers and failures before the answer are retried, a body under way is
 * not. `timeoutMs` bounds the wait for the answer's headers only.
 */
export async function callStream(
  transport: TransportOptions,
  path: string,
  query: URLSearchParams,
  options: CallOptions & { accept: string },
): Promise<ReadableStream<Uint8Array>> {
  const url = transport.baseUrl + path + ([...query].length > 0 ? `?${query}` : "");
  const headers: Record<string, string> = {
    ...transport.headers,
    ...options.headers,
    accept: options.accept,
    authorization: `Bearer ${transport.token}`,
  };
  const retries = options.retries ?? transport.retry.retries;
  const startedAt = performance.now();
  for (let attempt = 0; ; attempt++) {
    options.signal?.throwIfAborted();
    if (attempt > 0 && transport.retryCountHeader) headers[RETRY_COUNT_HEADER] = String(attempt);
    transport.onRequest?.({ method: "GET", url, attempt: attempt + 1, headers: shown(headers) });
    const timeoutMs = options.timeoutMs ?? transport.timeoutMs;
    const timeout = timeoutMs > 0 && Number.isFinite(timeoutMs) ? AbortSignal.timeout(timeoutMs) : null;
    let response: Response;
    try {
      const headersArrived = transport.fetch(
        new Request(url, { method: "GET", headers, ...(options.signal && { signal: options.signal }) }),
      );
      response = timeout
        ? await Promise.race([
            headersArrived,
            new Promise<never>((_, reject) => timeout.addEventListener("abort", () => reject(timeout.reason))),
          ])
        : await headersArrived;
    } catch (error) {
      if (options.signal?.aborted) throw options.signal.reason;
      if (attempt < retries) {
        await transport.sleep(backoff(transport, attempt), options.signal);
        continue;
      }
      throw new NetworkError(0, null, null, null, {
        code: "network_error",
        message: `GET ${path} failed: ${messageOf(error)}`,
        cause: error,
      });
    }
    const meta = metaOf(response, attempt + 1, performance.now() - startedAt);
    if (response.ok && response.body) {
      transport.onResponse?.(meta);
      return response.body;
    }
    const text = await response.text();
    if (RETRYABLE(response.status) && attempt < retries) {
      const wait =
        meta.retryAfter === null ? backoff(transport, attempt) : retryAfterWait(transport, meta.retryAfter * 1000);
      if (wait !== null) {
        await transport.sleep(wait, options.signal);
        continue;
      }
    }
    transport.onResponse?.(meta);
    throw errorForResponse(response.status, envelopeOf(text), meta);
  }
}
