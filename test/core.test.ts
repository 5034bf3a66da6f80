import { describe, expect, it } from "vitest";
import { bearerToken } from "../src/core/auth.js";
import { sha256Hex } from "../src/domain/crypto.js";
import { ApiError } from "../src/base/api-error.js";
import type { ApiReply, ApiRequest } from "../src/http/types.js";
import { webhookFixture } from "../src/testing/conformance/webhooks.js";
import { createMemoryStorage } from "../src/memory/memory-storage.js";
import type { Storage } from "../src/ports/storage.js";
import { setup } from "./support/api.js";
import { TOKENS } from "./support/fixture.js";

describe("edge: CORS, request ids, routing", () => {
  it("answers a preflight with 204 and the allowed headers named explicitly", async () => {
    const { call } = await setup();
    for (const path of ["/api/v1/datasets", "/api/webhooks/anything"]) {
      const res = await call("OPTIONS", path);
      expect(res.status).toBe(204);
      expect(res.headers.get("access-control-allow-origin")).toBe("*");
      expect(res.headers.get("access-control-allow-methods")).toBe("GET, POST, PATCH, DELETE, OPTIONS");
      const allowed = res.headers.get("access-control-allow-headers")!.split(", ");
      expect(allowed).toEqual(expect.arrayContaining(["Content-Type", "Authorization", "Idempotency-Key"]));
    }
  });

  it("puts CORS and a request id on every response, errors included", async () => {
    const { call } = await setup();
    const ok = await call("GET", "/api/v1/me", { token: TOKENS.sync });
    const bad = await call("GET", "/api/v1/me");
    for (const res of [ok, bad]) {
      expect(res.headers.get("access-control-allow-origin")).toBe("*");
      expect(res.headers.get("x-request-id")).toMatch(/^[0-9a-f]{16}-[0-9a-z]+$/);
    }
    expect(bad.json.error.requestId).toBe(bad.headers.get("x-request-id"));
    // Browsers may read exactly the headers a response carries.
    expect(ok.headers.get("access-control-expose-headers")).toBe("X-Request-Id");
    expect(bad.headers.get("access-control-expose-headers")).toBe("X-Request-Id, WWW-Authenticate");
  });

  it("404s an unknown route and 405s a wrong method with Allow", async () => {
    const { call } = await setup();
    const missing = await call("GET", "/api/v1/nope", { token: TOKENS.sync });
    expect(missing.status).toBe(404);
    expect(missing.json.error.code).toBe("not_found");
    const wrong = await call("DELETE", "/api/v1/datasets", { token: TOKENS.sync });
    expect(wrong.status).toBe(405);
    expect(wrong.json.error.code).toBe("method_not_allowed");
    expect(wrong.headers.get("allow")).toBe("GET, HEAD, OPTIONS");
    expect(wrong.headers.get("content-type")).toMatch(/^application\/json/);
  });
});

describe("HEAD", () => {
  it("answers like GET with the length of GET's body and no body, on every GET route", async () => {
    const { api } = await setup();
    const send = (method: string, path: string) =>
      api.fetch(
        new Request(`http://dataport.test${path}`, { method, headers: { authorization: `Bearer ${TOKENS.sync}` } }),
      );
    for (const path of ["/api/v1/me", "/api/v1/datasets", "/api/v1/datasets/ds_orders/rows?maxRows=2", "/api/health"]) {
      const get = await send("GET", path);
      const getBody = await get.text();
      const head = await send("HEAD", path);
      expect([path, head.status, head.headers.get("content-type")]).toEqual([
        path,
        get.status,
        get.headers.get("content-type"),
      ]);
      expect(await head.text()).toBe("");
      if (head.headers.get("content-length") !== null)
        expect(Number(head.headers.get("content-length"))).toBe(Buffer.byteLength(getBody));
    }
    const me = await send("HEAD", "/api/v1/me");
    expect(me.headers.get("content-length")).toBe(
      String(Buffer.byteLength(await (await send("GET", "/api/v1/me")).text())),
    );
  });

  it("is refused where GET is: 401 without a token, 405 on a POST-only path", async () => {
    const { api } = await setup();
    const anonymous = await api.fetch(new Request("http://dataport.test/api/v1/me", { method: "HEAD" }));
    expect([anonymous.status, anonymous.headers.get("www-authenticate"), await anonymous.text()]).toEqual([
      401,
      "Bearer",
      "",
    ]);
    const webhook = await api.fetch(new Request("http://dataport.test/api/webhooks/wh_shop", { method: "HEAD" }));
    expect([webhook.status, webhook.headers.get("allow")]).toEqual([405, "POST, OPTIONS"]);
  });
});

describe("authentication", () => {
  it("401s a missing, malformed, unknown or revoked token with WWW-Authenticate", async () => {
    const { call } = await setup();
    const cases = [
      await call("GET", "/api/v1/me"),
      await call("GET", "/api/v1/me", { headers: { authorization: `Basic ${TOKENS.sync}` } }),
      await call("GET", "/api/v1/me", { token: "dp_live_not_a_key_at_all_0000" }),
      await call("GET", "/api/v1/me", { token: TOKENS.revoked }),
    ];
    for (const res of cases) {
      expect(res.status).toBe(401);
      expect(res.json.error.code).toBe("unauthorized");
      expect(res.headers.get("www-authenticate")).toBe("Bearer");
    }
  });

  it("refuses every call from a Free-plan key with 403 plan_required", async () => {
    const { call } = await setup();
    const res = await call("GET", "/api/v1/me", { token: TOKENS.freeTeam });
    expect(res.status).toBe(403);
    expect(res.json.error.code).toBe("plan_required");
  });

  it("403s a key without the endpoint's scope, naming it", async () => {
    const { call } = await setup();
    const res = await call("GET", "/api/v1/datasets", { token: TOKENS.readOnly });
    expect(res.status).toBe(403);
    expect(res.json.error).toMatchObject({ code: "insufficient_scope", details: { required: "data:read" } });
  });
});

describe("GET /me", () => {
  it("describes an API key", async () => {
    const { call } = await setup();
    const res = await call("GET", "/api/v1/me", { token: TOKENS.sync });
    expect(res.status).toBe(200);
    expect(res.json).toEqual({
      kind: "api-key",
      name: "Warehouse sync",
      scopes: ["data:read", "tables:write", "dashboards:read", "audit:read"],
      teams: [{ id: "team_ops", name: "Operations" }],
      allowlist: { datasets: ["ds_orders", "ds_stores"], connections: ["conn_retail"], tables: ["tbl_targets"] },
    });
  });

  it("describes a session token with every space of the person", async () => {
    const { call } = await setup();
    const res = await call("GET", "/api/v1/me", { token: TOKENS.sessionAda });
    expect(res.json).toEqual({
      kind: "session-token",
      teams: [
        { id: "team_free", name: "Hobby", isPersonal: true, role: "owner" },
        { id: "team_ops", name: "Operations", isPersonal: false, role: "owner" },
      ],
    });
  });
});

describe("bearerToken", () => {
  it("reads the token of the usual form and of every form the grammar allows", () => {
    expect(bearerToken("Bearer dp_live_abc123")).toBe("dp_live_abc123");
    expect(bearerToken("bearer dp_live_abc123")).toBe("dp_live_abc123");
    expect(bearerToken("Bearer \t dp_live_abc123 ")).toBe("dp_live_abc123");
    expect(bearerToken("Bearer\tdp_live_abc123")).toBe("dp_live_abc123");
  });

  it("refuses what is not exactly one token after Bearer", () => {
    expect(bearerToken("Bearer ")).toBeNull();
    expect(bearerToken("Bearer a b")).toBeNull();
    expect(bearerToken("Basic dp_live_abc123")).toBeNull();
    expect(bearerToken("Bearerdp_live_abc123")).toBeNull();
    // Non-ASCII and no-break spaces leave the fast path; the grammar still decides.
    expect(bearerToken("Bearer tok\u00a0en")).toBeNull();
    expect(bearerToken("Bearer tøken")).toBe("tøken");
  });
});

describe("GET /me with records that change", () => {
  /** The memory store, but `findApiKeyWithTeam` hands out what `current` says. */
  async function withKeyRecords(current: () => { key: any; team: any }) {
    const storage = createMemoryStorage();
    const syncHash = sha256Hex(TOKENS.sync);
    const credentials = Object.assign(Object.create(storage.credentials), {
      findApiKeyWithTeam: (hash: string) =>
        hash === syncHash ? current() : storage.credentials.findApiKeyWithTeam!(hash),
    });
    const wrapped: Storage = { ...storage, credentials };
    const api = await setup({ storage: wrapped });
    const real = (await storage.credentials.findApiKeyWithTeam!(syncHash))!;
    expect(Object.isFrozen(real.key)).toBe(true);
    return { ...api, real };
  }

  it("serves the current name of a frozen key that was replaced by a new record", async () => {
    let record: { key: any; team: any } | null = null;
    const { call, real } = await withKeyRecords(() => record!);
    record = real;
    expect((await call("GET", "/api/v1/me", { token: TOKENS.sync })).json.name).toBe("Warehouse sync");
    record = { key: Object.freeze({ ...real.key, name: "Renamed sync" }), team: real.team };
    expect((await call("GET", "/api/v1/me", { token: TOKENS.sync })).json.name).toBe("Renamed sync");
    record = { key: record.key, team: Object.freeze({ ...real.team, name: "Ops (renamed)" }) };
    expect((await call("GET", "/api/v1/me", { token: TOKENS.sync })).json.teams).toEqual([
      { id: "team_ops", name: "Ops (renamed)" },
    ]);
  });

  it("authenticates through a store that answers with a plain value, a promise or any thenable", async () => {
    for (const answer of [
      (v: unknown) => v,
      (v: unknown) => Promise.resolve(v),
      (v: unknown) => ({ then: (resolve: (x: unknown) => void) => resolve(v) }),
    ]) {
      let real: { key: any; team: any } | null = null;
      const { call, real: found } = await withKeyRecords(() => answer(real) as any);
      real = found;
      const res = await call("GET", "/api/v1/me", { token: TOKENS.sync });
      expect(res.status).toBe(200);
      expect(res.json.name).toBe("Warehouse sync");
      expect((await call("GET", "/api/v1/me", { token: TOKENS.revoked })).status).toBe(401);
    }
  });

  it("never reuses the body of a record that is not frozen", async () => {
    let record: { key: any; team: any } | null = null;
    const { call, real } = await withKeyRecords(() => record!);
    const key = structuredClone(real.key);
    record = { key, team: real.team };
    expect((await call("GET", "/api/v1/me", { token: TOKENS.sync })).json.scopes).toEqual([
      "data:read",
      "tables:write",
      "dashboards:read",
      "audit:read",
    ]);
    key.scopes.pop();
    key.allowlist.tables.push("tbl_new");
    const after = (await call("GET", "/api/v1/me", { token: TOKENS.sync })).json;
    expect(after.scopes).toEqual(["data:read", "tables:write", "dashboards:read"]);
    expect(after.allowlist.tables).toEqual(["tbl_targets", "tbl_new"]);
  });
});

describe("api.dispatch (what the Node adapter calls)", () => {
  /** An ApiRequest whose body the adapter already holds, as the Node adapter does for small declared bodies. */
  function ready(method: string, path: string, headers: Record<string, string>, body?: string): ApiRequest {
    const bytes = new TextEncoder().encode(body ?? "");
    return {
      method,
      url: `http://dataport.test${path}`,
      path,
      headers: { get: (name) => headers[name] ?? null, keys: () => Object.keys(headers) },
      clientAddress: "198.51.100.7",
      readBody: (limit) => {
        if (bytes.byteLength > limit) throw new ApiError(413, "payload_too_large", "too large");
        return bytes;
      },
    };
  }
  const json = { "content-type": "application/json" };

  // A webhook body over the limit waits for its endpoint now (the delivery log records the 413: webhook-inbox.md).
  it("answers without a promise when nothing had to wait: a preflight, an unknown route, a wrong method, a missing admin token", async () => {
    const { api } = await setup({
      fixture: webhookFixture(),
      maxBodyBytes: 16,
      adminToken: "admin-token-0123456789-abcdef",
    });
    const cases: Array<[ApiRequest, number, string | null]> = [
      [ready("OPTIONS", "/api/webhooks/hook-open", {}), 204, null],
      [ready("GET", "/api/v1/nope", {}), 404, "not_found"],
      [ready("DELETE", "/api/v1/me", {}), 405, "method_not_allowed"],
      [ready("GET", "/api/admin/v1/teams", {}), 401, "unauthorized"],
    ];
    for (const [request, status, code] of cases) {
      for (const attempt of [{ ...request }, request]) {
        // The first time routes the target, the second finds it remembered: both answer at once.
        const reply = api.dispatch(attempt) as ApiReply;
        expect(reply).not.toBeInstanceOf(Promise);
        expect(reply.status).toBe(status);
        expect(reply.headers["access-control-allow-origin"]).toBe("*");
        if (code !== null) {
          expect(JSON.parse(reply.body as string).error.code).toBe(code);
          expect(JSON.parse(reply.body as string).error.requestId).toBe(reply.headers["x-request-id"]);
        }
      }
    }
  });

  it("continues once a port's promise settles: a webhook delivery stored, GET /me, and refusals decided by the store", async () => {
    const { api, storage } = await setup({ fixture: webhookFixture() });
    const first = api.dispatch(ready("POST", "/api/webhooks/hook-open", json, '{"event":"ping","n":0}'));
    expect(first).toBeInstanceOf(Promise);
    expect((await first).status).toBe(200);
    const reply = await api.dispatch(ready("POST", "/api/webhooks/hook-open", json, '{"event":"ping","n":1}'));
    const id = JSON.parse(reply.body as string).id as string;
    expect(reply.body).toBe(`{"ok":true,"id":"${id}","duplicate":false}`);
    expect(reply.headers["x-request-id"]).toMatch(/-/);
    expect(reply.headers["access-control-allow-origin"]).toBe("*");
    const page = await storage.rows.readDatasetRows("ds_conn_hook_open", {
      offset: 0,
      limit: null,
      columns: null,
      filters: null,
    });
    const rows = [];
    for await (const row of page.rows) rows.push(row);
    expect(rows.map((r) => [r.event, r.n])).toEqual([
      ["ping", 0],
      ["ping", 1],
    ]);
    expect(rows[1]!._id).toBe(id);

    const me = await api.dispatch(ready("GET", "/api/v1/me", { authorization: `Bearer ${TOKENS.sync}` }));
    expect(JSON.parse(me.body as string).name).toBe("Warehouse sync");
    const refusals: Array<[ApiRequest, number, string]> = [
      [ready("POST", "/api/webhooks/nope", json, "{}"), 404, "not_found"],
      [ready("POST", "/api/webhooks/hook-open", json, "{oops"), 400, "invalid_body"],
      [ready("GET", "/api/v1/me", {}), 401, "unauthorized"],
    ];
    for (const [request, status, code] of refusals) {
      const refused = await api.dispatch(request);
      expect([refused.status, JSON.parse(refused.body as string).error.code]).toEqual([status, code]);
      expect(JSON.parse(refused.body as string).error.requestId).toBe(refused.headers["x-request-id"]);
    }
  });

  it("continues when a step answers with a promise, and a rejection there becomes the 500 envelope", async () => {
    const storage = createMemoryStorage();
    const { api } = await setup({ storage });
    const real = storage.credentials.findApiKeyWithTeam!.bind(storage.credentials);
    let fail = false;
    storage.credentials.findApiKeyWithTeam = async (hash: string) => {
      if (fail) throw new Error("database on fire");
      return real(hash);
    };
    const request = () => ready("GET", "/api/v1/me", { authorization: `Bearer ${TOKENS.sync}` });
    const later = api.dispatch(request());
    expect(later).toBeInstanceOf(Promise);
    expect(JSON.parse((await later).body as string).name).toBe("Warehouse sync");
    fail = true;
    const failed = await api.dispatch(request());
    expect(failed.status).toBe(500);
    expect(JSON.parse(failed.body as string).error).toEqual({
      code: "internal",
      message: "internal error",
      requestId: failed.headers["x-request-id"],
    });
    // handle() is the same chain behind a promise.
    fail = false;
    const handled = await api.handle(request());
    expect(handled.status).toBe(200);
  });
});

describe("GET /datasets", () => {
  it("lists exactly the datasets and tables a key's allowlist names", async () => {
    const { call } = await setup();
    const res = await call("GET", "/api/v1/datasets", { token: TOKENS.sync });
    expect(res.status).toBe(200);
    expect(res.json.datasets.map((d: { id: string }) => d.id)).toEqual(["ds_orders", "tbl_targets", "ds_stores"]);
    expect(res.json.datasets[0]).toEqual({
      id: "ds_orders",
      name: "Orders 2026",
      type: "upload",
      rowCount: 5,
      columns: [
        { name: "order_id", type: "string" },
        { name: "amount", type: "number" },
        { name: "region", type: "string" },
      ],
      connectionId: null,
      connectionType: null,
      lastRefreshedAt: null,
      updatedAt: "2026-10-02T10:00:00Z",
    });
    expect(res.json.datasets[2]).toMatchObject({
      id: "ds_stores",
      type: "connection",
      connectionId: "conn_retail",
      connectionType: "memory",
    });
    expect(res.json.datasets[1]).toMatchObject({
      id: "tbl_targets",
      type: "input_table",
      connectionId: null,
      rowCount: 1,
    });
  });

  it("needs teamId from a session token and a membership", async () => {
    const { call } = await setup();
    const missing = await call("GET", "/api/v1/datasets", { token: TOKENS.sessionAda });
    expect(missing.status).toBe(400);
    expect(missing.json.error.code).toBe("team_required");
    const other = await call("GET", "/api/v1/datasets?teamId=team_mkt", { token: TOKENS.sessionAda });
    expect(other.status).toBe(404);
    const free = await call("GET", "/api/v1/datasets?teamId=team_free", { token: TOKENS.sessionAda });
    expect(free.status).toBe(403);
    expect(free.json.error.code).toBe("plan_required");
    const mine = await call("GET", "/api/v1/datasets?teamId=team_ops", { token: TOKENS.sessionAda });
    expect(mine.json.datasets.map((d: { id: string }) => d.id)).toEqual([
      "ds_orders",
      "ds_secret",
      "tbl_targets",
      "ds_stores",
    ]);
  });

  it("404s a key sending another team's id", async () => {
    const { call } = await setup();
    const res = await call("GET", "/api/v1/datasets?teamId=team_mkt", { token: TOKENS.sync });
    expect(res.status).toBe(404);
    const own = await call("GET", "/api/v1/datasets?teamId=team_ops", { token: TOKENS.sync });
    expect(own.status).toBe(200);
  });
});

describe("GET /datasets/{id}", () => {
  it("returns the dataset with writable", async () => {
    const { call } = await setup();
    const upload = await call("GET", "/api/v1/datasets/ds_orders", { token: TOKENS.sync });
    expect(upload.json).toMatchObject({ id: "ds_orders", writable: false, rowCount: 5 });
    const table = await call("GET", "/api/v1/datasets/tbl_targets", { token: TOKENS.sync });
    expect(table.json).toMatchObject({ id: "tbl_targets", type: "input_table", writable: true });
  });

  it("answers an id outside the allowlist exactly like an unknown id", async () => {
    const { call } = await setup();
    const outside = await call("GET", "/api/v1/datasets/ds_secret", { token: TOKENS.sync });
    const unknown = await call("GET", "/api/v1/datasets/ds_nope", { token: TOKENS.sync });
    const otherTeam = await call("GET", "/api/v1/datasets/ds_campaigns", { token: TOKENS.sync });
    for (const res of [outside, unknown, otherTeam]) {
      expect(res.status).toBe(404);
      expect(res.json.error.code).toBe("not_found");
      expect(res.json.error.message).toBe("dataset not found");
    }
  });
});

describe("GET /datasets/{id}/rows", () => {
  it("pages with offset and maxRows and reports metadata", async () => {
    const { call } = await setup();
    const res = await call("GET", "/api/v1/datasets/ds_orders/rows?maxRows=2&offset=1", { token: TOKENS.sync });
    expect(res.status).toBe(200);
    expect(res.json).toEqual({
      success: true,
      data: [
        { order_id: "A-2", amount: 30, region: "AMER" },
        { order_id: "A-3", amount: 7.25, region: "EMEA" },
      ],
      metadata: {
        datasetId: "ds_orders",
        datasetName: "Orders 2026",
        totalRows: 5,
        returnedRows: 2,
        offset: 1,
        hasMore: true,
        columns: ["order_id", "amount", "region"],
        columnTypes: { order_id: "string", amount: "number", region: "string" },
        lastUpdated: "2026-10-02T10:00:00Z",
        nextCursor: expect.stringMatching(/^[\w-]+$/),
        changesCursor: expect.stringMatching(/^[\w-]+\.[0-9a-f]+$/),
      },
    });
  });

  it("returns everything without maxRows, and hasMore false on the last page", async () => {
    const { call } = await setup();
    const all = await call("GET", "/api/v1/datasets/ds_orders/rows", { token: TOKENS.sync });
    expect(all.json.data).toHaveLength(5);
    expect(all.json.metadata).toMatchObject({ returnedRows: 5, hasMore: false });
    const last = await call("GET", "/api/v1/datasets/ds_orders/rows?offset=4&maxRows=10", { token: TOKENS.sync });
    expect(last.json.data).toEqual([{ order_id: "A-5", amount: 1, region: "EMEA" }]);
    expect(last.json.metadata).toMatchObject({ returnedRows: 1, hasMore: false });
    const beyond = await call("GET", "/api/v1/datasets/ds_orders/rows?offset=50", { token: TOKENS.sync });
    expect(beyond.json.data).toEqual([]);
    expect(beyond.json.metadata).toMatchObject({ totalRows: 5, returnedRows: 0, hasMore: false });
  });

  it("selects columns and filters by JSON equality; totalRows counts matches", async () => {
    const { call } = await setup();
    const filters = encodeURIComponent(JSON.stringify({ region: "EMEA" }));
    const res = await call(
      "GET",
      `/api/v1/datasets/ds_orders/rows?columns=amount,order_id&filters=${filters}&maxRows=2`,
      {
        token: TOKENS.sync,
      },
    );
    expect(res.json.data).toEqual([
      { amount: 12.5, order_id: "A-1" },
      { amount: 7.25, order_id: "A-3" },
    ]);
    expect(res.json.metadata).toMatchObject({
      totalRows: 3,
      returnedRows: 2,
      hasMore: true,
      columns: ["amount", "order_id"],
      columnTypes: { amount: "number", order_id: "string" },
    });
    const numeric = encodeURIComponent(JSON.stringify({ amount: "30" }));
    const none = await call("GET", `/api/v1/datasets/ds_orders/rows?filters=${numeric}`, { token: TOKENS.sync });
    expect(none.json.metadata.totalRows).toBe(0);
  });

  it("refuses malformed parameters with 400 invalid_parameter naming them", async () => {
    const { call } = await setup();
    const cases: Array<[string, string]> = [
      ["maxRows=-1", "maxRows"],
      ["maxRows=abc", "maxRows"],
      ["offset=abc", "offset"],
      ["offset=-3", "offset"],
      [`filters=${encodeURIComponent("[1]")}`, "filters"],
      [`filters=${encodeURIComponent("{oops")}`, "filters"],
      [`filters=${encodeURIComponent('{"nope":1}')}`, "filters"],
      ["columns=order_id,nope", "columns"],
      ["columns=", "columns"],
    ];
    for (const [query, parameter] of cases) {
      const res = await call("GET", `/api/v1/datasets/ds_orders/rows?${query}`, { token: TOKENS.sync });
      expect({
        query,
        status: res.status,
        code: res.json.error.code,
        parameter: res.json.error.details.parameter,
      }).toEqual({
        query,
        status: 400,
        code: "invalid_parameter",
        parameter,
      });
    }
  });

  it("points input tables to /tables/{id}/rows", async () => {
    const { call } = await setup();
    const res = await call("GET", "/api/v1/datasets/tbl_targets/rows", { token: TOKENS.sync });
    expect(res.status).toBe(400);
    expect(res.json.error.code).toBe("invalid_parameter");
    expect(res.json.error.message).toContain("/tables/tbl_targets/rows");
  });

  it("keeps payload keys like __proto__ as plain columns", async () => {
    const fixture = (await import("./support/fixture.js")).testFixture();
    const orders = fixture.datasets[0]!;
    orders.columns.push({ name: "__proto__", type: "json" });
    orders.rows = [JSON.parse('{"order_id":"P","amount":1,"region":"X","__proto__":{"polluted":true}}')];
    const { call } = await setup({ fixture });
    const res = await call("GET", "/api/v1/datasets/ds_orders/rows?columns=order_id,__proto__", { token: TOKENS.sync });
    expect(res.status).toBe(200);
    expect(res.text).toContain('"__proto__":{"polluted":true}');
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });

  it("streams a large read as chunks and still produces valid JSON", async () => {
    const fixture = (await import("./support/fixture.js")).testFixture();
    const rows = Array.from({ length: 20_000 }, (_, i) => ({ order_id: `B-${i}`, amount: i, region: "EMEA" }));
    fixture.datasets[0]!.rows = rows;
    const { api } = await setup({ fixture });
    const response = await api.fetch(
      new Request("http://x/api/v1/datasets/ds_orders/rows", { headers: { authorization: `Bearer ${TOKENS.sync}` } }),
    );
    const reader = response.body!.getReader();
    let chunks = 0;
    let text = "";
    const decoder = new TextDecoder();
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      chunks++;
      text += decoder.decode(value, { stream: true });
    }
    expect(chunks).toBeGreaterThan(5);
    const body = JSON.parse(text);
    expect(body.data).toHaveLength(20_000);
    expect(body.data[19_999]).toEqual({ order_id: "B-19999", amount: 19_999, region: "EMEA" });
    expect(body.metadata).toMatchObject({ totalRows: 20_000, returnedRows: 20_000, hasMore: false });
  });
});

describe("authentication with a store that has no findApiKeyWithTeam (the optional one-call lookup)", () => {
  it("finds the key and then its team, and refuses revoked and Free-plan keys alike", async () => {
    const storage = createMemoryStorage();
    delete (storage.credentials as { findApiKeyWithTeam?: unknown }).findApiKeyWithTeam;
    const { call } = await setup({ storage });
    const me = await call("GET", "/api/v1/me", { token: TOKENS.sync });
    expect(me.status).toBe(200);
    expect(me.json).toMatchObject({ kind: "api-key", name: "Warehouse sync", teams: [{ id: "team_ops" }] });
    expect((await call("GET", "/api/v1/me", { token: TOKENS.revoked })).json.error.code).toBe("unauthorized");
    expect((await call("GET", "/api/v1/me", { token: TOKENS.freeTeam })).json.error.code).toBe("plan_required");
    expect((await call("GET", "/api/v1/me", { token: "dp_nope" })).status).toBe(401);
  });
});
