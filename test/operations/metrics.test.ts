import { describe, expect, it } from "vitest";
import { createAdmin } from "../../src/admin/index.js";
import { createMemoryStorage } from "../../src/memory/memory-storage.js";
import { createPrometheusMetrics } from "../../src/metrics/index.js";
import { type Connector, UpstreamThrottledError } from "../../src/ports/connector.js";
import type { Storage } from "../../src/ports/storage.js";
import { webhookFixture } from "../../src/testing/conformance/webhooks.js";
import { setup } from "../support/api.js";
import { TOKENS } from "../support/fixture.js";

interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

interface Exposition {
  samples: Sample[];
  types: Map<string, string>;
  help: Map<string, string>;
}

/**
 * The Prometheus text format (0.0.4) as a scraper reads it: `# HELP`/`# TYPE`
 * lines, then `name{label="value",…} number` samples, label values with
 * `\\`, `\"` and `\n` escapes. Anything else on a line is a format error.
 */
function parseExposition(text: string): Exposition {
  const samples: Sample[] = [];
  const types = new Map<string, string>();
  const help = new Map<string, string>();
  for (const line of text.split("\n")) {
    if (line === "") continue;
    const meta = /^# (HELP|TYPE) ([a-zA-Z_:][a-zA-Z0-9_:]*) (.*)$/.exec(line);
    if (meta) {
      (meta[1] === "TYPE" ? types : help).set(meta[2]!, meta[3]!);
      continue;
    }
    // Values as Go's ParseFloat reads them (Prometheus' own parser): NaN and Inf in any case.
    const sample = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? ([-+]?(?:[0-9.]+(?:e[-+]?[0-9]+)?|inf|nan))$/i.exec(line);
    if (!sample) throw new Error(`not a valid exposition line: ${line}`);
    const labels: Record<string, string> = {};
    const body = sample[2] ?? "";
    const pair = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)",?/gy;
    let consumed = 0;
    for (let m = pair.exec(body); m; m = pair.exec(body)) {
      labels[m[1]!] = m[2]!.replace(/\\(.)/g, (_, c: string) => (c === "n" ? "\n" : c));
      consumed = pair.lastIndex;
    }
    if (consumed !== body.length) throw new Error(`bad labels in: ${line}`);
    const text = sample[3]!.toLowerCase();
    const number = text.endsWith("nan")
      ? Number.NaN
      : text.endsWith("inf")
        ? text.startsWith("-")
          ? -Infinity
          : Infinity
        : Number(text);
    samples.push({ name: sample[1]!, labels, value: number });
  }
  return { samples, types, help };
}

/**
 * The value of the one sample with this name and exactly these labels (0 when absent, as Prometheus treats a missing
 * counter).
 */
function value(exposition: Exposition, name: string, labels: Record<string, string> = {}): number {
  const found = exposition.samples.filter((s) => s.name === name && sameLabels(s.labels, labels));
  if (found.length > 1) throw new Error(`${name} ${JSON.stringify(labels)} matches ${found.length} samples`);
  return found[0]?.value ?? 0;
}

function sameLabels(a: Record<string, string>, b: Record<string, string>): boolean {
  const keys = Object.keys(a);
  return keys.length === Object.keys(b).length && keys.every((k) => a[k] === b[k]);
}

const METRICS_TOKEN = "metrics-token-0123456789abcdef";

async function scrape(call: Awaited<ReturnType<typeof setup>>["call"]): Promise<Exposition> {
  const res = await call("GET", "/api/metrics", { headers: { authorization: `Bearer ${METRICS_TOKEN}` } });
  expect(res.status).toBe(200);
  expect(res.headers.get("content-type")).toBe("text/plain; version=0.0.4; charset=utf-8");
  return parseExposition(res.text);
}

/** A memory connector whose calls answer in turn: rows, then throttled. */
function scriptedConnector(): Connector & { calls: number } {
  const connector = {
    calls: 0,
    isSpatial: () => false,
    async query() {
      connector.calls++;
      if (connector.calls === 1)
        return { kind: "rows" as const, rows: [{ store_id: "S1", city: "Lyon" }], hasMore: false };
      throw new UpstreamThrottledError("slow down", 3);
    },
  };
  return connector;
}

describe("GET /api/metrics", () => {
  it("answers 404 when metrics are not enabled", async () => {
    const { call } = await setup();
    const res = await call("GET", "/api/metrics");
    expect(res.status).toBe(404);
    expect(res.json.error).toMatchObject({ code: "not_found", message: "metrics are not enabled on this server" });
  });

  it("requires the metrics token when one is set: 401 without it or with a wrong one", async () => {
    const { call } = await setup({ metrics: createPrometheusMetrics(), metricsToken: METRICS_TOKEN });
    for (const authorization of [
      undefined,
      "Bearer wrong",
      `Bearer ${METRICS_TOKEN}x`,
      `Bearer ${METRICS_TOKEN.slice(0, -1)}`,
      `Basic ${METRICS_TOKEN}`,
      "Bearer",
    ]) {
      const res = await call("GET", "/api/metrics", { headers: authorization ? { authorization } : {} });
      expect(res.status, String(authorization)).toBe(401);
      expect(res.json.error.code).toBe("unauthorized");
      expect(res.headers.get("www-authenticate")).toBe("Bearer");
      expect(res.text).not.toContain(METRICS_TOKEN);
    }
    expect((await call("GET", "/api/metrics", { headers: { authorization: `bearer ${METRICS_TOKEN}` } })).status).toBe(
      200,
    );
  });

  it("serves without a token when none is set", async () => {
    const { call } = await setup({ metrics: createPrometheusMetrics() });
    const res = await call("GET", "/api/metrics");
    expect(res.status).toBe(200);
    expect(parseExposition(res.text).types.get("dataport_http_requests_total")).toBe("counter");
  });

  it("counts requests, webhooks, upstream calls, cache results, audit lag and storage operations, in a parseable exposition", async () => {
    const connector = scriptedConnector();
    const metrics = createPrometheusMetrics();
    const { api, call, clock } = await setup({
      fixture: webhookFixture(),
      metrics,
      metricsToken: METRICS_TOKEN,
      connectors: { memory: connector },
    });

    // Requests by route template and status.
    await call("GET", "/api/v1/me", { token: TOKENS.sync });
    await call("GET", "/api/v1/me", { token: TOKENS.sync });
    await call("GET", "/api/v1/me", { token: "dp_test_unknown_0000000000000" });
    await call("GET", "/api/v1/datasets/ds_orders/rows?maxRows=1", { token: TOKENS.sync });
    await call("GET", "/api/v1/datasets/ds_stores/rows?maxRows=1", { token: TOKENS.sync });
    await call("GET", "/api/v1/nowhere");

    // Webhooks: stored, duplicate, rejected by reason.
    const delivery = { "idempotency-key": "delivery-1" };
    expect((await call("POST", "/api/webhooks/hook-open", { body: { a: 1 }, headers: delivery })).json.duplicate).toBe(
      false,
    );
    expect((await call("POST", "/api/webhooks/hook-open", { body: { a: 1 }, headers: delivery })).json.duplicate).toBe(
      true,
    );
    await call("POST", "/api/webhooks/hook-open", { body: { b: 2 } });
    expect(
      (
        await call("POST", "/api/webhooks/hook-open", {
          body: "{not json",
          headers: { "content-type": "application/json" },
        })
      ).status,
    ).toBe(400);
    expect((await call("POST", "/api/webhooks/hook-gh", { body: { a: 1 } })).status).toBe(401);
    expect((await call("POST", "/api/webhooks/no-such-hook", { body: { a: 1 } })).status).toBe(404);

    // Connection queries: miss (upstream ok), hit, then no-cache: the upstream throttles, the last good result is
    // served stale.
    const query = "/api/v1/connections/conn_retail/query?limit=5";
    expect((await call("GET", query, { token: TOKENS.sync })).json.cached).toBe(false);
    expect((await call("GET", query, { token: TOKENS.sync })).json.cached).toBe(true);
    expect(
      (await call("GET", query, { token: TOKENS.sync, headers: { "cache-control": "no-cache" } })).json.stale,
    ).toBe(true);
    expect(connector.calls).toBe(2);

    // Audit feed lag: an event stored now, read 65 s later.
    await createAdmin(api).recordAuditEvent({
      teamId: "team_ops",
      category: "audit",
      action: "dashboard.updated",
      actor: { type: "user", id: "usr_ada", email: "ada@northwind.test" },
      target: { type: "dashboard", id: "dash_1" },
      outcome: "success",
      ip: null,
      userAgent: null,
    });
    clock.advance(65_000);
    const feed = await call("GET", "/api/v1/audit?format=raw&limit=1000", { token: TOKENS.sync });
    expect(feed.status).toBe(200);

    const m = await scrape(call);
    const me = { method: "GET", route: "/api/v1/me" };
    expect(value(m, "dataport_http_requests_total", { ...me, status: "200" })).toBe(2);
    expect(value(m, "dataport_http_requests_total", { ...me, status: "401" })).toBe(1);
    expect(
      value(m, "dataport_http_requests_total", { method: "GET", route: "/api/v1/datasets/:id/rows", status: "200" }),
    ).toBe(2);
    expect(value(m, "dataport_http_requests_total", { method: "GET", route: "none", status: "404" })).toBe(1);
    expect(
      value(m, "dataport_http_requests_total", { method: "POST", route: "/api/webhooks/:id", status: "200" }),
    ).toBe(3);
    // No series carries a raw URL or id.
    expect(m.samples.every((s) => !/ds_orders|hook-open|nowhere|\?/.test(s.labels.route ?? ""))).toBe(true);

    // The histogram: cumulative buckets ending in +Inf = count, and a positive sum.
    const okMe = { ...me, status: "200" };
    const buckets = m.samples.filter(
      (s) =>
        s.name === "dataport_http_request_duration_seconds_bucket" &&
        s.labels.route === me.route &&
        s.labels.status === "200",
    );
    expect(buckets.length).toBeGreaterThan(5);
    for (let i = 1; i < buckets.length; i++) expect(buckets[i]!.value).toBeGreaterThanOrEqual(buckets[i - 1]!.value);
    expect(buckets.at(-1)!.labels.le).toBe("+Inf");
    expect(buckets.at(-1)!.value).toBe(2);
    expect(value(m, "dataport_http_request_duration_seconds_count", okMe)).toBe(2);
    expect(value(m, "dataport_http_request_duration_seconds_sum", okMe)).toBeGreaterThan(0);
    expect(m.types.get("dataport_http_request_duration_seconds")).toBe("histogram");

    expect(value(m, "dataport_webhook_deliveries_total", { outcome: "stored" })).toBe(2);
    expect(value(m, "dataport_webhook_deliveries_total", { outcome: "duplicate" })).toBe(1);
    expect(value(m, "dataport_webhook_deliveries_total", { outcome: "rejected" })).toBe(3);
    expect(value(m, "dataport_webhook_rejections_total", { reason: "invalid_body" })).toBe(1);
    expect(value(m, "dataport_webhook_rejections_total", { reason: "invalid_signature" })).toBe(1);
    expect(value(m, "dataport_webhook_rejections_total", { reason: "not_found" })).toBe(1);

    expect(value(m, "dataport_connection_cache_total", { connection_type: "memory", result: "miss" })).toBe(1);
    expect(value(m, "dataport_connection_cache_total", { connection_type: "memory", result: "hit" })).toBe(1);
    expect(value(m, "dataport_connection_cache_total", { connection_type: "memory", result: "stale" })).toBe(1);
    expect(value(m, "dataport_upstream_calls_total", { connection_type: "memory", outcome: "ok" })).toBe(1);
    expect(value(m, "dataport_upstream_calls_total", { connection_type: "memory", outcome: "throttled" })).toBe(1);
    expect(value(m, "dataport_upstream_call_duration_seconds_count", { connection_type: "memory" })).toBe(2);

    expect(value(m, "dataport_audit_feed_lag_seconds")).toBe(65);

    expect(
      value(m, "dataport_storage_operation_duration_seconds_count", { operation: "ingestWebhookRow", outcome: "ok" }),
    ).toBe(3);
    expect(
      value(m, "dataport_storage_operation_duration_seconds_count", { operation: "findApiKeyWithTeam", outcome: "ok" }),
    ).toBeGreaterThanOrEqual(8);
    // Process metrics are opt-in.
    expect(m.samples.some((s) => s.name.startsWith("dataport_process_"))).toBe(false);
  });

  it("counts upstream and storage timeouts by outcome", async () => {
    const store = createMemoryStorage();
    let hang = false;
    const slow: Storage = {
      ...store,
      catalog: { ...store.catalog, getDataset: (id) => (hang ? new Promise(() => {}) : store.catalog.getDataset(id)) },
    };
    const never: Connector = { isSpatial: () => false, query: () => new Promise(() => {}) };
    const { call } = await setup({
      storage: slow,
      metrics: createPrometheusMetrics(),
      metricsToken: METRICS_TOKEN,
      connectors: { memory: never },
      storageTimeoutMs: 60,
      upstreamTimeoutMs: 60,
    });
    expect((await call("GET", "/api/v1/connections/conn_retail/query", { token: TOKENS.sync })).status).toBe(504);
    hang = true;
    expect((await call("GET", "/api/v1/datasets/ds_orders", { token: TOKENS.sync })).status).toBe(503);
    const m = await scrape(call);
    expect(value(m, "dataport_upstream_calls_total", { connection_type: "memory", outcome: "timeout" })).toBe(1);
    expect(value(m, "dataport_connection_cache_total", { connection_type: "memory", result: "miss" })).toBe(1);
    expect(
      value(m, "dataport_storage_operation_duration_seconds_count", { operation: "getDataset", outcome: "timeout" }),
    ).toBe(1);
    expect(
      value(m, "dataport_http_requests_total", { method: "GET", route: "/api/v1/datasets/:id", status: "503" }),
    ).toBe(1);
    expect(
      value(m, "dataport_http_requests_total", {
        method: "GET",
        route: "/api/v1/connections/:id/query",
        status: "504",
      }),
    ).toBe(1);
  });

  it("keeps each API's series in its own registry and can add process metrics", async () => {
    const a = createPrometheusMetrics({ processMetrics: true });
    const b = createPrometheusMetrics();
    const one = await setup({ metrics: a });
    await setup({ metrics: b });
    await one.call("GET", "/api/health/live");
    const exposedA = parseExposition((await a.expose()).body);
    const exposedB = parseExposition((await b.expose()).body);
    expect(
      value(exposedA, "dataport_http_requests_total", { method: "GET", route: "/api/health/live", status: "200" }),
    ).toBe(1);
    expect(
      value(exposedB, "dataport_http_requests_total", { method: "GET", route: "/api/health/live", status: "200" }),
    ).toBe(0);
    expect(exposedA.samples.some((s) => s.name === "dataport_process_cpu_seconds_total")).toBe(true);
  });
});

describe("the exposition parser used above", () => {
  it("reads escapes and refuses malformed lines", () => {
    const parsed = parseExposition(
      '# TYPE x counter\nx{a="q\\"uote",b="back\\\\slash"} 3\ny 1.5e+3\nz Nan\nw{le="+Inf"} +Inf\n',
    );
    expect(parsed.samples).toEqual([
      { name: "x", labels: { a: 'q"uote', b: "back\\slash" }, value: 3 },
      { name: "y", labels: {}, value: 1500 },
      { name: "z", labels: {}, value: Number.NaN },
      { name: "w", labels: { le: "+Inf" }, value: Infinity },
    ]);
    expect(() => parseExposition("x{a=1} 2")).toThrow(/bad labels/);
    expect(() => parseExposition("x 2 3 4")).toThrow(/not a valid exposition line/);
  });
});
