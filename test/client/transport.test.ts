import { afterEach, describe, expect, it, vi } from "vitest";
import {
  AuthenticationError,
  BadRequestError,
  ConflictError,
  createClient,
  DataportError,
  NetworkError,
  NotFoundError,
  PermissionDeniedError,
  RateLimitError,
  type ResponseMeta,
  ServerError,
  TimeoutError,
  UnprocessableEntityError,
} from "../../src/client/index.js";
import { setup } from "../support/api.js";
import { TOKENS } from "../support/fixture.js";

const BASE = "http://dataport.test/api/v1";
const json = (status: number, body: unknown, headers: Record<string, string> = {}) =>
  new Response(JSON.stringify(body), { status, headers: { "content-type": "application/json", ...headers } });
const envelope = (code: string) => ({ error: { code, message: code.replace(/_/g, " "), requestId: "req_1" } });
const noWait = async () => {};

/** A fetch that never answers; it records whether the client aborted it. */
function hangingFetch(options: { honoursSignal: boolean }) {
  const requests: Request[] = [];
  const fetch = (request: Request) => {
    requests.push(request);
    return new Promise<Response>((_resolve, reject) => {
      if (options.honoursSignal) request.signal.addEventListener("abort", () => reject(request.signal.reason));
    });
  };
  return { fetch, requests };
}

afterEach(() => {
  vi.useRealTimers();
});

describe("timeout", () => {
  it("gives up on an attempt after 30 s by default, retries it, and raises TimeoutError (code timeout)", async () => {
    vi.useFakeTimers();
    const { fetch, requests } = hangingFetch({ honoursSignal: true });
    const dp = createClient({ baseUrl: BASE, token: "t", fetch, sleep: noWait, retry: { retries: 1 } });
    const settled = vi.fn();
    const call = dp.me().then(settled, (error: unknown) => {
      settled(error);
      return error;
    });
    await vi.advanceTimersByTimeAsync(29_999);
    expect(settled).not.toHaveBeenCalled();
    expect(requests).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(1);
    // The first attempt was aborted and a second one sent.
    expect(requests[0]!.signal.aborted).toBe(true);
    expect(requests).toHaveLength(2);
    await vi.advanceTimersByTimeAsync(30_000);
    const error = await call;
    expect(error).toBeInstanceOf(TimeoutError);
    expect(error).toBeInstanceOf(DataportError);
    expect(error).toMatchObject({ code: "timeout", status: 0, meta: null, name: "DataportError" });
    expect((error as Error).message).toContain("no answer from GET /me within 30000 ms (2 attempts)");
  });

  it("bounds a fetch that ignores its signal, and a body that never ends", async () => {
    const ignoring = hangingFetch({ honoursSignal: false });
    const dp = createClient({
      baseUrl: BASE,
      token: "t",
      fetch: ignoring.fetch,
      sleep: noWait,
      retry: { retries: 0 },
      timeoutMs: 30,
    });
    await expect(dp.me()).rejects.toMatchObject({ code: "timeout" });

    // Headers arrive, the body never finishes.
    const stalled = () =>
      new Response(new ReadableStream({ start: (c) => c.enqueue(new TextEncoder().encode('{"kind":')) }), {
        status: 200,
      });
    const slowBody = createClient({
      baseUrl: BASE,
      token: "t",
      fetch: async () => stalled(),
      sleep: noWait,
      retry: { retries: 0 },
      timeoutMs: 30,
    });
    await expect(slowBody.me()).rejects.toBeInstanceOf(TimeoutError);
  });

  it("takes a per-call timeout, and 0 turns it off", async () => {
    const slow = (ms: number) => async () => {
      await new Promise((resolve) => setTimeout(resolve, ms));
      return json(200, { kind: "api-key" });
    };
    const tight = createClient({
      baseUrl: BASE,
      token: "t",
      fetch: slow(60),
      sleep: noWait,
      retry: { retries: 0 },
      timeoutMs: 10,
    });
    await expect(tight.me()).rejects.toMatchObject({ code: "timeout" });
    await expect(tight.me({ timeoutMs: 2000 })).resolves.toEqual({ kind: "api-key" });
    const unbounded = createClient({ baseUrl: BASE, token: "t", fetch: slow(60), retry: { retries: 0 }, timeoutMs: 0 });
    await expect(unbounded.me()).resolves.toEqual({ kind: "api-key" });
  });

  it("lets the caller's abort through as it is, without retrying", async () => {
    const { fetch, requests } = hangingFetch({ honoursSignal: true });
    const dp = createClient({ baseUrl: BASE, token: "t", fetch, sleep: noWait });
    const controller = new AbortController();
    const call = dp.me({ signal: controller.signal });
    controller.abort(new Error("user went away"));
    await expect(call).rejects.toThrow("user went away");
    expect(requests).toHaveLength(1);
  });
});

describe("errors", () => {
  it("raises the class its status names, every one a DataportError with the envelope's code", async () => {
    const cases: Array<[number, string, typeof DataportError]> = [
      [400, "invalid_parameter", BadRequestError],
      [401, "unauthorized", AuthenticationError],
      [403, "plan_required", PermissionDeniedError],
      [404, "not_found", NotFoundError],
      [409, "conflict", ConflictError],
      [422, "validation_failed", UnprocessableEntityError],
      [429, "rate_limited", RateLimitError],
      [502, "upstream_unavailable", ServerError],
      [504, "upstream_timeout", ServerError],
      [413, "payload_too_large", DataportError],
    ];
    for (const [status, code, Class] of cases) {
      const dp = createClient({
        baseUrl: BASE,
        token: "t",
        fetch: async () => json(status, envelope(code), { "retry-after": "3600" }),
        sleep: noWait,
        retry: { retries: 0 },
      });
      const error = await dp.me().catch((e: unknown) => e);
      expect(error, String(status)).toBeInstanceOf(Class);
      expect(error).toBeInstanceOf(DataportError);
      expect(error).toMatchObject({ status, code, requestId: "req_1", name: "DataportError" });
      if (Class === DataportError) expect(Object.getPrototypeOf(error)).toBe(DataportError.prototype);
    }
  });

  it("turns a 200 that is not JSON into a DataportError (unexpected_response), not a SyntaxError", async () => {
    const html = new Response("<html><body>Sign in to the proxy</body></html>", {
      status: 200,
      headers: { "content-type": "text/html", "x-request-id": "edge-7" },
    });
    const dp = createClient({ baseUrl: BASE, token: "t", fetch: async () => html });
    const error = await dp.datasets.list().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(DataportError);
    expect(error).not.toBeInstanceOf(SyntaxError);
    expect(error).toMatchObject({ status: 200, code: "unexpected_response", requestId: "edge-7", envelope: null });
    expect((error as Error).message).toBe("the answer (status 200, text/html) is not JSON");
    expect((error as Error).cause).toBeInstanceOf(SyntaxError);
  });

  it("raises NetworkError once a failing network has used up the retries, with the failure as cause", async () => {
    const failure = new TypeError("fetch failed");
    const attempts: number[] = [];
    const dp = createClient({
      baseUrl: BASE,
      token: "t",
      fetch: async () => {
        attempts.push(1);
        throw failure;
      },
      sleep: noWait,
      retry: { retries: 2 },
    });
    const error = await dp.me().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(NetworkError);
    expect(error).toMatchObject({
      code: "network_error",
      status: 0,
      cause: failure,
      message: "GET /me failed: fetch failed",
    });
    expect(attempts).toHaveLength(3);
  });
});

describe("response metadata", () => {
  it("gives callers the request id, rate-limit headers and attempts of each answer", async () => {
    const { api } = await setup({ apiRatePerSecond: 5 });
    const seen: ResponseMeta[] = [];
    const dp = createClient({
      baseUrl: BASE,
      token: TOKENS.sync,
      fetch: api.fetch,
      onResponse: (meta) => seen.push(meta),
    });
    const me = await dp.me();
    const meta = dp.meta(me)!;
    expect(meta).toMatchObject({ status: 200, attempts: 1, retryAfter: null, rateLimit: { limit: 10, remaining: 9 } });
    expect(meta.requestId).toMatch(/^[0-9a-f]{16}-[0-9a-z]+$/);
    expect(meta.headers.get("x-request-id")).toBe(meta.requestId);
    // A list the client unwraps keeps its answer's metadata.
    const datasets = await dp.datasets.list();
    expect(dp.meta(datasets)).toMatchObject({ status: 200, rateLimit: { remaining: 8 } });
    expect(dp.meta({})).toBeUndefined();
    expect(seen.map((m) => m.requestId)).toEqual([meta.requestId, dp.meta(datasets)!.requestId]);
    // An error carries the answer's metadata too.
    const missing = (await dp.datasets.get("ds_nowhere").catch((e: unknown) => e)) as DataportError;
    expect(missing.meta).toMatchObject({ status: 404, rateLimit: { limit: 10, remaining: 7 } });
    expect(missing.meta!.requestId).toBe(missing.requestId);
    expect(seen).toHaveLength(3);
  });

  it("reads the rate limit from the current draft's RateLimit-Policy and RateLimit when the server sends only those", async () => {
    const { api } = await setup({ apiRatePerSecond: 5, rateLimitHeaders: "policy" });
    const dp = createClient({ baseUrl: BASE, token: TOKENS.sync, fetch: api.fetch });
    expect(dp.meta(await dp.me())!.rateLimit).toEqual({ limit: 10, remaining: 9, resetSeconds: 1 });
  });

  it("counts the attempts a call took and reports the rate limit of a final 429", async () => {
    const headers = {
      "retry-after": "120",
      "ratelimit-limit": "10",
      "ratelimit-remaining": "0",
      "ratelimit-reset": "120",
      "x-request-id": "r-429",
    };
    const { fetch } = { fetch: async () => json(429, envelope("rate_limited"), headers) };
    const dp = createClient({ baseUrl: BASE, token: "t", fetch, sleep: noWait });
    const error = (await dp.me().catch((e: unknown) => e)) as DataportError;
    expect(error).toBeInstanceOf(RateLimitError);
    expect(error.rateLimit).toEqual({ limit: 10, remaining: 0, resetSeconds: 120 });
    expect(error.meta).toMatchObject({ attempts: 1, retryAfter: 120 });

    let calls = 0;
    const flaky = createClient({
      baseUrl: BASE,
      token: "t",
      fetch: async () => (++calls < 3 ? json(503, envelope("storage_unavailable")) : json(200, { kind: "api-key" })),
      sleep: noWait,
    });
    expect(flaky.meta(await flaky.me())).toMatchObject({ attempts: 3, status: 200, rateLimit: null });
  });
});
