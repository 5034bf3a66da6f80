import { describe, expect, it } from "vitest";
import { createMemoryRateLimiter } from "../../src/memory/rate-limiter.js";
import { createMemoryStorage } from "../../src/memory/memory-storage.js";
import type { Connector } from "../../src/ports/connector.js";
import type { Storage } from "../../src/ports/storage.js";
import { createRedisRateLimiter } from "../../src/redis/index.js";
import { setup } from "../support/api.js";
import { TOKENS } from "../support/fixture.js";
import { REDIS_URL, redisSkipReason } from "../support/services.js";

const redisSkip = await redisSkipReason();

describe("API rate limit per credential (apiRatePerSecond)", () => {
  it("is off by default: no RateLimit headers and no refusal", async () => {
    const { call } = await setup();
    for (let i = 0; i < 30; i++) {
      const res = await call("GET", "/api/v1/me", { token: TOKENS.sync });
      expect(res.status).toBe(200);
      expect(res.headers.get("ratelimit-limit")).toBeNull();
    }
  });

  it("allows a burst of twice the rate, then answers 429 rate_limited with Retry-After and RateLimit-*, refilling on the clock", async () => {
    const { call, clock } = await setup({ apiRatePerSecond: 1 });
    const first = await call("GET", "/api/v1/me", { token: TOKENS.sync });
    expect(first.status).toBe(200);
    expect([
      first.headers.get("ratelimit-limit"),
      first.headers.get("ratelimit-remaining"),
      first.headers.get("ratelimit-reset"),
    ]).toEqual(["2", "1", "1"]);
    expect(first.headers.get("access-control-expose-headers")).toContain("RateLimit-Remaining");
    const second = await call("GET", "/api/v1/datasets", { token: TOKENS.sync });
    expect(second.status).toBe(200);
    expect(second.headers.get("ratelimit-remaining")).toBe("0");
    const refused = await call("GET", "/api/v1/me", { token: TOKENS.sync });
    expect(refused.status).toBe(429);
    expect(refused.json.error).toMatchObject({ code: "rate_limited", details: { retryAfterSeconds: 1 } });
    expect(refused.headers.get("retry-after")).toBe("1");
    expect(refused.headers.get("ratelimit-limit")).toBe("2");
    expect(refused.headers.get("ratelimit-remaining")).toBe("0");
    clock.advance(1000);
    expect((await call("GET", "/api/v1/me", { token: TOKENS.sync })).status).toBe(200);
  });

  it("speaks the current IETF draft when asked (rateLimitHeaders: policy): RateLimit-Policy and RateLimit, exposed to scripts", async () => {
    const { call } = await setup({ apiRatePerSecond: 50, rateLimitHeaders: "policy" });
    const first = await call("GET", "/api/v1/me", { token: TOKENS.sync });
    expect(first.status).toBe(200);
    // A bucket of 100 (twice the rate) that an empty one fills in 2 s; 99 left, full again in 1 s.
    expect([first.headers.get("ratelimit-policy"), first.headers.get("ratelimit")]).toEqual([
      '"api";q=100;w=2',
      '"api";r=99;t=1',
    ]);
    expect(first.headers.get("ratelimit-limit")).toBeNull();
    expect(first.headers.get("access-control-expose-headers")).toBe("X-Request-Id, RateLimit, RateLimit-Policy");
    const second = await call("GET", "/api/v1/me", { token: TOKENS.sync });
    expect(second.headers.get("ratelimit")).toBe('"api";r=98;t=1');
  });

  it("sends both generations with rateLimitHeaders: both, on answers and on the 429", async () => {
    const { call } = await setup({ apiRatePerSecond: 0.5, rateLimitHeaders: "both" });
    const first = await call("GET", "/api/v1/me", { token: TOKENS.sync });
    expect([
      first.headers.get("ratelimit-limit"),
      first.headers.get("ratelimit-remaining"),
      first.headers.get("ratelimit-reset"),
    ]).toEqual(["1", "0", "2"]);
    expect([first.headers.get("ratelimit-policy"), first.headers.get("ratelimit")]).toEqual([
      '"api";q=1;w=2',
      '"api";r=0;t=2',
    ]);
    const refused = await call("GET", "/api/v1/me", { token: TOKENS.sync });
    expect(refused.status).toBe(429);
    expect([refused.headers.get("retry-after"), refused.headers.get("ratelimit")]).toEqual(["2", '"api";r=0;t=2']);
    expect(refused.headers.get("access-control-expose-headers")).toBe(
      "X-Request-Id, Retry-After, RateLimit-Limit, RateLimit-Remaining, RateLimit-Reset, RateLimit, RateLimit-Policy",
    );
  });

  it("keeps one bucket per API key and per signed-in user", async () => {
    const { call } = await setup({ apiRatePerSecond: 0.5 });
    expect((await call("GET", "/api/v1/me", { token: TOKENS.sync })).status).toBe(200);
    expect((await call("GET", "/api/v1/me", { token: TOKENS.sync })).status).toBe(429);
    // The read-only key lacks data:read: its own full bucket lets the scope check answer.
    expect((await call("GET", "/api/v1/me", { token: TOKENS.readOnly })).status).toBe(403);
    expect((await call("GET", "/api/v1/me", { token: TOKENS.sessionAda })).status).toBe(200);
    expect((await call("GET", "/api/v1/me", { token: TOKENS.sessionAda })).status).toBe(429);
    const bob = await call("GET", "/api/v1/me", { token: TOKENS.sessionBob });
    expect(bob.status).toBe(200);
    expect(bob.headers.get("ratelimit-remaining")).toBe("0");
  });

  it("is checked right after authentication: a bad token is 401 and spends nothing; a refused plan still spends a token", async () => {
    const { call } = await setup({ apiRatePerSecond: 0.5 });
    for (let i = 0; i < 3; i++)
      expect((await call("GET", "/api/v1/me", { token: "dp_test_unknown_0000000000000" })).status).toBe(401);
    expect((await call("GET", "/api/v1/me", { token: TOKENS.freeTeam })).status).toBe(403);
    expect((await call("GET", "/api/v1/me", { token: TOKENS.freeTeam })).status).toBe(429);
    expect((await call("GET", "/api/v1/me", { token: TOKENS.sync })).status).toBe(200);
  });

  it("does not limit the unauthenticated routes (OpenAPI document, health)", async () => {
    const { call } = await setup({ apiRatePerSecond: 0.5 });
    for (let i = 0; i < 5; i++) {
      expect((await call("GET", "/api/v1/openapi.json")).status).toBe(200);
      expect((await call("GET", "/api/health/ready")).status).toBe(200);
    }
  });

  it("goes through the rate-limiter port, so instances sharing a limiter share the budget", async () => {
    const rateLimiter = createMemoryRateLimiter();
    const a = await setup({ apiRatePerSecond: 1, rateLimiter });
    const b = await setup({ apiRatePerSecond: 1, rateLimiter });
    expect((await a.call("GET", "/api/v1/me", { token: TOKENS.sync })).status).toBe(200);
    expect((await b.call("GET", "/api/v1/me", { token: TOKENS.sync })).status).toBe(200);
    expect((await a.call("GET", "/api/v1/me", { token: TOKENS.sync })).status).toBe(429);
  });

  it.skipIf(!!redisSkip)("is shared across instances through Redis", async () => {
    const prefix = `dp_test:${process.pid}:${Date.now()}:apirate:`;
    const limiters = [
      createRedisRateLimiter({ url: REDIS_URL, prefix }),
      createRedisRateLimiter({ url: REDIS_URL, prefix }),
    ];
    try {
      const a = await setup({ apiRatePerSecond: 1, rateLimiter: limiters[0] });
      const b = await setup({ apiRatePerSecond: 1, rateLimiter: limiters[1] });
      expect((await a.call("GET", "/api/v1/me", { token: TOKENS.sync })).status).toBe(200);
      expect((await b.call("GET", "/api/v1/me", { token: TOKENS.sync })).status).toBe(200);
      const refused = await b.call("GET", "/api/v1/me", { token: TOKENS.sync });
      expect(refused.status).toBe(429);
      expect(refused.headers.get("retry-after")).toBe("1");
    } finally {
      await Promise.all(limiters.map((l) => l.close()));
    }
  });
});

describe("timeouts", () => {
  it("ends a request whose storage call hangs with 503 storage_unavailable and Retry-After after storageTimeoutMs", async () => {
    const store = createMemoryStorage();
    const hung: Storage = { ...store, catalog: { ...store.catalog, getDataset: () => new Promise(() => {}) } };
    const { call } = await setup({ storage: hung, storageTimeoutMs: 80 });
    const started = performance.now();
    const res = await call("GET", "/api/v1/datasets/ds_orders", { token: TOKENS.sync });
    expect(performance.now() - started).toBeLessThan(2000);
    expect(res.status).toBe(503);
    expect(res.json.error).toMatchObject({
      code: "storage_unavailable",
      message: "the store did not answer within 80 ms; retry later",
    });
    expect(res.headers.get("retry-after")).toBe("1");
    // Calls that answer in time are unaffected.
    expect((await call("GET", "/api/v1/me", { token: TOKENS.sync })).status).toBe(200);
  });

  it("leaves the store unwrapped when no storage timeout and no metrics are set", async () => {
    const storage = createMemoryStorage();
    const { api } = await setup({ storage });
    expect(api.ports.storage).toBe(storage);
    const timed = await setup({ storage: createMemoryStorage(), storageTimeoutMs: 1000 });
    expect(timed.api.ports.storage).not.toBe(storage);
    expect(typeof timed.api.ports.storage.audit.isAuditPosition("x")).toBe("boolean");
  });

  it("ends a connection query whose upstream hangs with 504 upstream_timeout, aborting the connector's signal", async () => {
    let signal: AbortSignal | undefined;
    const hanging: Connector = {
      isSpatial: () => false,
      query: (_connection, query) => {
        signal = query.signal;
        return new Promise(() => {});
      },
    };
    const { call } = await setup({ connectors: { memory: hanging }, upstreamTimeoutMs: 80 });
    const started = performance.now();
    const res = await call("GET", "/api/v1/connections/conn_retail/query", { token: TOKENS.sync });
    expect(performance.now() - started).toBeLessThan(2000);
    expect(res.status).toBe(504);
    expect(res.json.error).toMatchObject({
      code: "upstream_timeout",
      message: "the upstream of this connection did not answer within 80 ms",
    });
    expect(signal?.aborted).toBe(true);
  });
});
