import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { createAdmin } from "../src/admin/index.js";
import { createMemoryStorage } from "../src/memory/memory-storage.js";
import { NOW, setup } from "./support/api.js";
import { TOKENS, testFixture } from "./support/fixture.js";

const SERVICE = "/arcgis/rest/services/Parcels/FeatureServer";

type Mode =
  | "geojson"
  | "truncated-properties"
  | "truncated-top"
  | "throttle"
  | "error-200"
  | "redirect"
  | "huge"
  | "slow"
  | "http-500";

/** A fake FeatureServer: counts requests, records their URLs, answers by mode. */
function fakeFeatureServer() {
  const state = { requests: [] as URL[], mode: "geojson" as Mode };
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const url = new URL(req.url ?? "/", "http://fake");
    state.requests.push(url);
    const json = (status: number, body: unknown, headers: Record<string, string> = {}) => {
      res.writeHead(status, { "content-type": "application/json", ...headers });
      res.end(JSON.stringify(body));
    };
    if (url.pathname !== `${SERVICE}/0/query`) return json(404, { error: { code: 404, message: "not found" } });
    const features = [1, 2].map((n) => ({
      type: "Feature",
      id: n,
      geometry: { type: "Point", coordinates: [n, n] },
      properties: { OBJECTID: n },
    }));
    switch (state.mode) {
      case "throttle":
        return json(429, { error: { code: 429, message: "Too many requests" } }, { "retry-after": "12" });
      case "error-200":
        return json(200, { error: { code: 400, message: "Invalid query parameters", details: [] } });
      case "http-500":
        return json(500, { oops: true });
      case "redirect":
        res.writeHead(302, { location: `${evil.origin}/stolen` });
        return res.end();
      case "huge":
        return json(200, { type: "FeatureCollection", features: Array.from({ length: 500 }, () => features[0]) });
      case "slow":
        return void setTimeout(() => json(200, { type: "FeatureCollection", features }), 1_000);
      case "truncated-properties":
        return json(200, { type: "FeatureCollection", features, properties: { exceededTransferLimit: true } });
      case "truncated-top":
        return json(200, { type: "FeatureCollection", features, exceededTransferLimit: true });
      default:
        if (url.searchParams.get("f") === "json") {
          return json(200, {
            features: [{ attributes: { OBJECTID: 1, NAME: "A" } }, { attributes: { OBJECTID: 2, NAME: "B" } }],
          });
        }
        return json(200, { type: "FeatureCollection", features });
    }
  });
  return { state, server };
}

/** Another host that must never be reached. */
function evilServer() {
  const state = { requests: 0 };
  const server = createServer((_req, res) => {
    state.requests++;
    res.end("{}");
  });
  return { state, server };
}

async function listen(server: Server): Promise<string> {
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

const upstream = fakeFeatureServer();
const evilHost = evilServer();
const evil = { origin: "" };
let origin = "";

beforeAll(async () => {
  origin = await listen(upstream.server);
  evil.origin = await listen(evilHost.server);
});
afterAll(async () => {
  upstream.server.closeAllConnections();
  evilHost.server.closeAllConnections();
  await Promise.all([upstream.server, evilHost.server].map((s) => new Promise((resolve) => s.close(resolve))));
});
beforeEach(() => {
  upstream.state.requests = [];
  upstream.state.mode = "geojson";
  evilHost.state.requests = 0;
});

async function start(config: Record<string, unknown> = {}, source = "0") {
  const f = testFixture() as any;
  f.connections.push({
    id: "conn_gis",
    teamId: "team_ops",
    name: "Parcels service",
    type: "arcgis",
    config: { url: `${origin}${SERVICE}`, ...config },
    createdAt: "2026-09-01T00:00:00Z",
  });
  f.datasets.push({
    id: "ds_parcels",
    teamId: "team_ops",
    name: "Parcels",
    type: "connection",
    connectionId: "conn_gis",
    source,
    columns: [
      { name: "OBJECTID", type: "number" },
      { name: "NAME", type: "string" },
    ],
    rows: [],
    lastRefreshedAt: null,
    updatedAt: "2026-10-03T00:00:00Z",
  });
  f.apiKeys[0].allowlist.connections.push("conn_gis");
  const storage = createMemoryStorage();
  const env = await setup({ fixture: f, storage });
  const geo = (params?: unknown, headers?: Record<string, string>) =>
    env.call(
      "GET",
      `/api/v1/connections/conn_gis/query?format=geojson${params === undefined ? "" : `&params=${encodeURIComponent(JSON.stringify(params))}`}`,
      {
        token: TOKENS.sync,
        ...(headers ? { headers } : {}),
      },
    );
  return { ...env, storage, geo };
}

describe("arcgis connector", () => {
  it("asks the layer for f=geojson with params passed unchanged and returns the collection untouched", async () => {
    const { geo } = await start();
    const params = {
      geometry: { xmin: -1, ymin: -1, xmax: 3, ymax: 3, spatialReference: { wkid: 4326 } },
      geometryType: "esriGeometryEnvelope",
      inSR: 4326,
      outFields: "OBJECTID,NAME",
      returnGeometry: true,
      where: "NAME = 'A'",
    };
    const res = await geo(params);
    expect(res.status).toBe(200);
    expect(res.json).toEqual({
      success: true,
      geojson: {
        type: "FeatureCollection",
        features: [1, 2].map((n) => ({
          type: "Feature",
          id: n,
          geometry: { type: "Point", coordinates: [n, n] },
          properties: { OBJECTID: n },
        })),
      },
      metadata: { connectionId: "conn_gis", datasetId: "ds_parcels", sourceType: "arcgis", truncated: false },
      cached: false,
    });
    expect(upstream.state.requests).toHaveLength(1);
    const sent = upstream.state.requests[0]!;
    expect(sent.pathname).toBe(`${SERVICE}/0/query`);
    expect(Object.fromEntries(sent.searchParams)).toEqual({
      geometry: JSON.stringify(params.geometry),
      geometryType: "esriGeometryEnvelope",
      inSR: "4326",
      outFields: "OBJECTID,NAME",
      returnGeometry: "true",
      where: "NAME = 'A'",
      f: "geojson",
    });
  });

  it("answers an identical query from the cache: the upstream counts one request", async () => {
    const { geo } = await start();
    const first = await geo({ where: "1=1" });
    const second = await geo({ where: "1=1" });
    expect([first.json.cached, second.json.cached]).toEqual([false, true]);
    expect(upstream.state.requests).toHaveLength(1);
    await geo({ where: "OBJECTID > 1" });
    expect(upstream.state.requests).toHaveLength(2);
    await geo({ where: "1=1" }, { "cache-control": "no-cache" });
    expect(upstream.state.requests).toHaveLength(3);
  });

  it("reads exceededTransferLimit under properties and at top level as truncated", async () => {
    const { geo } = await start();
    upstream.state.mode = "truncated-properties";
    const a = await geo({ where: "a" });
    upstream.state.mode = "truncated-top";
    const b = await geo({ where: "b" });
    upstream.state.mode = "geojson";
    const c = await geo({ where: "c" });
    expect([a.json.metadata.truncated, b.json.metadata.truncated, c.json.metadata.truncated]).toEqual([
      true,
      true,
      false,
    ]);
    expect(a.json.geojson.properties).toEqual({ exceededTransferLimit: true });
  });

  it("serves the last good result with stale: true after a forced 429, and 429s when it has none", async () => {
    const { geo, clock } = await start();
    const good = await geo({ where: "1=1" });
    clock.advance(10 * 60_000);
    upstream.state.mode = "throttle";
    const stale = await geo({ where: "1=1" });
    expect(upstream.state.requests).toHaveLength(2);
    expect(stale.status).toBe(200);
    expect(stale.json).toMatchObject({ stale: true, cached: true, geojson: good.json.geojson });
    const none = await geo({ where: "2=2" });
    expect(none.status).toBe(429);
    expect(none.json.error.code).toBe("rate_limited");
    expect(none.headers.get("retry-after")).toBe("12");
  });

  it("treats an HTTP-200 error body and an HTTP error as upstream_unavailable (502)", async () => {
    const { geo } = await start();
    upstream.state.mode = "error-200";
    const body = await geo({ where: "x" });
    expect(body.status).toBe(502);
    expect(body.json.error).toMatchObject({
      code: "upstream_unavailable",
      message:
        "the upstream of this connection could not answer: the service reported an error 400: Invalid query parameters",
    });
    upstream.state.mode = "http-500";
    const status = await geo({ where: "y" });
    expect(status.status).toBe(502);
    expect(status.json.error.message).toMatch(/HTTP 500/);
  });

  it("caps the response size and times out a slow upstream", async () => {
    const small = await start({ maxResponseBytes: 2_000 });
    upstream.state.mode = "huge";
    const huge = await small.geo({ where: "1" });
    expect(huge.status).toBe(502);
    expect(huge.json.error.message).toMatch(/larger than 2000 bytes/);

    const quick = await start({ timeoutMs: 100 });
    upstream.state.mode = "slow";
    const slow = await quick.geo({ where: "2" });
    expect(slow.status).toBe(502);
    expect(slow.json.error.message).toMatch(/no answer within 100 ms/);
  });

  it("answers tabular queries with a where clause built from filters, strings quoted", async () => {
    const { call } = await start();
    const filters = encodeURIComponent(JSON.stringify({ NAME: "O'Brien' OR 1=1 --", OBJECTID: 2 }));
    const res = await call(
      "GET",
      `/api/v1/connections/conn_gis/query?filters=${filters}&orderBy=NAME&orderDirection=DESC&limit=1&offset=4`,
      { token: TOKENS.sync },
    );
    expect(res.status).toBe(200);
    expect(res.json.data).toEqual([{ OBJECTID: 1, NAME: "A" }]);
    expect(res.json.metadata).toMatchObject({
      returnedRows: 1,
      hasMore: true,
      sourceType: "arcgis",
      offset: 4,
      limit: 1,
    });
    const sent = upstream.state.requests[0]!.searchParams;
    expect(sent.get("where")).toBe("NAME = 'O''Brien'' OR 1=1 --' AND OBJECTID = 2");
    expect(sent.get("orderByFields")).toBe("NAME DESC");
    expect(sent.get("resultOffset")).toBe("4");
    expect(sent.get("resultRecordCount")).toBe("2");
    expect(sent.get("f")).toBe("json");
  });

  it("refreshes a dataset from the layer", async () => {
    const { api, storage } = await start();
    const result = await createAdmin(api).refreshDataset("ds_parcels");
    expect(result).toMatchObject({ ok: true, rowsProcessed: 2, startedAt: NOW });
    expect(storage.state.datasetRows.get("ds_parcels")).toEqual([
      { OBJECTID: 1, NAME: "A" },
      { OBJECTID: 2, NAME: "B" },
    ]);
  });
});

describe("arcgis connector: SSRF", () => {
  it("keeps params in the query string: they never change host, scheme, port or path", async () => {
    const { geo } = await start();
    const attempts = [
      { url: `${evil.origin}/x` },
      { "../../../../stolen": "1", path: "/../../evil" },
      { f: "html", token: "attacker" },
      { host: "127.0.0.1", port: 1, redirect: `${evil.origin}` },
      { where: `1=1#@${evil.origin.slice(7)}/` },
    ];
    for (const params of attempts) {
      const res = await geo(params);
      expect(res.status).toBe(200);
    }
    expect(upstream.state.requests).toHaveLength(attempts.length);
    for (const sent of upstream.state.requests) {
      expect(sent.pathname).toBe(`${SERVICE}/0/query`);
      expect(sent.searchParams.get("f")).toBe("geojson");
      expect(sent.searchParams.has("token")).toBe(false);
    }
    expect(upstream.state.requests[0]!.searchParams.get("url")).toBe(`${evil.origin}/x`);
    expect(evilHost.state.requests).toBe(0);
  });

  it("does not follow a redirect, even to a host it could reach", async () => {
    const { geo } = await start();
    upstream.state.mode = "redirect";
    const res = await geo({ where: "r" });
    expect(res.status).toBe(502);
    expect(res.json.error.message).toMatch(/redirect, which is not followed/);
    expect(evilHost.state.requests).toBe(0);
  });

  it("refuses a layer id that is not a number (no path traversal through the source)", async () => {
    const { geo } = await start({}, "../../../stolen");
    const res = await geo({ where: "s" });
    expect(res.status).toBe(502);
    expect(upstream.state.requests).toHaveLength(0);
  });

  it("sends the configured token, which params cannot replace", async () => {
    const { geo } = await start({ token: "service-token" });
    await geo({ token: "attacker" });
    expect(upstream.state.requests[0]!.searchParams.getAll("token")).toEqual(["service-token"]);
  });
});
