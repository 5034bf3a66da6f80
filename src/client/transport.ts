import { DataportError, isErrorEnvelope } from "./errors.js";

export type FetchLike = (request: Request) => Promise<Response>;

export interface RetryOptions {
  /** Further attempts after the first (default 3). */
  retries?: number;
  /** First backoff in ms, doubled per attempt, with full jitter (default 250). */
  baseDelayMs?: number;
  /** Largest backoff in ms (default 8000). */
  maxDelayMs?: number;
  /** A `Retry-After` longer than this (ms) is not waited for: the error is raised (default 60000). */
  maxRetryAfterMs?: number;
}

export interface TransportOptions {
  baseUrl: string;
  token: string;
  fetch: FetchLike;
  retry: Required<RetryOptions>;
  headers: Record<string, string>;
  /** Waits `ms`; rejects when `signal` aborts. Replaceable for tests. */
  sleep: (ms: number, signal?: AbortSignal) => Promise<void>;
  random: () => number;
  newIdempotencyKey: () => string;
}

export interface CallOptions {
  query?: URLSearchParams;
  body?: unknown;
  headers?: Record<string, string>;
  /** POST only: the key sent as `Idempotency-Key` (default: a fresh UUID, reused on retries). */
  idempotencyKey?: string;
  signal?: AbortSignal;
  /** Send no `Authorization` header. */
  anonymous?: boolean;
}

const RETRYABLE = (status: number) => status === 429 || status >= 500;

/**
 * One call: build the request, send it, retry 429 and 5xx answers (and
 * network failures) with backoff honouring `Retry-After`, parse JSON, raise
 * DataportError for anything else that is not 2xx.
 */
export async function call<T>(transport: TransportOptions, method: string, path: string, options: CallOptions = {}): Promise<T> {
  const url = transport.baseUrl + path + (options.query && [...options.query].length > 0 ? `?${options.query}` : "");
  const headers: Record<string, string> = { accept: "application/json", ...transport.headers, ...options.headers };
  if (!options.anonymous) headers.authorization = `Bearer ${transport.token}`;
  let body: string | undefined;
  if (options.body !== undefined) {
    body = JSON.stringify(options.body);
    headers["content-type"] = "application/json";
  }
  // One key per logical POST, the same on every retry, so the server applies it once.
  if (method === "POST") headers["idempotency-key"] = options.idempotencyKey ?? transport.newIdempotencyKey();

  const { retries } = transport.retry;
  for (let attempt = 0; ; attempt++) {
    options.signal?.throwIfAborted();
    let response: Response;
    try {
      response = await transport.fetch(new Request(url, { method, headers, body, signal: options.signal }));
    } catch (error) {
      if (options.signal?.aborted || attempt >= retries) throw error;
      await transport.sleep(backoff(transport, attempt), options.signal);
      continue;
    }
    if (response.ok) return (await readJson(response)) as T;
    const retryAfter = parseRetryAfter(response.headers.get("retry-after"), Date.now());
    if (RETRYABLE(response.status) && attempt < retries) {
      const wait = retryAfter === null ? backoff(transport, attempt) : retryAfter * 1000;
      if (wait <= transport.retry.maxRetryAfterMs) {
        await response.body?.cancel().catch(() => {});
        await transport.sleep(wait, options.signal);
        continue;
      }
    }
    throw await toError(response, retryAfter);
  }
}

function backoff(transport: TransportOptions, attempt: number): number {
  const ceiling = Math.min(transport.retry.maxDelayMs, transport.retry.baseDelayMs * 2 ** attempt);
  return Math.round(ceiling * transport.random());
}

/** `Retry-After` as seconds: delta-seconds or an HTTP date; null when absent or unreadable. */
export function parseRetryAfter(value: string | null, now: number): number | null {
  if (value === null) return null;
  const text = value.trim();
  if (/^\d+$/.test(text)) return Number(text);
  const at = Date.parse(text);
  return Number.isFinite(at) ? Math.max(0, Math.ceil((at - now) / 1000)) : null;
}

async function readJson(response: Response): Promise<unknown> {
  const text = await response.text();
  return text === "" ? null : JSON.parse(text);
}

async function toError(response: Response, retryAfter: number | null): Promise<DataportError> {
  let json: unknown = null;
  try {
    json = await readJson(response);
  } catch {
    json = null;
  }
  return new DataportError(response.status, isErrorEnvelope(json) ? json : null, response.headers.get("x-request-id"), retryAfter);
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
