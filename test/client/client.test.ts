import { readdirSync, readFileSync } from "node:fs";
import { describe, expect, expectTypeOf, it } from "vitest";
import type { z } from "zod";
import { createClient, DataportError, parseRetryAfter } from "../../src/client/index.js";
import type {
  AuditEvent,
  AuditPage,
  ConnectionQueryGeoJson,
  ConnectionQueryResult,
  ConnectionQueryRows,
  DashboardViewsByDay,
  DashboardViewsByViewer,
  Dataset,
  OcsfApiActivity,
} from "../../src/client/index.js";
import type { datasetSchema } from "../../src/routes/datasets.js";
import { auditFixture } from "../../src/testing/conformance/audit.js";
import { setup } from "../support/api.js";
import { TOKENS, testFixture } from "../support/fixture.js";

const BASE = "http://dataport.test/api/v1";

/** A fetch that answers from a script and records what it was sent. */
function fakeFetch(answer: (request: Request, index: number) => Response | Promise<Response>) {
  const requests: Request[] = [];
  const fetch = async (request: Request) => {
    requests.push(request.clone());
    return answer(request, requests.length - 1);
  };
  return { fetch, requests };
}

const json = (status: number, body: unknown, headers: Record<string, string> = {}) =>
  new Response(JSON.stringify(body), { status, headers: { "content-type": "application/json", ...headers } });
const envelope = (code: string) => ({ error: { code, message: code.replace(/_/g, " "), requestId: "req_1" } });

/** Records waits instead of sleeping. */
function fakeSleep() {
  const waits: number[] = [];
  return { waits, sleep: async (ms: number) => void waits.push(ms) };
}

describe("client against the API (api.fetch, no network)", () => {
  it("reads identity, datasets and one dataset with typed results", async () => {
    const { api } = await setup();
    const dp = createClient({ baseUrl: BASE, token: TOKENS.sync, fetch: api.fetch });
    const me = await dp.me();
    expect(me.kind).toBe("api-key");
    if (me.kind === "api-key") expect(me.allowlist.datasets).toEqual(["ds_orders", "ds_stores"]);
    const datasets = await dp.datasets.list();
    expect(datasets.map((d) => [d.id, d.type])).toEqual([
      ["ds_orders", "upload"],
      ["tbl_targets", "input_table"],
      ["ds_stores", "connection"],
    ]);
    const one = await dp.datasets.get("ds_orders");
    expect(one).toMatchObject({ id: "ds_orders", rowCount: 5, writable: false });
  });

  it("aggregates a dataset and an input table, the groups typed by the keys and metrics asked for", async () => {
    const { api } = await setup();
    const dp = createClient({ baseUrl: BASE, token: TOKENS.sync, fetch: api.fetch });
    const page = await dp.datasets.aggregate("ds_orders", {
      groupBy: ["region"],
      metrics: ["count", "sum(amount)", "max(order_id)"],
      where: { amount: { gt: 1 } },
      having: { count: { gte: 1 } },
      sort: ["-sum(amount)"],
      maxRows: 2,
    });
    expect(page.data).toEqual([
      { region: "APAC", count: 1, "sum(amount)": 99, "max(order_id)": "A-4" },
      { region: "AMER", count: 1, "sum(amount)": 30, "max(order_id)": "A-2" },
    ]);
    expect(page.metadata).toMatchObject({
      matchedRows: 4,
      totalGroups: 3,
      hasMore: true,
      totals: { count: 4, "sum(amount)": 148.75 },
    });
    expectTypeOf(page.data[0]!.count).toEqualTypeOf<number>();
    expectTypeOf(page.data[0]!["sum(amount)"]).toEqualTypeOf<number | null>();
    expectTypeOf(page.metadata.totals.count).toEqualTypeOf<number>();
    expectTypeOf(page.metadata.groupBy).toEqualTypeOf<"region"[]>();
    const whole = await dp.tables.aggregate("tbl_targets", { metrics: ["count", "sum(target)"] });
    expect(whole.data).toEqual([{ count: 1, "sum(target)": 120000 }]);
    const refused = await dp.datasets
      .aggregate("ds_orders", { metrics: ["median(amount)" as "count"] })
      .catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(DataportError);
    expect((refused as DataportError).status).toBe(400);
  });

  it("pages /datasets/{id}/rows with cursors until hasMore is false", async () => {
    const { api } = await setup();
    const spy = fakeFetch((request) => api.fetch(request));
    const dp = createClient({ baseUrl: BASE, token: TOKENS.sync, fetch: spy.fetch });
    const rows: Array<{ order_id: string }> = [];
    for await (const row of dp.datasets.iterateRows<{ order_id: string }>("ds_orders", {
      pageSize: 2,
      columns: ["order_id"],
    }))
      rows.push(row);
    expect(rows.map((r) => r.order_id)).toEqual(["A-1", "A-2", "A-3", "A-4", "A-5"]);
    expect(rows[0]).toEqual({ order_id: "A-1" });
    const searches = spy.requests.map((r) => new URL(r.url).searchParams);
    expect(searches.map((q) => [q.get("maxRows"), q.get("columns"), q.get("offset"), q.has("cursor")])).toEqual([
      ["2", "order_id", null, false],
      ["2", "order_id", null, true],
      ["2", "order_id", null, true],
    ]);
  });

  it("sends filters as URL-encoded JSON", async () => {
    const { api } = await setup();
    const dp = createClient({ baseUrl: BASE, token: TOKENS.sync, fetch: api.fetch });
    const page = await dp.datasets.rows("ds_orders", { filters: { region: "EMEA" } });
    expect(page.data.map((r) => r.order_id)).toEqual(["A-1", "A-3", "A-5"]);
    expect(page.metadata).toMatchObject({ totalRows: 3, hasMore: false });
  });

  it("raises DataportError carrying the envelope, without retrying a 4xx", async () => {
    const { api } = await setup();
    const spy = fakeFetch((request) => api.fetch(request));
    const dp = createClient({ baseUrl: BASE, token: TOKENS.sync, fetch: spy.fetch });
    const error = await dp.datasets.get("ds_secret").catch((e: unknown) => e);
    expect(error).toBeInstanceOf(DataportError);
    const e = error as DataportError;
    expect(e).toMatchObject({ status: 404, code: "not_found", name: "DataportError" });
    expect(e.requestId).toMatch(/^[0-9a-f]{16}-[0-9a-z]+$/);
    expect(e.envelope?.error.requestId).toBe(e.requestId);
    expect(spy.requests).toHaveLength(1);

    const bad = await dp.datasets.rows("ds_orders", { maxRows: -1 }).catch((x: DataportError) => x);
    expect(bad).toMatchObject({ status: 400, code: "invalid_parameter", details: { parameter: "maxRows" } });
  });

  it("fetches the OpenAPI document without a token", async () => {
    const { api } = await setup();
    const spy = fakeFetch((request) => api.fetch(request));
    const dp = createClient({ baseUrl: BASE, token: TOKENS.sync, fetch: spy.fetch });
    const document = await dp.openapi();
    expect(document.openapi).toBe("3.1.0");
    expect(spy.requests[0]!.headers.get("authorization")).toBeNull();
  });

  it("pages /tables/{id}/rows and writes rows through the API", async () => {
    const { api } = await setup();
    const dp = createClient({ baseUrl: BASE, token: TOKENS.sync, fetch: api.fetch });
    for (const region of ["AMER", "APAC", "LATAM"]) await dp.tables.insert("tbl_targets", { region, target: 1 });
    const regions: unknown[] = [];
    for await (const row of dp.tables.iterateRows("tbl_targets", { pageSize: 2 })) regions.push(row.region);
    expect(regions).toEqual(["EMEA", "AMER", "APAC", "LATAM"]);
    const updated = await dp.tables.update(
      "tbl_targets",
      "row_1",
      { target: 5 },
      { expectedUpdatedAt: "2026-10-01T00:00:00.000Z" },
    );
    expect(updated).toMatchObject({ _id: "row_1", target: 5 });
    const stale = await dp.tables
      .update("tbl_targets", "row_1", { target: 6 }, { expectedUpdatedAt: "2026-10-01T00:00:00.000Z" })
      .catch((e: DataportError) => e);
    expect(stale).toMatchObject({ status: 409, code: "conflict" });
    await expect(dp.tables.delete("tbl_targets", "row_1")).resolves.toEqual({ deleted: true });
  });

  it("stores a POST once when its answer is lost and the retry reuses the Idempotency-Key", async () => {
    const { api } = await setup();
    const { sleep } = fakeSleep();
    // The first attempt reaches the API, but its answer is lost on the way back.
    const lossy = fakeFetch(async (request, i) => {
      const response = await api.fetch(request);
      return i === 0 ? json(503, envelope("internal")) : response;
    });
    const dp = createClient({ baseUrl: BASE, token: TOKENS.sync, fetch: lossy.fetch, sleep });
    const row = await dp.tables.insert("tbl_targets", { region: "NORDICS", target: 3 });
    expect(row).toMatchObject({ region: "NORDICS", target: 3 });
    expect(lossy.requests).toHaveLength(2);
    const page = await createClient({ baseUrl: BASE, token: TOKENS.sync, fetch: api.fetch }).tables.rows("tbl_targets");
    expect(page.data.filter((r) => r.region === "NORDICS").map((r) => r._id)).toEqual([row._id]);
  });

  it("queries a connection with paging, ordering and filters", async () => {
    const { api } = await setup();
    const spy = fakeFetch((request) => api.fetch(request));
    const dp = createClient({ baseUrl: BASE, token: TOKENS.sync, fetch: spy.fetch });
    const result = await dp.connections.query("conn_retail", {
      filters: { city: "Lyon" },
      orderBy: "store_id",
      orderDirection: "DESC",
      limit: 10,
      noCache: true,
    });
    expect(result).toMatchObject({ success: true, data: [{ store_id: "S1", city: "Lyon" }], cached: false });
    expect(new URL(spy.requests[0]!.url).search).toBe(
      `?limit=10&filters=${encodeURIComponent('{"city":"Lyon"}')}&orderBy=store_id&orderDirection=DESC`,
    );
    expect(spy.requests[0]!.headers.get("cache-control")).toBe("no-cache");
  });

  it("types Dataset as the route's response schema does", () => {
    expectTypeOf<Dataset>().toEqualTypeOf<z.output<typeof datasetSchema>>();
  });

  it("iterates every row of a connection query, page by page", async () => {
    const fixture = testFixture();
    const stores = ["Lyon", "Oslo", "Austin", "Osaka", "Lisbon"].map((city, i) => ({ store_id: `S${i + 1}`, city }));
    fixture.connections[0]!.config = { tables: { stores } };
    const { api } = await setup({ fixture });
    const spy = fakeFetch((request) => api.fetch(request));
    const dp = createClient({ baseUrl: BASE, token: TOKENS.sync, fetch: spy.fetch });
    const seen: string[] = [];
    for await (const row of dp.connections.iterateRows<{ store_id: string }>("conn_retail", {
      pageSize: 2,
      orderBy: "store_id",
      orderDirection: "DESC",
    })) {
      seen.push(row.store_id);
    }
    expect(seen).toEqual(["S5", "S4", "S3", "S2", "S1"]);
    expect(spy.requests.map((r) => new URL(r.url).search)).toEqual([
      "?limit=2&offset=0&orderBy=store_id&orderDirection=DESC",
      "?limit=2&offset=2&orderBy=store_id&orderDirection=DESC",
      "?limit=2&offset=4&orderBy=store_id&orderDirection=DESC",
    ]);
    // Stopping early sends no further request.
    const before = spy.requests.length;
    for await (const row of dp.connections.iterateRows("conn_retail", { pageSize: 2 })) {
      expect(row).toEqual({ store_id: "S1", city: "Lyon" });
      break;
    }
    expect(spy.requests.length).toBe(before + 1);
  });

  it("types a connection query by its format, and dashboard views and audit pages by theirs", async () => {
    const dp = createClient({ baseUrl: BASE, token: "t", fetch: async () => json(200, {}) });
    expectTypeOf(dp.connections.query("c")).resolves.toEqualTypeOf<ConnectionQueryRows>();
    expectTypeOf(dp.connections.query("c", { format: "geojson" })).resolves.toEqualTypeOf<ConnectionQueryGeoJson>();
    const format = "json" as "json" | "geojson";
    expectTypeOf(dp.connections.query("c", { format })).resolves.toEqualTypeOf<ConnectionQueryResult>();
    expectTypeOf(dp.dashboards.views("d")).resolves.toEqualTypeOf<DashboardViewsByDay>();
    expectTypeOf(dp.dashboards.views("d", { by: "viewer" })).resolves.toEqualTypeOf<DashboardViewsByViewer>();
    expectTypeOf(dp.audit.read()).resolves.toEqualTypeOf<AuditPage<OcsfApiActivity>>();
    expectTypeOf(dp.audit.read({ format: "raw" })).resolves.toEqualTypeOf<AuditPage<AuditEvent>>();
    expectTypeOf(dp.audit.read<{ id: string }>({ format: "raw" })).resolves.toEqualTypeOf<AuditPage<{ id: string }>>();
    const result = await dp.connections.query("c");
    expect(result).toEqual({});
  });
});

describe("retries", () => {
  it("retries 5xx with exponential, jittered backoff and returns the eventual answer", async () => {
    const { fetch, requests } = fakeFetch((_r, i) =>
      i < 2 ? json(503, envelope("internal")) : json(200, { kind: "api-key" }),
    );
    const { waits, sleep } = fakeSleep();
    const dp = createClient({
      baseUrl: BASE,
      token: "t",
      fetch,
      sleep,
      random: () => 0.5,
      retry: { baseDelayMs: 100 },
    });
    await expect(dp.me()).resolves.toEqual({ kind: "api-key" });
    expect(requests).toHaveLength(3);
    expect(waits).toEqual([50, 100]);
  });

  it("honours Retry-After on 429, in seconds or as an HTTP date", async () => {
    const { fetch } = fakeFetch((_r, i) =>
      i === 0
        ? json(429, envelope("rate_limited"), { "retry-after": "3" })
        : i === 1
          ? json(429, envelope("rate_limited"), { "retry-after": new Date(Date.now() + 5000).toUTCString() })
          : json(200, { datasets: [] }),
    );
    const { waits, sleep } = fakeSleep();
    // No jitter drawn (random 0): the waits are Retry-After itself.
    const dp = createClient({ baseUrl: BASE, token: "t", fetch, sleep, random: () => 0 });
    await expect(dp.datasets.list()).resolves.toEqual([]);
    expect(waits[0]).toBe(3000);
    expect(waits[1]).toBeGreaterThanOrEqual(4000);
    expect(waits[1]).toBeLessThanOrEqual(6000);
  });

  it("adds jitter to Retry-After waits, so calls refused together do not return together", async () => {
    const draws = [0, 0.25, 0.5, 0.75, 0.999];
    const waits: number[] = [];
    await Promise.all(
      draws.map(async (draw) => {
        const { fetch } = fakeFetch((_r, i) =>
          i === 0 ? json(429, envelope("rate_limited"), { "retry-after": "4" }) : json(200, { kind: "api-key" }),
        );
        const dp = createClient({
          baseUrl: BASE,
          token: "t",
          fetch,
          random: () => draw,
          sleep: async (ms) => void waits.push(ms),
        });
        await dp.me();
      }),
    );
    // Never sooner than Retry-After; spread over up to half of it more.
    expect(waits).toEqual([4000, 4500, 5000, 5500, 5998]);
    // A Retry-After of 0 still spreads over baseDelayMs.
    const zero = fakeFetch((_r, i) =>
      i === 0 ? json(503, envelope("storage_unavailable"), { "retry-after": "0" }) : json(200, { kind: "api-key" }),
    );
    const { waits: zeroWaits, sleep } = fakeSleep();
    await createClient({
      baseUrl: BASE,
      token: "t",
      fetch: zero.fetch,
      sleep,
      random: () => 0.5,
      retry: { baseDelayMs: 200 },
    }).me();
    expect(zeroWaits).toEqual([100]);
  });

  it("gives up after the configured retries with the last error, and when Retry-After is too long", async () => {
    const always = fakeFetch(() => json(502, envelope("upstream_unavailable")));
    const { sleep } = fakeSleep();
    const dp = createClient({ baseUrl: BASE, token: "t", fetch: always.fetch, sleep, retry: { retries: 2 } });
    await expect(dp.me()).rejects.toMatchObject({ status: 502, code: "upstream_unavailable" });
    expect(always.requests).toHaveLength(3);

    const slow = fakeFetch(() => json(429, envelope("rate_limited"), { "retry-after": "3600" }));
    const dp2 = createClient({ baseUrl: BASE, token: "t", fetch: slow.fetch, sleep });
    await expect(dp2.me()).rejects.toMatchObject({ status: 429, code: "rate_limited", retryAfter: 3600 });
    expect(slow.requests).toHaveLength(1);
  });

  it("retries a network failure, and reports a non-envelope error as unexpected_response", async () => {
    const { fetch, requests } = fakeFetch((_r, i) => {
      if (i === 0) throw new TypeError("fetch failed");
      return new Response("<html>Bad gateway</html>", { status: 400, headers: { "x-request-id": "edge-1" } });
    });
    const { sleep } = fakeSleep();
    const dp = createClient({ baseUrl: BASE, token: "t", fetch, sleep });
    await expect(dp.me()).rejects.toMatchObject({
      status: 400,
      code: "unexpected_response",
      envelope: null,
      requestId: "edge-1",
    });
    expect(requests).toHaveLength(2);
  });

  it("sends one Idempotency-Key per POST and the same key on its retries", async () => {
    const row = { _id: "row_9", region: "EMEA", _createdAt: "x", _updatedAt: "x" };
    const { fetch, requests } = fakeFetch((_r, i) => (i === 0 ? json(500, envelope("internal")) : json(201, row)));
    const { sleep } = fakeSleep();
    const dp = createClient({ baseUrl: BASE, token: "t", fetch, sleep });
    await expect(dp.tables.insert("tbl_targets", { region: "EMEA" })).resolves.toEqual(row);
    await dp.tables.insert("tbl_targets", { region: "AMER" });
    await dp.tables.insert("tbl_targets", { region: "APAC" }, { idempotencyKey: "my-key-1" });
    const keys = requests.map((r) => r.headers.get("idempotency-key"));
    expect(keys[0]).toMatch(/^[0-9a-f-]{36}$/);
    expect(keys[1]).toBe(keys[0]);
    expect(keys[2]).toMatch(/^[0-9a-f-]{36}$/);
    expect(keys[2]).not.toBe(keys[0]);
    expect(keys[3]).toBe("my-key-1");
    expect(requests[0]!.method).toBe("POST");
    expect(await requests[1]!.json()).toEqual({ region: "EMEA" });
    expect(requests[1]!.headers.get("content-type")).toBe("application/json");
  });

  it("sends an Idempotency-Key on PATCH (the same on its retries) and none on GET or DELETE", async () => {
    const { sleep } = fakeSleep();
    const { fetch, requests } = fakeFetch((_request, i) =>
      i === 1 ? json(503, envelope("internal")) : json(200, { deleted: true }),
    );
    const dp = createClient({ baseUrl: BASE, token: "t", fetch, sleep });
    await dp.tables.delete("tbl_targets", "row_1");
    await dp.tables.update("tbl_targets", "row_1", { target: 1 }, { expectedUpdatedAt: "2026-10-01T00:00:00.000Z" });
    await dp.tables.update("tbl_targets", "row_1", { target: 2 }, { idempotencyKey: "patch-key-1" });
    const sent = requests.map((r) => [r.method, r.headers.get("idempotency-key")] as const);
    expect(sent.map(([method]) => method)).toEqual(["DELETE", "PATCH", "PATCH", "PATCH"]);
    expect(sent[0]![1]).toBeNull();
    expect(sent[1]![1]).toMatch(/^[0-9a-f-]{36}$/);
    expect(sent[2]![1]).toBe(sent[1]![1]);
    expect(sent[3]![1]).toBe("patch-key-1");
    expect(await requests[1]!.json()).toEqual({ target: 1, expectedUpdatedAt: "2026-10-01T00:00:00.000Z" });
  });

  it("answers a compare-and-set PATCH whose first answer was lost with the row it wrote, not a 409", async () => {
    const { api } = await setup();
    const { sleep } = fakeSleep();
    const lossy = fakeFetch(async (request, i) => {
      const response = await api.fetch(request);
      return i === 0 ? json(503, envelope("internal")) : response;
    });
    const dp = createClient({ baseUrl: BASE, token: TOKENS.sync, fetch: lossy.fetch, sleep });
    const updated = await dp.tables.update(
      "tbl_targets",
      "row_1",
      { target: 5 },
      { expectedUpdatedAt: "2026-10-01T00:00:00.000Z" },
    );
    expect(updated).toMatchObject({ _id: "row_1", target: 5 });
    expect(dp.meta(updated)).toMatchObject({ attempts: 2, status: 200 });
    expect(dp.meta(updated)!.headers.get("idempotent-replayed")).toBe("true");
  });

  it("retries a 409 idempotency_key_in_use (an earlier attempt still writing), not a 409 conflict", async () => {
    const row = { _id: "row_9", region: "EMEA", _createdAt: "x", _updatedAt: "x" };
    const { fetch, requests } = fakeFetch((_r, i) =>
      i === 0
        ? json(503, envelope("storage_unavailable"), { "retry-after": "1" })
        : i === 1
          ? json(409, envelope("idempotency_key_in_use"), { "retry-after": "1" })
          : json(201, row, { "idempotent-replayed": "true" }),
    );
    const { waits, sleep } = fakeSleep();
    const dp = createClient({ baseUrl: BASE, token: "t", fetch, sleep, random: () => 0 });
    const inserted = await dp.tables.insert("tbl_targets", { region: "EMEA" });
    expect(inserted).toEqual(row);
    expect(waits).toEqual([1000, 1000]);
    expect(new Set(requests.map((r) => r.headers.get("idempotency-key"))).size).toBe(1);
    const conflict = fakeFetch(() => json(409, envelope("conflict")));
    const plain = createClient({ baseUrl: BASE, token: "t", fetch: conflict.fetch, sleep });
    const refused = plain.tables.update("tbl_targets", "row_1", { n: 1 });
    await expect(refused).rejects.toMatchObject({ status: 409, code: "conflict" });
    expect(conflict.requests).toHaveLength(1);
  });

  it("parses Retry-After", () => {
    const now = Date.parse("2026-11-01T12:00:00Z");
    expect(parseRetryAfter("7", now)).toBe(7);
    expect(parseRetryAfter("Sun, 01 Nov 2026 12:00:10 GMT", now)).toBe(10);
    expect(parseRetryAfter("Sun, 01 Nov 2026 11:00:00 GMT", now)).toBe(0);
    expect(parseRetryAfter("soon", now)).toBeNull();
    expect(parseRetryAfter(null, now)).toBeNull();
  });
});

describe("paging /tables/{id}/rows", () => {
  it("follows offset by the rows returned until hasMore is false, from a server that sends no nextCursor", async () => {
    const all = Array.from({ length: 5 }, (_, i) => ({ _id: `r${i}`, _createdAt: "x", _updatedAt: "x", n: i }));
    const { fetch, requests } = fakeFetch((request) => {
      const url = new URL(request.url);
      const limit = Number(url.searchParams.get("limit"));
      const offset = Number(url.searchParams.get("offset"));
      const data = all.slice(offset, offset + limit);
      return json(200, {
        success: true,
        data,
        metadata: {
          tableId: "t",
          tableName: "T",
          totalRows: 5,
          returnedRows: data.length,
          offset,
          hasMore: offset + data.length < 5,
          columns: ["n"],
        },
      });
    });
    const dp = createClient({ baseUrl: BASE, token: "t", fetch });
    const seen: number[] = [];
    for await (const row of dp.tables.iterateRows("tbl_1", { pageSize: 2 })) seen.push(row.n as number);
    expect(seen).toEqual([0, 1, 2, 3, 4]);
    expect(requests.map((r) => new URL(r.url).search)).toEqual(["?limit=2", "?limit=2&offset=2", "?limit=2&offset=4"]);
  });
});

describe("collect({ max })", () => {
  /** A table of `total` rows served page by page; the requests it was sent. */
  function pagedTable(total: number) {
    const all = Array.from({ length: total }, (_, i) => ({ _id: `r${i}`, _createdAt: "x", _updatedAt: "x", n: i }));
    return fakeFetch((request) => {
      const url = new URL(request.url);
      const limit = Number(url.searchParams.get("limit"));
      const offset = Number(url.searchParams.get("offset"));
      const data = all.slice(offset, offset + limit);
      return json(200, {
        success: true,
        data,
        metadata: {
          tableId: "t",
          tableName: "T",
          totalRows: total,
          returnedRows: data.length,
          offset,
          hasMore: offset + data.length < total,
          columns: ["n"],
        },
      });
    });
  }

  it("stops at max and fetches no page past it", async () => {
    const { fetch, requests } = pagedTable(10);
    const dp = createClient({ baseUrl: BASE, token: "t", fetch });
    const rows = await dp.tables.iterateRows("tbl_1", { pageSize: 2 }).collect({ max: 4 });
    expect(rows.map((r) => r.n)).toEqual([0, 1, 2, 3]);
    expect(requests.map((r) => new URL(r.url).search)).toEqual(["?limit=2", "?limit=2&offset=2"]);
  });

  it("returns every item when there are fewer than max, and works on any async iterable", async () => {
    const { fetch } = pagedTable(3);
    const dp = createClient({ baseUrl: BASE, token: "t", fetch });
    expect((await dp.tables.iterateRows("tbl_1", { pageSize: 2 }).collect({ max: 100 })).map((r) => r.n)).toEqual([
      0, 1, 2,
    ]);
    async function* letters() {
      yield* ["a", "b", "c"];
    }
    expect(await dp.collect(letters(), { max: 2 })).toEqual(["a", "b"]);
  });

  it("refuses a missing or non-positive max", async () => {
    const dp = createClient({ baseUrl: BASE, token: "t", fetch: pagedTable(1).fetch });
    for (const max of [0, -1, 1.5, Number.NaN]) {
      await expect(dp.tables.iterateRows("tbl_1").collect({ max })).rejects.toThrow(/max must be a positive integer/);
    }
  });
});

describe("per-request options, hooks and headers", () => {
  it("sends a User-Agent naming the client and the runtime; a header of yours or userAgent replaces it", async () => {
    const { fetch, requests } = fakeFetch(() => json(200, { kind: "api-key" }));
    await createClient({ baseUrl: BASE, token: "t", fetch }).me();
    await createClient({ baseUrl: BASE, token: "t", fetch, headers: { "User-Agent": "warehouse-sync/1.4" } }).me();
    await createClient({ baseUrl: BASE, token: "t", fetch, userAgent: "mine/2" }).me();
    const version = (
      JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as { version: string }
    ).version;
    expect(requests.map((r) => r.headers.get("user-agent"))).toEqual([
      `dataport-client/${version} node/${process.versions.node}`,
      "warehouse-sync/1.4",
      "mine/2",
    ]);
  });

  it("numbers retries in Dataport-Retry-Count and tells onRequest about every attempt, token masked", async () => {
    const { sleep } = fakeSleep();
    const { fetch, requests } = fakeFetch((_request, i) =>
      i < 2 ? json(503, envelope("internal")) : json(200, { kind: "api-key" }),
    );
    const seen: Array<{ attempt: number; method: string; url: string; authorization: string | undefined }> = [];
    const dp = createClient({
      baseUrl: BASE,
      token: "secret-token",
      fetch,
      sleep,
      onRequest: (info) =>
        seen.push({
          attempt: info.attempt,
          method: info.method,
          url: info.url,
          authorization: info.headers.authorization,
        }),
    });
    await dp.me();
    expect(requests.map((r) => r.headers.get("dataport-retry-count"))).toEqual([null, "1", "2"]);
    expect(seen).toEqual(
      [1, 2, 3].map((attempt) => ({ attempt, method: "GET", url: `${BASE}/me`, authorization: "Bearer ***" })),
    );
  });

  it("reports how long a call took, retry waits included, to onResponse and meta()", async () => {
    const { fetch } = fakeFetch(async (_request, i) => {
      if (i === 0) return json(503, envelope("internal"));
      await new Promise((resolve) => setTimeout(resolve, 30));
      return json(200, { kind: "api-key" });
    });
    const metas: number[] = [];
    const dp = createClient({
      baseUrl: BASE,
      token: "t",
      fetch,
      retry: { baseDelayMs: 20 },
      random: () => 1,
      onResponse: (meta) => metas.push(meta.durationMs),
    });
    const me = await dp.me();
    expect(metas).toHaveLength(1);
    expect(metas[0]).toBeGreaterThanOrEqual(45);
    expect(dp.meta(me)!.durationMs).toBe(metas[0]);
  });

  it("takes retries, timeoutMs, headers and signal per call", async () => {
    const { sleep } = fakeSleep();
    const { fetch, requests } = fakeFetch(() => json(503, envelope("internal")));
    const dp = createClient({ baseUrl: BASE, token: "t", fetch, sleep, retry: { retries: 3 } });
    const once = (await dp.me({ retries: 0, headers: { "X-Trace": "abc" } }).catch((e: unknown) => e)) as DataportError;
    expect([once.status, once.meta?.attempts, requests.length]).toEqual([503, 1, 1]);
    expect(requests[0]!.headers.get("x-trace")).toBe("abc");
    const twice = (await dp.datasets.rows("ds_orders", { retries: 1 }).catch((e: unknown) => e)) as DataportError;
    expect([twice.meta?.attempts, requests.length]).toEqual([2, 3]);
    const aborted = new AbortController();
    aborted.abort(new Error("stopped by the caller"));
    await expect(dp.tables.rows("tbl_1", { signal: aborted.signal })).rejects.toThrow("stopped by the caller");
    expect(requests.length).toBe(3);
  });
});

describe("audit poller", () => {
  it("reads on while hasMore, waits lagSeconds once caught up, and follows the cursor", async () => {
    const pages = [
      { events: [{ id: "e1" }, { id: "e2" }], cursor: "c2", hasMore: true, lagSeconds: 5 },
      { events: [{ id: "e3" }], cursor: "c3", hasMore: false, lagSeconds: 5 },
      { events: [], cursor: "c3", hasMore: false, lagSeconds: 5 },
      { events: [{ id: "e4" }], cursor: "c4", hasMore: false, lagSeconds: 5 },
    ];
    const { fetch, requests } = fakeFetch((_r, i) => json(200, pages[i]));
    const controller = new AbortController();
    const waits: number[] = [];
    const sleep = async (ms: number, signal?: AbortSignal) => {
      waits.push(ms);
      if (waits.length === 3) controller.abort();
      signal?.throwIfAborted();
    };
    const dp = createClient({ baseUrl: BASE, token: "t", fetch, sleep, teamId: "team_ops" });
    const seen: string[] = [];
    const cursors: string[] = [];
    for await (const page of dp.audit.poll<{ id: string }>({
      signal: controller.signal,
      category: ["data_access"],
      since: "2026-10-01T00:00:00Z",
    })) {
      seen.push(...page.events.map((e) => e.id));
      cursors.push(page.cursor);
    }
    expect(seen).toEqual(["e1", "e2", "e3", "e4"]);
    expect(cursors).toEqual(["c2", "c3", "c4"]);
    // No wait between the hasMore page and the next; lagSeconds after each caught-up page.
    expect(waits).toEqual([5000, 5000, 5000]);
    expect(requests.map((r) => new URL(r.url).search)).toEqual([
      "?since=2026-10-01T00%3A00%3A00Z&teamId=team_ops&category=data_access",
      "?cursor=c2&teamId=team_ops&category=data_access",
      "?cursor=c3&teamId=team_ops&category=data_access",
      "?cursor=c3&teamId=team_ops&category=data_access",
    ]);
  });

  it("never polls faster than lagSeconds, and slower when asked", async () => {
    const { fetch } = fakeFetch(() => json(200, { events: [], cursor: "c", hasMore: false, lagSeconds: 2 }));
    const run = async (intervalMs: number) => {
      const controller = new AbortController();
      const waits: number[] = [];
      const sleep = async (ms: number) => {
        waits.push(ms);
        if (waits.length === 2) controller.abort();
      };
      const dp = createClient({ baseUrl: BASE, token: "t", fetch, sleep });
      for await (const _ of dp.audit.poll({ signal: controller.signal, intervalMs })) void _;
      return waits;
    };
    expect(await run(500)).toEqual([2000, 2000]);
    expect(await run(30_000)).toEqual([30_000, 30_000]);
  });

  it("delivers the real feed exactly once, including an event that lands while it waits", async () => {
    const { api, clock } = await setup({ fixture: auditFixture() });
    const controller = new AbortController();
    const writer = createClient({ baseUrl: BASE, token: TOKENS.sync, fetch: api.fetch });
    const waits: number[] = [];
    // Waiting moves the API's clock, so the feed's lag horizon moves with it.
    const sleep = async (ms: number) => {
      waits.push(ms);
      if (waits.length === 1) await writer.tables.insert("tbl_targets", { region: "POLL", target: 1 });
      clock.advance(ms + 1);
      if (waits.length === 4) controller.abort();
    };
    const dp = createClient({ baseUrl: BASE, token: TOKENS.sync, fetch: api.fetch, sleep });
    const events: Array<{ id: string; action: string }> = [];
    for await (const page of dp.audit.poll<{ id: string; action: string }>({
      format: "raw",
      category: ["data_access"],
      limit: 1,
      signal: controller.signal,
    })) {
      expect(page.events).toHaveLength(1);
      events.push(...page.events);
    }
    expect(
      events
        .slice(0, 2)
        .map((e) => e.id)
        .sort(),
    ).toEqual(["evt_f1", "evt_f3"]);
    expect(events.slice(2).map((e) => e.action)).toEqual(["table.row.created"]);
    expect(waits).toEqual([5000, 5000, 5000, 5000]);
  });

  it("raises a feed error instead of polling on", async () => {
    const { fetch } = fakeFetch(() => json(403, envelope("plan_required")));
    const dp = createClient({ baseUrl: BASE, token: "t", fetch });
    const iterator = dp.audit.poll();
    await expect(iterator.next()).rejects.toMatchObject({ status: 403, code: "plan_required" });
  });
});

describe("portability", () => {
  it("uses no Node-only API in the client sources", () => {
    const dir = new URL("../../src/client/", import.meta.url);
    const files = readdirSync(dir).filter((f) => f.endsWith(".ts"));
    expect(files.length).toBeGreaterThanOrEqual(4);
    for (const file of files) {
      const text = readFileSync(new URL(file, dir), "utf8");
      expect(text, file).not.toMatch(/from "node:|require\(|\bprocess\.|\bBuffer\b/);
      for (const [, spec] of text.matchAll(/from "([^"]+)"/g)) expect(spec, file).toMatch(/^\.\//);
    }
  });
});

describe("change feeds: changes and follow", () => {
  const change = (rowId: string) => ({ op: "delete", rowId, at: "2026-11-01T12:00:00.000Z" });

  it("long-polls for ever from the cursor given, and resumes after failures with backoff from the same cursor", async () => {
    const answers: Array<() => Response> = [
      () => json(200, { changes: [change("r1")], cursor: "c1", hasMore: false, lagSeconds: 0 }),
      () => json(503, envelope("storage_unavailable")),
      () => {
        throw new TypeError("fetch failed");
      },
      () => json(200, { changes: [], cursor: "c1", hasMore: false, lagSeconds: 0 }),
      () => json(200, { changes: [change("r2"), change("r3")], cursor: "c3", hasMore: false, lagSeconds: 0 }),
    ];
    const { fetch, requests } = fakeFetch((_r, i) => answers[i]!());
    const controller = new AbortController();
    const waits: number[] = [];
    const sleep = async (ms: number) => void waits.push(ms);
    const dp = createClient({ baseUrl: BASE, token: "t", fetch, sleep, random: () => 1, retry: { retries: 0 } });
    const seen: string[] = [];
    for await (const page of dp.tables.follow("tbl_targets", { cursor: "c0", wait: 20, signal: controller.signal })) {
      seen.push(...page.changes.map((c) => (c.op === "delete" ? c.rowId : c.op)));
      if (page.cursor === "c3") controller.abort();
    }
    expect(seen).toEqual(["r1", "r2", "r3"]);
    expect(requests.map((r) => new URL(r.url).search)).toEqual([
      "?cursor=c0&wait=20",
      "?cursor=c1&wait=20",
      "?cursor=c1&wait=20",
      "?cursor=c1&wait=20",
      "?cursor=c1&wait=20",
    ]);
    // Two failures in a row: the backoff doubles; a success resets it.
    expect(waits).toEqual([250, 500]);
  });

  it("rethrows what retrying cannot mend: 410 cursor_expired", async () => {
    const { fetch } = fakeFetch(() => json(410, envelope("cursor_expired")));
    const dp = createClient({ baseUrl: BASE, token: "t", fetch, retry: { retries: 0 } });
    const pages = dp.datasets.follow("ds_orders", { cursor: "old" });
    await expect(pages.next()).rejects.toMatchObject({ status: 410, code: "cursor_expired" });
  });

  it("follows a real table from a rows read's changesCursor, each change once", async () => {
    const { api } = await setup();
    const dp = createClient({ baseUrl: BASE, token: TOKENS.sync, fetch: api.fetch });
    const read = await dp.tables.rows("tbl_targets");
    const controller = new AbortController();
    const seen: unknown[] = [];
    const following = (async () => {
      for await (const page of dp.tables.follow("tbl_targets", {
        cursor: read.metadata.changesCursor,
        wait: 5,
        signal: controller.signal,
      })) {
        seen.push(...page.changes.map((c) => (c.op === "insert" ? c.row.region : c.op)));
        if (seen.length === 2) controller.abort();
      }
    })();
    await dp.tables.insert("tbl_targets", { region: "F1", target: 1 });
    await dp.tables.insert("tbl_targets", { region: "F2", target: 2 });
    await following;
    expect(seen).toEqual(["F1", "F2"]);
    const page = await dp.tables.changes("tbl_targets", { cursor: read.metadata.changesCursor, limit: 1 });
    expect([page.changes.length, page.hasMore]).toEqual([1, true]);
  });
});
