import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { afterAll, describe, expect, it } from "vitest";
import { createMemoryStorage } from "../../src/memory/memory-storage.js";
import type { Storage } from "../../src/ports/storage.js";
import { createPostgresStorage } from "../../src/postgres/index.js";
import { createRedisCache, createRedisRateLimiter } from "../../src/redis/index.js";
import { createSqliteStorage } from "../../src/sqlite/index.js";
import { setup } from "../support/api.js";
import { TOKENS } from "../support/fixture.js";
import {
  dropSchemas,
  POSTGRES_URL,
  postgresSkipReason,
  REDIS_URL,
  redisSkipReason,
  testSchema,
} from "../support/services.js";

const pgSkip = await postgresSkipReason();
const redisSkip = await redisSkipReason();
const schemas: string[] = [];
const dir = mkdtempSync(join(tmpdir(), "dataport-health-"));
afterAll(async () => {
  rmSync(dir, { recursive: true, force: true });
  await dropSchemas(schemas);
});

const ALL_OK = { storage: "ok", rateLimiter: "ok", cache: "ok" };

describe("GET /api/health/live and /api/health/ready", () => {
  it("answer 200 without a token, are not stored in api-usage, and never cache", async () => {
    const { call } = await setup();
    const live = await call("GET", "/api/health/live");
    expect(live.status).toBe(200);
    expect(live.json).toEqual({ status: "ok" });
    const ready = await call("GET", "/api/health/ready");
    expect(ready.status).toBe(200);
    expect(ready.json).toEqual({ status: "ok", checks: ALL_OK });
    expect(ready.headers.get("cache-control")).toBe("no-store");
    expect(ready.headers.get("x-request-id")).toMatch(/^[0-9a-f]{16}-[0-9a-z]+$/);
    await call("GET", "/api/v1/me", { token: TOKENS.sync });
    const usage = await call("GET", "/api/v1/space/api-usage?days=1", { token: TOKENS.sync });
    expect(usage.status).toBe(200);
    const routes = (usage.json.rows as Array<{ endpoint?: string; route?: string }>).map((r) => r.endpoint ?? r.route);
    expect(routes.some((r) => String(r).includes("/me"))).toBe(true);
    expect(routes.some((r) => String(r).includes("health"))).toBe(false);
  });

  it("answer only GET: 405 with Allow for other methods, never a 500", async () => {
    const { call } = await setup();
    for (const path of ["/api/health/live", "/api/health/ready", "/api/metrics"]) {
      for (const method of ["POST", "PATCH", "DELETE"]) {
        const res = await call(method, path, { body: method === "DELETE" ? undefined : { x: 1 } });
        expect(res.status, `${method} ${path}`).toBe(405);
        expect(res.json.error.code).toBe("method_not_allowed");
        expect(res.headers.get("allow")).toBe("GET, HEAD, OPTIONS");
      }
    }
  });

  it("turns ready to 503 when the store rejects its ping, and back to 200 when it answers again", async () => {
    const store = createMemoryStorage();
    let down = false;
    const flaky: Storage = {
      ...store,
      ping: async () => (down ? Promise.reject(new Error("connection refused")) : undefined),
    };
    const { call } = await setup({ storage: flaky });
    expect((await call("GET", "/api/health/ready")).status).toBe(200);
    down = true;
    const failing = await call("GET", "/api/health/ready");
    expect(failing.status).toBe(503);
    expect(failing.json).toEqual({ status: "unavailable", checks: { ...ALL_OK, storage: "error" } });
    // Liveness touches no dependency.
    expect((await call("GET", "/api/health/live")).status).toBe(200);
    down = false;
    expect((await call("GET", "/api/health/ready")).json.status).toBe("ok");
  });

  it("answers 503 within the health timeout when the store hangs, instead of hanging", async () => {
    const store = createMemoryStorage();
    const hung: Storage = { ...store, ping: () => new Promise<void>(() => {}) };
    const { call } = await setup({ storage: hung, healthTimeoutMs: 100 });
    const started = performance.now();
    const res = await call("GET", "/api/health/ready");
    const took = performance.now() - started;
    expect(res.status).toBe(503);
    expect(res.json.checks.storage).toBe("error");
    expect(took).toBeGreaterThanOrEqual(90);
    expect(took).toBeLessThan(2000);
  });

  it("checks a SQLite store with a real query: ready while open, 503 once its database is closed", async () => {
    const storage = createSqliteStorage({ path: join(dir, "ready.db") });
    const { call } = await setup({ storage });
    expect((await call("GET", "/api/health/ready")).json).toEqual({ status: "ok", checks: ALL_OK });
    storage.db.close();
    const res = await call("GET", "/api/health/ready");
    expect(res.status).toBe(503);
    expect(res.json.checks.storage).toBe("error");
  });

  it.skipIf(!!pgSkip)(
    "checks PostgreSQL with a round trip: 503 while the server cannot be reached, 200 when it can again",
    async () => {
      const schema = testSchema();
      schemas.push(schema);
      // A pool the test owns, whose idle connections go away quickly, so the next ping opens a new one.
      const pool = new pg.Pool({ connectionString: POSTGRES_URL, max: 2, idleTimeoutMillis: 20 });
      pool.on("error", () => {});
      try {
        const storage = await createPostgresStorage({ pool, schema });
        const { call } = await setup({ storage, healthTimeoutMs: 1500 });
        expect((await call("GET", "/api/health/ready")).json).toEqual({ status: "ok", checks: ALL_OK });
        const options = (pool as unknown as { options: { connectionString: string } }).options;
        const reachable = options.connectionString;
        // The database "goes away": every new connection is refused.
        const unreachable = new URL(reachable);
        unreachable.hostname = "127.0.0.1";
        unreachable.port = "1";
        options.connectionString = unreachable.toString();
        await new Promise((r) => setTimeout(r, 100));
        const down = await call("GET", "/api/health/ready");
        expect(down.status).toBe(503);
        expect(down.json).toEqual({ status: "unavailable", checks: { ...ALL_OK, storage: "error" } });
        options.connectionString = reachable;
        expect((await call("GET", "/api/health/ready")).status).toBe(200);
      } finally {
        await pool.end();
      }
    },
  );

  it.skipIf(!!redisSkip)(
    "pings a Redis rate limiter and cache: ok when reachable, 503 naming the rate limiter when not",
    async () => {
      const prefix = `dp_test:${process.pid}:health:`;
      const rateLimiter = createRedisRateLimiter({ url: REDIS_URL, prefix });
      const cache = createRedisCache({ url: REDIS_URL, prefix });
      const gone = createRedisRateLimiter({ url: "redis://127.0.0.1:1", prefix });
      try {
        const up = await setup({ rateLimiter, cache });
        expect((await up.call("GET", "/api/health/ready")).json).toEqual({ status: "ok", checks: ALL_OK });
        const down = await setup({ rateLimiter: gone, cache, healthTimeoutMs: 500 });
        const res = await down.call("GET", "/api/health/ready");
        expect(res.status).toBe(503);
        expect(res.json).toEqual({ status: "unavailable", checks: { ...ALL_OK, rateLimiter: "error" } });
      } finally {
        await Promise.all([rateLimiter.close(), cache.close(), gone.close()]);
      }
    },
  );

  it("answers 503 draining once api.drain() is called, with the checks still reported, while liveness stays 200", async () => {
    const { api, call } = await setup();
    expect(api.draining).toBe(false);
    api.drain();
    expect(api.draining).toBe(true);
    const res = await call("GET", "/api/health/ready");
    expect(res.status).toBe(503);
    expect(res.json).toEqual({ status: "draining", checks: ALL_OK });
    expect((await call("GET", "/api/health/live")).status).toBe(200);
    // Requests that still arrive are served.
    expect((await call("GET", "/api/v1/me", { token: TOKENS.sync })).status).toBe(200);
  });
});
