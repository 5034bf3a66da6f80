import { describe, expect, it } from "vitest";
import { createAdmin } from "../src/admin/index.js";
import { memoryConnector } from "../src/connectors/memory.js";
import { createMemoryStorage } from "../src/memory/memory-storage.js";
import type { Connector, ConnectorResult } from "../src/ports/connector.js";
import { UpstreamThrottledError, UpstreamUnavailableError } from "../src/ports/connector.js";
import { NOW, setup } from "./support/api.js";
import { TOKENS, testFixture } from "./support/fixture.js";

const feature = (n: number) => ({
  type: "Feature",
  id: n,
  geometry: { type: "Point", coordinates: [n, n] },
  properties: { parcel: n, zone: n % 2 ? "A" : "B" },
});

const STORES = [
  { store_id: "S1", city: "Lyon", size: 3 },
  { store_id: "S2", city: "Paris", size: 1 },
  { store_id: "S3", city: "Nantes", size: 2 },
  { store_id: "S4", city: "Lyon", size: null },
];

/** The base fixture plus a memory connection with a table and two layers, a second team's connection and a webhook. */
function fixture() {
  const f = testFixture() as any;
  f.connections[0].config = {
    tables: { stores: STORES },
    layers: {
      parcels: {
        featureCollection: { type: "FeatureCollection", features: [1, 2, 3, 4, 5].map(feature) },
        maxRecordCount: 3,
      },
      small: {
        featureCollection: { type: "FeatureCollection", features: [1, 2].map(feature), crs: { type: "name" } },
        maxRecordCount: 3,
      },
    },
  };
  f.connections.push(
    {
      id: "conn_geo",
      teamId: "team_ops",
      name: "Geo",
      type: "memory",
      createdAt: "2026-09-01T00:00:00Z",
      config: {
        layers: {
          parcels: {
            featureCollection: { type: "FeatureCollection", features: [1, 2, 3, 4, 5].map(feature) },
            maxRecordCount: 3,
          },
          small: {
            featureCollection: { type: "FeatureCollection", features: [1, 2].map(feature), crs: { type: "name" } },
            maxRecordCount: 3,
          },
        },
      },
    },
    {
      id: "conn_hidden",
      teamId: "team_ops",
      name: "Hidden",
      type: "memory",
      createdAt: "2026-09-01T00:00:00Z",
      config: { tables: { t: [{ a: 1 }] } },
    },
    {
      id: "conn_mkt",
      teamId: "team_mkt",
      name: "Mkt",
      type: "memory",
      createdAt: "2026-09-01T00:00:00Z",
      config: { tables: { t: [{ a: 1 }] } },
    },
    {
      id: "conn_hook",
      teamId: "team_ops",
      name: "Hook",
      type: "webhook",
      createdAt: "2026-09-01T00:00:00Z",
      config: { endpointId: "ep_1", signingSecret: null },
    },
    {
      id: "conn_slow",
      teamId: "team_ops",
      name: "Controlled",
      type: "controlled",
      createdAt: "2026-09-01T00:00:00Z",
      config: { cacheTtlSeconds: 30 },
    },
    {
      id: "conn_tight",
      teamId: "team_ops",
      name: "Tight",
      type: "controlled",
      createdAt: "2026-09-01T00:00:00Z",
      config: { ratePerSecond: 0.1, burst: 1 },
    },
  );
  const ds = (id: string, connectionId: string, source: string | null, columns: unknown[] = []) => ({
    id,
    teamId: connectionId === "conn_mkt" ? "team_mkt" : "team_ops",
    name: id,
    type: "connection",
    connectionId,
    source,
    columns,
    rows: [],
    lastRefreshedAt: null,
    updatedAt: "2026-10-03T00:00:00Z",
  });
  f.datasets.push(
    ds("ds_geo_parcels", "conn_geo", "parcels"),
    ds("ds_geo_small", "conn_geo", "small"),
    ds("ds_hidden", "conn_hidden", "t"),
    ds("ds_mkt", "conn_mkt", "t"),
    ds("ds_hook", "conn_hook", null),
    ds("ds_slow", "conn_slow", "anything"),
    ds("ds_tight", "conn_tight", "anything"),
    ds("ds_missing", "conn_retail", "nope"),
  );
  // ds_stores declares store_id and city; size is only known to the source.
  f.datasets.find((d: any) => d.id === "ds_stores").columns.push({ name: "size", type: "number" });
  f.apiKeys[0].allowlist.connections.push("conn_geo", "conn_mkt", "conn_hook", "conn_slow", "conn_tight");
  return f;
}

/** A connector that counts calls and answers what the test says, after an optional gate. */
function controlled() {
  const state = {
    calls: 0,
    next: "ok" as "ok" | "throttle" | "down",
    gate: null as Promise<void> | null,
    value: "v1",
  };
  const connector: Connector = {
    isSpatial: () => false,
    async query(_connection, query): Promise<ConnectorResult> {
      state.calls++;
      if (state.gate) await state.gate;
      if (state.next === "throttle") throw new UpstreamThrottledError("slow down", 7);
      if (state.next === "down") throw new UpstreamUnavailableError("it broke");
      return { kind: "rows", rows: [{ value: state.value, offset: query.offset }], hasMore: false };
    },
  };
  return { state, connector };
}

/** The memory connector with a call counter. */
function countedMemory() {
  const inner = memoryConnector();
  const counter = { calls: 0 };
  const connector: Connector = { ...inner, query: (c, q) => (counter.calls++, inner.query(c, q)) };
  return { counter, connector };
}

async function start() {
  const storage = createMemoryStorage();
  const memory = countedMemory();
  const ctl = controlled();
  const env = await setup({
    fixture: fixture(),
    storage,
    connectors: { memory: memory.connector, controlled: ctl.connector },
  });
  const q = (path: string, init: { token?: string; headers?: Record<string, string> } = {}) =>
    env.call("GET", `/api/v1/connections/${path}`, { token: TOKENS.sync, ...init });
  return { ...env, storage, memory: memory.counter, ctl: ctl.state, q };
}

describe("GET /connections/{id}/query, tabular", () => {
  it("answers rows with the documented metadata, then the same query from the cache", async () => {
    const { q, memory } = await start();
    const first = await q("conn_retail/query?datasetId=ds_stores&limit=2");
    expect(first.status).toBe(200);
    expect(first.json).toEqual({
      success: true,
      data: [STORES[0], STORES[1]],
      cached: false,
      metadata: {
        connectionId: "conn_retail",
        connectionName: "Retail warehouse",
        datasetId: "ds_stores",
        datasetName: "Stores",
        sourceType: "memory",
        returnedRows: 2,
        offset: 0,
        limit: 2,
        hasMore: true,
        columns: ["store_id", "city", "size"],
        orderBy: null,
        orderDirection: "ASC",
        fetchedAt: NOW,
      },
    });
    const second = await q("conn_retail/query?limit=2&datasetId=ds_stores");
    expect(second.json.cached).toBe(true);
    expect(second.json.data).toEqual(first.json.data);
    expect(memory.calls).toBe(1);
  });

  it("pushes filters, ordering and paging to the source", async () => {
    const { q } = await start();
    const filters = encodeURIComponent(JSON.stringify({ city: "Lyon" }));
    const lyon = await q(`conn_retail/query?datasetId=ds_stores&filters=${filters}`);
    expect(lyon.json.data.map((r: any) => r.store_id)).toEqual(["S1", "S4"]);
    expect(lyon.json.metadata).toMatchObject({ returnedRows: 2, hasMore: false, limit: 100 });

    const ordered = await q("conn_retail/query?datasetId=ds_stores&orderBy=size&orderDirection=DESC&offset=1&limit=2");
    expect(ordered.json.data.map((r: any) => r.store_id)).toEqual(["S3", "S2"]);
    expect(ordered.json.metadata).toMatchObject({
      offset: 1,
      limit: 2,
      returnedRows: 2,
      hasMore: true,
      orderBy: "size",
      orderDirection: "DESC",
    });

    const last = await q("conn_retail/query?datasetId=ds_stores&orderBy=size&orderDirection=desc&offset=3&limit=2");
    expect(last.json.data.map((r: any) => r.store_id)).toEqual(["S4"]);
    expect(last.json.metadata.hasMore).toBe(false);
  });

  it("needs datasetId when the connection carries several datasets, and only one of its own", async () => {
    const { q } = await start();
    const missing = await q("conn_retail/query");
    expect(missing.status).toBe(400);
    expect(missing.json.error).toMatchObject({
      code: "invalid_parameter",
      details: { parameter: "datasetId", datasetIds: ["ds_missing", "ds_stores"] },
    });
    const foreign = await q("conn_retail/query?datasetId=ds_orders");
    expect(foreign.status).toBe(400);
    expect(foreign.json.error.details.parameter).toBe("datasetId");
    const single = await q("conn_hidden/query", { token: TOKENS.sessionAda });
    expect(single.status).toBe(200);
    expect(single.json.data).toEqual([{ a: 1 }]);
  });

  it("refuses bad input with 400 invalid_parameter naming the parameter", async () => {
    const { q, memory } = await start();
    const cases: Array<[string, string]> = [
      ["filters=%7Bnot-json", "filters"],
      ["filters=%5B1%2C2%5D", "filters"],
      ["params=nope", "params"],
      ["orderDirection=UP", "orderDirection"],
      ["orderBy=nope", "orderBy"],
      ["limit=-1", "limit"],
      ["limit=0", "limit"],
      ["limit=1001", "limit"],
      ["offset=-5", "offset"],
      ["format=csv", "format"],
      ["format=geojson", "format"],
      [`filters=${encodeURIComponent('{"nope":1}')}`, "filters"],
      [`params=${encodeURIComponent('{"where":"1=1"}')}`, "params"],
    ];
    for (const [query, parameter] of cases) {
      const res = await q(`conn_retail/query?datasetId=ds_stores&${query}`);
      expect(res.status, query).toBe(400);
      expect(res.json.error.code, query).toBe("invalid_parameter");
      expect(res.json.error.details.parameter, query).toBe(parameter);
    }
    expect(memory.calls).toBe(0);
  });

  it("lets the source reject a column the dataset does not declare", async () => {
    const { q } = await start();
    const res = await q("conn_hidden/query?orderBy=zzz", { token: TOKENS.sessionAda });
    expect(res.status).toBe(400);
    expect(res.json.error).toMatchObject({ code: "invalid_parameter", details: { parameter: "orderBy" } });
  });

  it("404s a connection outside the allowlist, of another team, or unknown; 403 without data:read", async () => {
    const { q } = await start();
    for (const [path, token] of [
      ["conn_hidden/query", TOKENS.sync],
      ["conn_mkt/query", TOKENS.sync],
      ["conn_nope/query", TOKENS.sync],
      ["conn_mkt/query", TOKENS.sessionAda],
    ] as const) {
      const res = await q(path, { token });
      expect(res.status, path).toBe(404);
      expect(res.json.error.code).toBe("not_found");
      expect(res.json.error.message).toBe("connection not found");
    }
    const scope = await q("conn_retail/query", { token: TOKENS.readOnly });
    expect(scope.status).toBe(403);
    expect(scope.json.error.code).toBe("insufficient_scope");
  });

  it("400s a webhook connection (no upstream) and answers 502 when the source is gone", async () => {
    const { q } = await start();
    const hook = await q("conn_hook/query");
    expect(hook.status).toBe(400);
    expect(hook.json.error.details.parameter).toBe("id");
    const gone = await q("conn_retail/query?datasetId=ds_missing");
    expect(gone.status).toBe(502);
    expect(gone.json.error.code).toBe("upstream_unavailable");
  });

  it("writes a data_access audit event for each query", async () => {
    const { q, storage } = await start();
    await q("conn_retail/query?datasetId=ds_stores");
    await q("conn_retail/query?datasetId=ds_stores");
    const events = storage.state.auditLog.map((e) => e.event).filter((e) => e.action === "connection.query");
    expect(events).toHaveLength(2);
    expect(events[0]).toMatchObject({
      teamId: "team_ops",
      category: "data_access",
      actor: { type: "api-key", id: "key_sync", name: "Warehouse sync" },
      target: { type: "connection", id: "conn_retail" },
      outcome: "success",
      ip: "198.51.100.7",
    });
  });
});

describe("GET /connections/{id}/query, GeoJSON", () => {
  it("returns the first maxRecordCount features with truncated: true when the layer holds more", async () => {
    const { q } = await start();
    const res = await q("conn_geo/query?datasetId=ds_geo_parcels&format=geojson");
    expect(res.status).toBe(200);
    expect(res.json).toEqual({
      success: true,
      geojson: { type: "FeatureCollection", features: [1, 2, 3].map(feature) },
      metadata: { connectionId: "conn_geo", datasetId: "ds_geo_parcels", sourceType: "memory", truncated: true },
      cached: false,
    });
  });

  it("returns the collection untouched with truncated: false when it fits", async () => {
    const { q } = await start();
    const res = await q("conn_geo/query?datasetId=ds_geo_small&format=geojson");
    expect(res.json.geojson).toEqual({
      type: "FeatureCollection",
      features: [1, 2].map(feature),
      crs: { type: "name" },
    });
    expect(res.json.metadata.truncated).toBe(false);
  });

  it("pages a layer with resultOffset in params; the last page is not truncated", async () => {
    const { q } = await start();
    const params = encodeURIComponent(JSON.stringify({ resultOffset: 3 }));
    const res = await q(`conn_geo/query?datasetId=ds_geo_parcels&format=geojson&params=${params}`);
    expect(res.json.geojson.features.map((f: any) => f.id)).toEqual([4, 5]);
    expect(res.json.metadata.truncated).toBe(false);
  });

  it("answers a layer's properties as rows when queried tabular", async () => {
    const { q } = await start();
    const res = await q(`conn_geo/query?datasetId=ds_geo_parcels&filters=${encodeURIComponent('{"zone":"B"}')}`);
    expect(res.json.data).toEqual([
      { parcel: 2, zone: "B" },
      { parcel: 4, zone: "B" },
    ]);
  });

  it("refuses tabular filters and orderBy with format=geojson", async () => {
    const { q } = await start();
    const res = await q(`conn_geo/query?datasetId=ds_geo_parcels&format=geojson&orderBy=zone`);
    expect(res.status).toBe(400);
    expect(res.json.error.details.parameter).toBe("orderBy");
  });
});

describe("the guard", () => {
  it("expires the cache after the connection's TTL and skips a fresh entry on Cache-Control: no-cache", async () => {
    const { q, ctl, clock } = await start();
    await q("conn_slow/query");
    await q("conn_slow/query");
    expect(ctl.calls).toBe(1);
    clock.advance(29_000);
    expect((await q("conn_slow/query")).json.cached).toBe(true);
    clock.advance(2_000);
    const expired = await q("conn_slow/query");
    expect(expired.json.cached).toBe(false);
    expect(ctl.calls).toBe(2);
    ctl.value = "v2";
    const fresh = await q("conn_slow/query", { headers: { "cache-control": "no-cache" } });
    expect(ctl.calls).toBe(3);
    expect(fresh.json).toMatchObject({ cached: false, data: [{ value: "v2", offset: 0 }] });
    expect((await q("conn_slow/query")).json).toMatchObject({ cached: true, data: [{ value: "v2", offset: 0 }] });
  });

  it("serves the last good result with stale: true after the upstream throttles, beyond the TTL", async () => {
    const { q, ctl, clock } = await start();
    const good = await q("conn_slow/query");
    ctl.next = "throttle";
    clock.advance(3_600_000);
    const stale = await q("conn_slow/query");
    expect(ctl.calls).toBe(2);
    expect(stale.status).toBe(200);
    expect(stale.json).toMatchObject({ success: true, stale: true, cached: true, data: good.json.data });
    expect(stale.json.metadata.fetchedAt).toBe(NOW);
    // Nothing to serve for another query: 429 with the upstream's Retry-After.
    const none = await q("conn_slow/query?offset=1");
    expect(none.status).toBe(429);
    expect(none.json.error.code).toBe("rate_limited");
    expect(none.headers.get("retry-after")).toBe("7");
  });

  it("serves stale on Cache-Control: no-cache when the upstream throttles", async () => {
    const { q, ctl } = await start();
    await q("conn_slow/query");
    ctl.next = "throttle";
    const res = await q("conn_slow/query", { headers: { "cache-control": "no-cache" } });
    expect(res.json).toMatchObject({ stale: true, data: [{ value: "v1", offset: 0 }] });
  });

  it("does not serve stale when the upstream is down: 502", async () => {
    const { q, ctl, clock } = await start();
    await q("conn_slow/query");
    ctl.next = "down";
    clock.advance(60_000);
    const res = await q("conn_slow/query");
    expect(res.status).toBe(502);
    expect(res.json.error).toMatchObject({
      code: "upstream_unavailable",
      message: "the upstream of this connection could not answer: it broke",
    });
  });

  it("applies the per-connection upstream rate limit: stale when it can, else 429 with Retry-After", async () => {
    const { q, ctl } = await start();
    expect((await q("conn_tight/query")).status).toBe(200);
    const refused = await q("conn_tight/query", { headers: { "cache-control": "no-cache" } });
    expect(refused.json).toMatchObject({ stale: true, data: [{ value: "v1", offset: 0 }] });
    const none = await q("conn_tight/query?offset=2");
    expect(none.status).toBe(429);
    expect(none.headers.get("retry-after")).toBe("10");
    expect(none.headers.get("ratelimit-limit")).toBe("1");
    expect(ctl.calls).toBe(1);
  });

  it("names the upstream policy in the current draft's form when the server asks for it", async () => {
    const ctl = controlled();
    const env = await setup({
      fixture: fixture(),
      connectors: { memory: countedMemory().connector, controlled: ctl.connector },
      rateLimitHeaders: "policy",
    });
    const q = (path: string) => env.call("GET", `/api/v1/connections/${path}`, { token: TOKENS.sync });
    expect((await q("conn_tight/query")).status).toBe(200);
    const none = await q("conn_tight/query?offset=2");
    expect(none.status).toBe(429);
    expect([
      none.headers.get("ratelimit-policy"),
      none.headers.get("ratelimit"),
      none.headers.get("ratelimit-limit"),
    ]).toEqual([expect.stringMatching(/^"upstream";q=1;w=\d+$/), '"upstream";r=0;t=10', null]);
  });

  it("does not throttle in-process memory sources by default: 50 distinct queries all reach the source", async () => {
    const { q, memory } = await start();
    const answers = await Promise.all(
      Array.from({ length: 50 }, (_, i) => q(`conn_retail/query?datasetId=ds_stores&offset=${i}`)),
    );
    expect(answers.map((r) => r.status)).toEqual(Array(50).fill(200));
    expect(memory.calls).toBe(50);
  });

  it("treats a failing cache as a miss, never as a failed query", async () => {
    const ctl = controlled();
    const broken = {
      get: async () => Promise.reject(new Error("down")),
      set: async () => Promise.reject(new Error("down")),
      delete: async () => {},
    };
    const { call } = await setup({ fixture: fixture(), cache: broken, connectors: { controlled: ctl.connector } });
    for (let i = 0; i < 2; i++) {
      const res = await call("GET", "/api/v1/connections/conn_slow/query", { token: TOKENS.sync });
      expect(res.status).toBe(200);
      expect(res.json.cached).toBe(false);
    }
    expect(ctl.state.calls).toBe(2);
  });

  it("makes one upstream call for 20 concurrent identical queries", async () => {
    const { q, ctl } = await start();
    let open!: () => void;
    ctl.gate = new Promise<void>((resolve) => (open = resolve));
    const pending = Array.from({ length: 20 }, () => q("conn_slow/query?limit=5"));
    await new Promise((resolve) => setTimeout(resolve, 50));
    open();
    const answers = await Promise.all(pending);
    expect(ctl.calls).toBe(1);
    for (const res of answers) {
      expect(res.status).toBe(200);
      expect(res.json.data).toEqual([{ value: "v1", offset: 0 }]);
    }
    ctl.gate = null;
    await q("conn_slow/query?limit=6");
    expect(ctl.calls).toBe(2);
  });
});

describe("refreshDataset", () => {
  it("pulls a connection dataset into storage and records the run", async () => {
    const { api, call, storage } = await start();
    const admin = createAdmin(api);
    const result = await admin.refreshDataset("ds_stores");
    expect(result).toMatchObject({ datasetId: "ds_stores", ok: true, startedAt: NOW, rowsProcessed: 4, error: null });
    const rows = await call("GET", "/api/v1/datasets/ds_stores/rows", { token: TOKENS.sync });
    expect(rows.json.data).toEqual(STORES);
    expect(rows.json.metadata).toMatchObject({ totalRows: 4, lastUpdated: NOW });
    const dataset = await call("GET", "/api/v1/datasets/ds_stores", { token: TOKENS.sync });
    expect(dataset.json).toMatchObject({
      rowCount: 4,
      lastRefreshedAt: NOW,
      columns: [
        { name: "store_id", type: "string" },
        { name: "city", type: "string" },
        { name: "size", type: "number" },
      ],
    });
    expect(storage.state.refreshRuns.at(-1)).toMatchObject({
      datasetId: "ds_stores",
      startedAt: NOW,
      rowsProcessed: 4,
      error: null,
    });
  });

  it("records a failed run and keeps the previous rows when the upstream fails", async () => {
    const { api, storage } = await start();
    const admin = createAdmin(api);
    const before = structuredClone(storage.state.datasetRows.get("ds_missing"));
    const result = await admin.refreshDataset("ds_missing");
    expect(result).toMatchObject({ ok: false, rowsProcessed: 0, error: "source nope does not exist" });
    expect(storage.state.datasetRows.get("ds_missing")).toEqual(before);
    expect(storage.state.datasets.get("ds_missing")!.lastRefreshedAt).toBeNull();
    expect(storage.state.refreshRuns.at(-1)).toMatchObject({
      datasetId: "ds_missing",
      rowsProcessed: 0,
      error: "source nope does not exist",
    });
  });

  it("shows real runs in GET /space/refresh-history", async () => {
    const { api, call, clock } = await start();
    const admin = createAdmin(api);
    await admin.refreshDataset("ds_stores");
    clock.advance(60_000);
    await admin.refreshDataset("ds_stores", { maxRows: 1 });
    const res = await call("GET", "/api/v1/space/refresh-history?days=1", { token: TOKENS.sync });
    expect(res.status).toBe(200);
    const row = res.json.rows.find((r: any) => r.dataset_id === "ds_stores");
    expect(row).toMatchObject({
      dataset: "Stores",
      connection: "Retail warehouse",
      day: NOW.slice(0, 10),
      runs: 2,
      failures: 1,
      rows_processed: 4,
      last_error: "the source holds more than 1 rows",
    });
  });

  it("fails a run over maxRows without touching the rows, and refuses datasets without a queryable connection", async () => {
    const { api, storage } = await start();
    const admin = createAdmin(api);
    const result = await admin.refreshDataset("ds_stores", { maxRows: 3 });
    expect(result).toMatchObject({ ok: false, error: "the source holds more than 3 rows" });
    expect(storage.state.datasetRows.get("ds_stores")).toEqual([{ store_id: "S1", city: "Lyon" }]);
    await expect(admin.refreshDataset("ds_orders")).rejects.toMatchObject({ status: 400 });
    await expect(admin.refreshDataset("ds_hook")).rejects.toMatchObject({ status: 400 });
    await expect(admin.refreshDataset("ds_nope")).rejects.toMatchObject({ status: 404 });
  });
});
