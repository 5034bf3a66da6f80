import type { ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createDataApi } from "../src/server/api.js";
import { listenerName } from "../src/postgres/catalog-events.js";
import { createPostgresStorage, type PostgresStorage } from "../src/postgres/index.js";
import { createRedisRateLimiter, type RedisRateLimiter } from "../src/redis/index.js";
import { conformanceFixture, TOKENS } from "../src/testing/conformance/fixture.js";
import { fixtureWebhook } from "./support/fixture.js";
import {
  hasRedisServer,
  type PostgresProxy,
  type PrivateRedis,
  startPostgresProxy,
  startPrivateRedis,
  terminateBackends,
} from "./support/faults.js";
import { startServerProcess, stopProcess } from "./support/server-process.js";
import { dropSchemas, POSTGRES_URL, postgresSkipReason, testSchema } from "./support/services.js";

/**
 * Issue 25: the scale-out configuration (PostgreSQL + Redis) survives its
 * dependencies failing. Real example-server processes on the machine's
 * PostgreSQL, with a Redis server and a TCP proxy of this file's own (so
 * stopping Redis or stalling a connection disturbs no other test file), and
 * only this file's backends terminated. Every scenario asserts: the
 * processes stay up, they answer nothing but 2xx, 4xx and quick 503s with
 * Retry-After, every acknowledged delivery is stored exactly once, and they
 * recover without a restart.
 */
const skip = (await postgresSkipReason()) ?? ((await hasRedisServer()) ? undefined : noRedisServer());

function noRedisServer(): string {
  if (process.env.CI === "true")
    throw new Error("redis-server is required when CI=true (the fault suite starts one of its own)");
  console.warn("\n  ⚠ redis-server not found; skipping the fault suite\n");
  return "no redis-server";
}

const ADMIN_TOKEN = "fault_suite_admin_token_0001";
/** A 503 must come at least this quickly (the issue: within about 2 s; slack for a loaded 2-core machine). */
const QUICK_MS = 3000;

interface Answer {
  status: number;
  code: string | null;
  retryAfter: string | null;
  ms: number;
  body: unknown;
}

async function send(url: string, init: RequestInit = {}): Promise<Answer> {
  const started = performance.now();
  const res = await fetch(url, init);
  const text = await res.text();
  let body: unknown = null;
  try {
    body = JSON.parse(text);
  } catch {
    body = text;
  }
  const code = (body as { error?: { code?: string } } | null)?.error?.code ?? null;
  return {
    status: res.status,
    code,
    retryAfter: res.headers.get("retry-after"),
    ms: performance.now() - started,
    body,
  };
}

const auth = (token: string = TOKENS.sync) => ({ authorization: `Bearer ${token}` });
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Only 2xx, 4xx, and 503s that name the dependency, carry Retry-After and came quickly. */
function expectOnlyFaultFreeAnswers(answers: Answer[], unavailable: string[]): void {
  const wrong = answers.filter((a) => !(a.status < 300 || (a.status >= 400 && a.status < 500) || a.status === 503));
  expect(wrong.map((a) => `${a.status} ${a.code}`)).toEqual([]);
  const refused = answers.filter((a) => a.status === 503);
  expect(
    refused.filter((a) => a.retryAfter === null || !unavailable.includes(a.code ?? "")).map((a) => a.code),
  ).toEqual([]);
  expect(refused.filter((a) => a.ms > QUICK_MS).map((a) => Math.round(a.ms))).toEqual([]);
}

function fixture() {
  const f = conformanceFixture() as ReturnType<typeof conformanceFixture> & Record<string, unknown>;
  f.connections = [
    ...f.connections,
    fixtureWebhook("conn_fault_ingest", "fault-ingest"),
    fixtureWebhook("conn_fault_stall", "fault-stall"),
  ] as typeof f.connections;
  return f;
}

describe.skipIf(!!skip)("when a dependency fails (PostgreSQL + Redis)", () => {
  const schema = testSchema("dp_faults");
  const app = `dp_fault_${process.pid}`;
  const dir = mkdtempSync(join(tmpdir(), "dataport-faults-"));
  let redis: PrivateRedis;
  let proxy: PostgresProxy;
  let a: { child: ChildProcess; url: string };
  let b: { child: ChildProcess; url: string };
  let store: PostgresStorage;

  const args = (db: string, port = "0") => [
    "examples/server/main.ts",
    "--db",
    db,
    "--redis",
    redis.url,
    "--fixture",
    join(dir, "space.json"),
    "--port",
    port,
    "--audit-lag",
    "0",
    "--api-rate",
    "10000",
    "--webhook-rate",
    "10000",
    "--admin-token",
    ADMIN_TOKEN,
    "--log",
    "none",
  ];
  const direct = () => `${POSTGRES_URL}?schema=${schema}&application_name=${app}`;

  beforeAll(async () => {
    writeFileSync(join(dir, "space.json"), JSON.stringify(fixture()));
    redis = await startPrivateRedis();
    proxy = await startPostgresProxy();
    // Two instances on one database and one Redis; both start at once (migrations and the seed race too).
    [a, b] = await Promise.all([startServerProcess(args(direct())), startServerProcess(args(direct()))]);
    store = await createPostgresStorage({ connectionString: POSTGRES_URL, schema, maxConnections: 2 });
  }, 90_000);

  afterAll(async () => {
    await Promise.all([a, b].filter(Boolean).map((i) => stopProcess(i.child, "SIGKILL")));
    await store?.close();
    await proxy?.close();
    await redis?.stop();
    await dropSchemas([schema]);
    rmSync(dir, { recursive: true, force: true });
  });

  const alive = () => [a, b].map((i) => i.child.exitCode === null && i.child.signalCode === null);

  async function deliver(base: string, endpoint: string, n: number): Promise<Answer> {
    return send(`${base}/api/webhooks/${endpoint}`, {
      method: "POST",
      headers: { "content-type": "application/json", "webhook-id": `fault-${endpoint}-${n}` },
      body: JSON.stringify({ n, kind: "fault" }),
    });
  }

  /** Each `n` stored in the endpoint's dataset, with how often. */
  async function storedCounts(endpoint: string): Promise<Map<number, number>> {
    const found = await store.webhooks.getWebhookEndpoint(endpoint);
    const page = await store.rows.readDatasetRows(found!.datasetId, {
      offset: 0,
      limit: null,
      columns: null,
      filters: null,
    });
    const counts = new Map<number, number>();
    for await (const row of page.rows) counts.set(Number(row.n), (counts.get(Number(row.n)) ?? 0) + 1);
    return counts;
  }

  it("survives backends terminated during mixed reads and ingest on two instances, loses no acknowledged delivery and recovers", async () => {
    const rows = Array.from({ length: 2500 }, (_, i) => ({ order_id: `F-${i}`, amount: i }));
    const upload = await send(`${a.url}/api/admin/v1/datasets/ds_orders/rows`, {
      method: "PUT",
      headers: { ...auth(ADMIN_TOKEN), "content-type": "application/json" },
      body: JSON.stringify(rows),
    });
    expect(upload.status).toBe(200);

    const answers: Answer[] = [];
    const deliveries = new Map<number, Answer>();
    let next = 0;
    let running = true;
    const worker = async (k: number) => {
      const base = k % 2 === 0 ? a.url : b.url;
      while (running) {
        const pick = next++ % 3;
        if (pick === 0) {
          const n = next;
          const answer = await deliver(base, "fault-ingest", n);
          deliveries.set(n, answer);
          answers.push(answer);
        } else if (pick === 1) {
          answers.push(
            await send(`${base}/api/v1/datasets/ds_orders/rows?maxRows=2000&offset=100`, { headers: auth() }),
          );
        } else {
          answers.push(await send(`${base}/api/v1/me`, { headers: auth() }));
        }
      }
    };
    const load = Promise.all(Array.from({ length: 6 }, (_, k) => worker(k)));
    let terminated = 0;
    for (let round = 0; round < 4; round++) {
      await sleep(700);
      terminated += await terminateBackends(`${app}%`);
      terminated += await terminateBackends(listenerName(schema));
    }
    await sleep(700);
    running = false;
    await load;

    expect(terminated).toBeGreaterThan(0);
    expect(alive()).toEqual([true, true]);
    expect(answers.length).toBeGreaterThan(30);
    expectOnlyFaultFreeAnswers(answers, ["storage_unavailable"]);
    // Whole pages only: a read answered 200 carries the rows its count promised.
    for (const answer of answers) {
      const body = answer.body as { data?: unknown[]; metadata?: { totalRows: number; returnedRows: number } };
      if (answer.status === 200 && body.metadata)
        expect([body.data!.length, body.metadata.totalRows]).toEqual([2000, 2500]);
    }

    // A delivery that got a 503 is sent again, as its sender would, until it is taken (stored, or recognised as
    // stored).
    for (const [n, answer] of deliveries) {
      if (answer.status < 300) continue;
      let again = await deliver(a.url, "fault-ingest", n);
      for (let tries = 0; again.status === 503 && tries < 20; tries++) {
        await sleep(250);
        again = await deliver(a.url, "fault-ingest", n);
      }
      expect(again.status).toBe(200);
    }
    const counts = await storedCounts("fault-ingest");
    expect([...deliveries.keys()].filter((n) => counts.get(n) !== 1)).toEqual([]);
    expect(counts.size).toBe(deliveries.size);

    // Recovered without a restart: every instance answers reads and deliveries again.
    for (const base of [a.url, b.url]) {
      const after = await Promise.all([
        send(`${base}/api/v1/me`, { headers: auth() }),
        deliver(base, "fault-ingest", 1_000_000 + next++),
      ]);
      expect(after.map((x) => x.status)).toEqual([200, 200]);
    }
  }, 120_000);

  it("answers rate-limited requests with a quick 503 while Redis is stopped, reports it in readiness, and recovers when it is back", async () => {
    // Up: the limits are asked of Redis.
    expect((await send(`${a.url}/api/v1/me`, { headers: auth() })).status).toBe(200);
    await redis.stop();
    try {
      const answers: Answer[] = [];
      for (let i = 0; i < 6; i++) {
        answers.push(
          await send(`${a.url}/api/v1/me`, { headers: auth() }),
          await send(`${b.url}/api/v1/me`, { headers: auth() }),
        );
        answers.push(await deliver(a.url, "fault-ingest", 2_000_000 + i));
      }
      expect(alive()).toEqual([true, true]);
      expectOnlyFaultFreeAnswers(answers, ["rate_limiter_unavailable"]);
      expect(answers.map((x) => `${x.status} ${x.code}`)).toEqual(Array(18).fill("503 rate_limiter_unavailable"));
      const ready = await send(`${a.url}/api/health/ready`);
      expect([ready.status, (ready.body as { checks: { rateLimiter: string; storage: string } }).checks]).toEqual([
        503,
        { storage: "ok", rateLimiter: "error", cache: "error" },
      ]);
      // Nothing was stored for a delivery that answered 503.
      const counts = await storedCounts("fault-ingest");
      expect([0, 1, 2, 3, 4, 5].filter((i) => counts.has(2_000_000 + i))).toEqual([]);
    } finally {
      await redis.start();
    }
    // Back by itself: the clients reconnect within a few seconds.
    const deadline = Date.now() + 20_000;
    let statuses: number[] = [];
    while (Date.now() < deadline) {
      statuses = (
        await Promise.all([
          send(`${a.url}/api/v1/me`, { headers: auth() }),
          send(`${b.url}/api/v1/me`, { headers: auth() }),
        ])
      ).map((x) => x.status);
      if (statuses.every((s) => s === 200)) break;
      await sleep(250);
    }
    expect(statuses).toEqual([200, 200]);
    expect((await deliver(b.url, "fault-ingest", 2_000_100)).status).toBe(200);
    expect((await send(`${b.url}/api/health/ready`)).status).toBe(200);
  }, 60_000);

  it("lets requests through unlimited while Redis is stopped when the host opts in (rateLimitFailOpen), and fails closed otherwise", async () => {
    const limiters: RedisRateLimiter[] = [];
    const api = (failOpen: boolean) => {
      const limiter = createRedisRateLimiter({ url: redis.url, prefix: `fault-open-${failOpen}:` });
      limiters.push(limiter);
      return createDataApi({
        storage: store,
        rateLimiter: limiter,
        apiRatePerSecond: 5,
        rateLimitFailOpen: failOpen,
        logger: () => {},
      });
    };
    const open = api(true);
    const closed = api(false);
    const me = async (which: ReturnType<typeof createDataApi>) => {
      const started = performance.now();
      const res = await which.fetch(new Request("http://dataport.test/api/v1/me", { headers: auth() }));
      return {
        status: res.status,
        limited: res.headers.has("ratelimit-limit"),
        retryAfter: res.headers.get("retry-after"),
        ms: performance.now() - started,
      };
    };
    try {
      expect((await me(open)).status).toBe(200);
      expect((await me(closed)).status).toBe(200);
      await redis.stop();
      const answers = [await me(open), await me(closed)];
      expect(answers.map(({ status, limited, retryAfter }) => ({ status, limited, retryAfter }))).toEqual([
        { status: 200, limited: false, retryAfter: null },
        { status: 503, limited: false, retryAfter: "1" },
      ]);
      expect(answers.filter((x) => x.ms > QUICK_MS)).toEqual([]);
    } finally {
      await redis.start();
      await Promise.all(limiters.map((l) => l.close()));
    }
  }, 60_000);

  it("reads an endpoint from the database, quickly, when its listening connection is held silent, and so sees a change made on another instance", async () => {
    const c = await startServerProcess(args(`${proxy.url}?schema=${schema}&application_name=${app}_c`));
    try {
      // Remembered: a few deliveries, so the listener is open and the endpoint cached.
      for (let n = 0; n < 3; n++) expect((await deliver(c.url, "fault-stall", n)).status).toBe(200);
      await sleep(300);
      expect((await deliver(c.url, "fault-stall", 3)).status).toBe(200);
      expect(proxy.stall(/^dataport listener/)).toBe(1);

      const during: Answer[] = [];
      for (let n = 4; n < 8; n++) during.push(await deliver(c.url, "fault-stall", n));
      expect(during.map((x) => x.status)).toEqual([200, 200, 200, 200]);
      expect(during.filter((x) => x.ms > QUICK_MS).map((x) => Math.round(x.ms))).toEqual([]);

      // Instance A signs the endpoint; C (whose listener is silent) must not accept an unsigned delivery any more.
      const signed = await send(`${a.url}/api/admin/v1/connections/conn_fault_stall/signing-secret`, {
        method: "PUT",
        headers: { ...auth(ADMIN_TOKEN), "content-type": "application/json" },
        body: JSON.stringify({ secret: "fault-stall-secret-0001" }),
      });
      expect(signed.status).toBe(200);
      const unsigned = await deliver(c.url, "fault-stall", 8);
      expect([unsigned.status, unsigned.code]).toEqual([401, "invalid_signature"]);
      expect(unsigned.ms).toBeLessThan(QUICK_MS);
      expect(c.child.exitCode).toBe(null);
    } finally {
      await stopProcess(c.child, "SIGKILL");
    }
  }, 60_000);

  it("bounds every call of a stalled database (callTimeoutMs) with a quick 503, and recovers once the stalled connections are given up", async () => {
    const name = `${app}_stalled`;
    const stalled = await createPostgresStorage({
      connectionString: `${proxy.url}?application_name=${name}`,
      schema,
      maxConnections: 2,
      callTimeoutMs: 800,
      statementTimeoutMs: 1500,
      log: () => {},
    });
    try {
      const api = createDataApi({ storage: stalled, logger: () => {} });
      const me = async () => {
        const started = performance.now();
        const res = await api.fetch(new Request("http://dataport.test/api/v1/me", { headers: auth() }));
        const body = (await res.json()) as { error?: { code: string } };
        return {
          status: res.status,
          code: body.error?.code ?? null,
          retryAfter: res.headers.get("retry-after"),
          ms: performance.now() - started,
        };
      };
      expect((await me()).status).toBe(200);
      expect(proxy.stall(new RegExp(`^${name}$`))).toBeGreaterThan(0);
      const during = await me();
      expect({ ...during, ms: during.ms < QUICK_MS }).toEqual({
        status: 503,
        code: "storage_unavailable",
        retryAfter: "1",
        ms: true,
      });
      // The stalled connections are given up after statementTimeoutMs; new ones (not stalled) serve again.
      const deadline = Date.now() + 20_000;
      let status = 0;
      while (Date.now() < deadline && status !== 200) {
        await sleep(250);
        status = (await me()).status;
      }
      expect(status).toBe(200);
    } finally {
      await stalled.close();
    }
  }, 60_000);

  it("answers row reads during bulk replaces with whole pages of the old rows or the new ones, never an error", async () => {
    const sizes = { even: 1500, odd: 1100 };
    const generation = (name: "even" | "odd") =>
      JSON.stringify(Array.from({ length: sizes[name] }, (_, i) => ({ order_id: `${name}-${i}`, amount: i })));
    const answers: Answer[] = [];
    let running = true;
    const reader = async (k: number) => {
      const base = k % 2 === 0 ? a.url : b.url;
      const maxRows = k % 2 === 0 ? 1200 : 50;
      while (running)
        answers.push(await send(`${base}/api/v1/datasets/ds_orders/rows?maxRows=${maxRows}`, { headers: auth() }));
    };
    const readers = Promise.all([0, 1, 2, 3].map(reader));
    const replaces: number[] = [];
    for (let i = 0; i < 8; i++) {
      const name = i % 2 === 0 ? "even" : "odd";
      const res = await send(`${i % 2 === 0 ? a.url : b.url}/api/admin/v1/datasets/ds_orders/rows`, {
        method: "PUT",
        headers: { ...auth(ADMIN_TOKEN), "content-type": "application/json" },
        body: generation(name),
      });
      replaces.push(res.status);
    }
    running = false;
    await readers;
    expect(replaces).toEqual(Array(8).fill(200));
    expect(answers.length).toBeGreaterThan(8);
    expect(answers.filter((x) => x.status !== 200).map((x) => `${x.status} ${x.code}`)).toEqual([]);
    for (const answer of answers) {
      const { data, metadata } = answer.body as { data: Array<{ order_id: string }>; metadata: { totalRows: number } };
      const names = new Set(data.map((r) => r.order_id.split("-")[0]));
      expect(names.size).toBe(1);
      const name = [...names][0] as "even" | "odd" | "F";
      if (name !== "F") expect(metadata.totalRows).toBe(sizes[name]);
    }
    expect(alive()).toEqual([true, true]);
  }, 120_000);
});
