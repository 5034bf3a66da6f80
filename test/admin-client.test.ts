import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { describe, expect, it } from "vitest";
import { toNodeHandler } from "../adapters/node.js";
import {
  AuthenticationError,
  createAdminClient,
  DataportError,
  NetworkError,
  NotFoundError,
  PermissionDeniedError,
  ServerError,
  UnprocessableEntityError,
} from "../src/admin-client/index.js";
import { DataportError as ClientDataportError, createClient } from "../src/client/index.js";
import { setup } from "./support/api.js";
import { ADMIN_TOKEN } from "./support/admin.js";
import { TOKENS } from "./support/fixture.js";

const ADMIN = "http://dataport.test/api/admin/v1";
const API = "http://dataport.test/api/v1";

/**
 * An API on the memory store with the test fixture and the admin API mounted; `requests` records what the admin client
 * sent.
 */
async function adminSetup(answer?: (request: Request, index: number) => Response | null) {
  const { api, call } = await setup({ adminToken: ADMIN_TOKEN });
  const requests: Request[] = [];
  const fetch = async (request: Request) => {
    requests.push(request.clone());
    return answer?.(request, requests.length - 1) ?? api.fetch(request);
  };
  const sleep = async () => {};
  const admin = createAdminClient({ baseUrl: ADMIN, token: ADMIN_TOKEN, fetch, sleep });
  const dp = (token: string) => createClient({ baseUrl: API, token, fetch: api.fetch, retry: { retries: 0 } });
  return { api, call, admin, requests, dp };
}

const unavailable = () =>
  new Response(JSON.stringify({ error: { code: "storage_unavailable", message: "down", requestId: "req_x" } }), {
    status: 503,
  });

describe("the admin client against the admin API (memory store)", () => {
  it("puts a team (created, then replaced), reads it, lists and iterates teams by cursor, deletes it", async () => {
    const { admin, dp } = await adminSetup();
    const input = { name: "Field sales", plan: "pro" as const, businessId: "biz_1", isPersonal: false };
    const first = await admin.teams.put("team_field", input);
    expect(first).toEqual({ created: true, value: { id: "team_field", ...input } });
    expect(admin.meta(first)?.status).toBe(201);
    const second = await admin.teams.put("team_field", { ...input, plan: "free" });
    expect(second).toEqual({ created: false, value: { id: "team_field", ...input, plan: "free" } });
    expect(admin.meta(second.value)?.status).toBe(200);
    expect(await admin.teams.get("team_field")).toEqual({ id: "team_field", ...input, plan: "free" });

    const page = await admin.teams.list({ limit: 2 });
    expect(page.data.map((t) => t.id)).toEqual(["team_field", "team_free"]);
    expect(page.hasMore).toBe(true);
    const next = await admin.teams.list({ limit: 2, cursor: page.nextCursor });
    expect(next).toMatchObject({ hasMore: false, nextCursor: null });
    expect(next.data.map((t) => t.id)).toEqual(["team_mkt", "team_ops"]);
    expect(await admin.teams.iterate({ pageSize: 1 }).collect({ max: 10 })).toHaveLength(4);
    expect((await admin.teams.iterate({ pageSize: 3 }).collect({ max: 3 })).map((t) => t.id)).toEqual([
      "team_field",
      "team_free",
      "team_mkt",
    ]);

    await expect(admin.teams.delete("team_field")).resolves.toBeUndefined();
    const gone = await admin.teams.get("team_field").catch((error: unknown) => error);
    expect(gone).toBeInstanceOf(NotFoundError);
    expect(gone).toMatchObject({ status: 404, code: "not_found" });
    // The same error classes as dataport/client's: one `instanceof` serves both clients.
    expect(gone).toBeInstanceOf(ClientDataportError);
    // The Data Access API sees the plan change of a team at once.
    await admin.teams.put("team_mkt", { name: "Marketing", plan: "free", businessId: "biz_1", isPersonal: false });
    await expect(dp(TOKENS.noAdmin).me()).rejects.toMatchObject({ status: 403, code: "plan_required" });
  });

  it("manages businesses, users and memberships; a session it issues works on /api/v1 until deleted", async () => {
    const { admin, dp } = await adminSetup();
    expect((await admin.businesses.put("biz_2", { name: "Contoso" })).created).toBe(true);
    expect((await admin.businesses.list()).data.map((b) => b.id)).toEqual(["biz_1", "biz_2"]);
    await expect(admin.businesses.delete("biz_1")).rejects.toMatchObject({
      status: 409,
      code: "conflict",
      details: { teams: ["team_mkt", "team_ops"] },
    });
    await admin.businesses.delete("biz_2");

    const user = await admin.users.put("usr_cy", { email: "cy@northwind.test", name: "Cy", businessAdmin: false });
    expect(user.value).toEqual({ id: "usr_cy", email: "cy@northwind.test", name: "Cy", businessAdmin: false });
    expect(await admin.memberships.put("usr_cy", "team_mkt", { role: "viewer" })).toEqual({
      created: true,
      value: { userId: "usr_cy", teamId: "team_mkt", role: "viewer" },
    });
    expect((await admin.memberships.put("usr_cy", "team_mkt", { role: "editor" })).created).toBe(false);
    expect(await admin.memberships.get("usr_cy", "team_mkt")).toEqual({
      userId: "usr_cy",
      teamId: "team_mkt",
      role: "editor",
    });
    const memberships = await admin.memberships.list("usr_cy");
    expect(memberships).toEqual([{ userId: "usr_cy", teamId: "team_mkt", role: "editor" }]);
    expect(admin.meta(memberships)?.status).toBe(200);

    const session = await admin.sessions.create({ userId: "usr_cy", expiresInSeconds: 3600 });
    expect(session).toMatchObject({ userId: "usr_cy", expiresAt: "2026-11-01T13:00:00.000Z" });
    expect(session.token).toMatch(/^dps_/);
    expect(await admin.sessions.get(session.id)).toEqual({
      id: session.id,
      userId: "usr_cy",
      expiresAt: "2026-11-01T13:00:00.000Z",
    });
    const me = await dp(session.token).me();
    expect(me).toEqual({
      kind: "session-token",
      teams: [{ id: "team_mkt", name: "Marketing", isPersonal: false, role: "editor" }],
    });

    await admin.memberships.delete("usr_cy", "team_mkt");
    expect(await admin.memberships.list("usr_cy")).toEqual([]);
    await admin.sessions.delete(session.id);
    await expect(dp(session.token).me()).rejects.toBeInstanceOf(AuthenticationError);
    await admin.users.delete("usr_cy");
    await expect(admin.users.get("usr_cy")).rejects.toMatchObject({ status: 404 });
  });

  it("creates an API key answering { key, token } as createApiKey does; the token works until revoked", async () => {
    const { admin, dp } = await adminSetup();
    const { key, token } = await admin.apiKeys.create({
      teamId: "team_ops",
      name: "Nightly export",
      createdBy: "usr_ada",
      scopes: ["data:read"],
      allowlist: { datasets: ["ds_orders"] },
    });
    expect(key).toMatchObject({
      teamId: "team_ops",
      name: "Nightly export",
      createdBy: "usr_ada",
      scopes: ["data:read"],
      revokedAt: null,
    });
    expect(key.allowlist.datasets).toEqual(["ds_orders"]);
    expect(key).not.toHaveProperty("token");
    expect(key).not.toHaveProperty("tokenHash");
    expect((await dp(token).datasets.list()).map((d) => d.id)).toEqual(["ds_orders"]);
    expect(await admin.apiKeys.get(key.id)).toEqual(key);
    expect((await admin.apiKeys.list("team_ops"))[0]).toEqual(key);

    await admin.apiKeys.revoke(key.id);
    await expect(dp(token).me()).rejects.toMatchObject({ status: 401, code: "unauthorized" });
    expect((await admin.apiKeys.get(key.id)).revokedAt).toBe("2026-11-01T12:00:00.000Z");
    const free = await admin.apiKeys
      .create({ teamId: "team_free", name: "x", createdBy: "usr_ada", scopes: ["data:read"] })
      .catch((e: unknown) => e);
    expect(free).toBeInstanceOf(PermissionDeniedError);
    expect(free).toMatchObject({ code: "plan_required" });
  });

  it("names the actor of a change (client default, per call), audited; an unknown actor is 422 and changes nothing", async () => {
    const { api, call } = await setup({ adminToken: ADMIN_TOKEN, auditLagSeconds: 0 });
    const admin = createAdminClient({ baseUrl: ADMIN, token: ADMIN_TOKEN, fetch: api.fetch, actorUserId: "usr_ada" });
    await admin.teams.put("team_ops", { name: "Ops", plan: "business", businessId: "biz_1", isPersonal: false });
    await admin.teams.put(
      "team_ops",
      { name: "Ops 2", plan: "business", businessId: "biz_1", isPersonal: false },
      { actorUserId: "usr_bob" },
    );
    await admin.teams.put(
      "team_ops",
      { name: "Ops 3", plan: "business", businessId: "biz_1", isPersonal: false },
      { actorUserId: null },
    );
    const audit = await call("GET", "/api/v1/audit?format=raw&category=audit&limit=1000", { token: TOKENS.sync });
    const actors = audit.json.events
      .filter((e: { action: string }) => e.action === "team.updated")
      .map((e: { actor: { id: string } }) => e.actor.id);
    expect(actors).toEqual(["usr_ada", "usr_bob", "host"]);
    const refused = await admin.teams
      .put(
        "team_ops",
        { name: "Nope", plan: "free", businessId: null, isPersonal: false },
        { actorUserId: "usr_ghost" },
      )
      .catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(UnprocessableEntityError);
    expect(refused).toMatchObject({ code: "validation_failed", details: { path: "X-Actor-User-Id" } });
    expect((await admin.teams.get("team_ops")).name).toBe("Ops 3");
  });

  it("puts a webhook connection (its endpointUrl answered) and sets and removes its signing secret", async () => {
    const { admin } = await adminSetup();
    const put = await admin.connections.put("conn_hook", {
      teamId: "team_ops",
      name: "Orders hook",
      type: "webhook",
      config: { endpointId: "ep_orders" },
    });
    expect(put.created).toBe(true);
    expect(put.value.endpointUrl).toMatch(/\/api\/webhooks\/ep_orders$/);
    expect(put.value.config).toMatchObject({ endpointId: "ep_orders", signed: false });
    expect(
      (await admin.connections.setSigningSecret("conn_hook", { secret: "whsec_0123456789abcdef0123" })).config,
    ).toMatchObject({ signed: true });
    expect(JSON.stringify(await admin.connections.get("conn_hook"))).not.toContain("whsec_0123456789abcdef0123");
    expect((await admin.connections.setSigningSecret("conn_hook", { secret: null })).config).toMatchObject({
      signed: false,
    });
    expect((await admin.connections.list()).data.map((c) => c.id)).toEqual(["conn_hook", "conn_retail"]);
    await admin.connections.delete("conn_hook");
    await expect(admin.connections.get("conn_hook")).rejects.toBeInstanceOf(NotFoundError);
  });

  it("uploads rows as an array, a generator (NDJSON), CSV text, a CSV stream and a JSON array; the Data Access API serves them", async () => {
    const { admin, dp, requests } = await adminSetup();
    const dataset = await admin.datasets.put("ds_cities", {
      teamId: "team_ops",
      name: "Cities",
      type: "upload",
      connectionId: null,
      source: null,
    });
    expect(dataset).toMatchObject({ created: true, value: { id: "ds_cities", rowCount: 0 } });
    const rowsOf = async () => (await dp(TOKENS.sessionAda).datasets.rows("ds_cities")).data;

    const replaced = await admin.datasets.replaceRows("ds_cities", [
      { city: "Lyon", pop: 513275 },
      { city: "Oslo", pop: 709037 },
    ]);
    expect(replaced).toMatchObject({
      id: "ds_cities",
      rowCount: 2,
      columns: [
        { name: "city", type: "string" },
        { name: "pop", type: "number" },
      ],
    });
    expect(requests.at(-1)!.headers.get("content-type")).toBe("application/x-ndjson");
    expect(await requests.at(-1)!.text()).toBe('{"city":"Lyon","pop":513275}\n{"city":"Oslo","pop":709037}\n');

    async function* more() {
      yield { city: "Rome", pop: 2873000 };
      yield { city: "Bern", pop: 134000, canton: "BE" };
    }
    expect((await admin.datasets.appendRows("ds_cities", more())).rowCount).toBe(4);
    expect(await rowsOf()).toEqual([
      { city: "Lyon", pop: 513275 },
      { city: "Oslo", pop: 709037 },
      { city: "Rome", pop: 2873000 },
      { city: "Bern", pop: 134000, canton: "BE" },
    ]);

    await admin.datasets.replaceRows("ds_cities", {
      format: "csv",
      body: 'city,pop\nQuito,2800000\n"Nuuk, GL",19000\n',
    });
    expect(requests.at(-1)!.headers.get("content-type")).toBe("text/csv; charset=utf-8");
    expect(await rowsOf()).toEqual([
      { city: "Quito", pop: 2800000 },
      { city: "Nuuk, GL", pop: 19000 },
    ]);

    const encoder = new TextEncoder();
    const stream = new ReadableStream<Uint8Array>({
      start(controller) {
        for (const chunk of ["city,po", "p\nLima,97", "00000\n"]) controller.enqueue(encoder.encode(chunk));
        controller.close();
      },
    });
    expect((await admin.datasets.appendRows("ds_cities", { format: "csv", body: stream })).rowCount).toBe(3);
    await admin.datasets.appendRows("ds_cities", { format: "json", body: ['[{"city":"Cork",', '"pop":224000}]'] });
    expect((await rowsOf()).map((r) => [r.city, r.pop])).toEqual([
      ["Quito", 2800000],
      ["Nuuk, GL", 19000],
      ["Lima", 9700000],
      ["Cork", 224000],
    ]);
  });

  it("refuses a bad row naming its line and keeps the rows; a failed stream upload is not retried, an array upload is", async () => {
    let failNext = 0;
    const { admin, requests } = await adminSetup((request) =>
      request.method !== "GET" && failNext-- > 0 ? unavailable() : null,
    );
    await admin.datasets.put("ds_n", {
      teamId: "team_ops",
      name: "N",
      type: "upload",
      connectionId: null,
      source: null,
    });
    await admin.datasets.replaceRows("ds_n", [{ n: 1 }, { n: 2 }]);
    const refused = await admin.datasets
      .appendRows("ds_n", { format: "ndjson", body: '{"n":3}\n{"n":\n' })
      .catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(UnprocessableEntityError);
    expect(refused).toMatchObject({ code: "validation_failed", details: { line: 2 } });
    expect((await admin.datasets.get("ds_n")).rowCount).toBe(2);

    // A PUT of an array: sent again after a 503, and applied once.
    failNext = 1;
    const sent = requests.length;
    const stored = await admin.datasets.replaceRows("ds_n", [{ n: 7 }]);
    expect(stored.rowCount).toBe(1);
    expect(admin.meta(stored)?.attempts).toBe(2);
    expect(requests.length - sent).toBe(2);
    // A generator is read by its one attempt: the 503 is raised.
    failNext = 1;
    async function* rows() {
      yield { n: 8 };
    }
    const failed = await admin.datasets.replaceRows("ds_n", rows()).catch((e: unknown) => e);
    expect(failed).toBeInstanceOf(ServerError);
    expect(failed).toMatchObject({ status: 503, code: "storage_unavailable", meta: { attempts: 1 } });
    expect((await admin.datasets.get("ds_n")).rowCount).toBe(1);
  });

  it("sends writes the server would apply twice once after a 5xx, and again after a 429", async () => {
    let answers: Response[] = [];
    const { admin, requests } = await adminSetup((request) =>
      request.method === "POST" ? (answers.shift() ?? null) : null,
    );
    answers = [unavailable()];
    await expect(admin.sessions.create({ userId: "usr_ada" })).rejects.toMatchObject({
      status: 503,
      meta: { attempts: 1 },
    });
    expect(requests.filter((r) => r.method === "POST")).toHaveLength(1);
    expect(requests[0]!.headers.get("idempotency-key")).toBeNull();

    answers = [
      new Response(JSON.stringify({ error: { code: "rate_limited", message: "slow down", requestId: "req_y" } }), {
        status: 429,
        headers: { "retry-after": "1" },
      }),
    ];
    const session = await admin.sessions.create({ userId: "usr_ada" });
    expect(admin.meta(session)).toMatchObject({ status: 201, attempts: 2 });

    // Audit events that all carry ids are safe to send again: a 503 is retried, and the repeat is skipped.
    const event = {
      id: "evt_host_1",
      teamId: "team_ops",
      time: "2026-11-01T11:00:00Z",
      category: "audit" as const,
      action: "report.exported",
    };
    answers = [unavailable()];
    expect(await admin.history.recordAuditEvents([event])).toEqual({ stored: 1, skipped: 0 });
    expect(await admin.history.recordAuditEvents([event])).toEqual({ stored: 0, skipped: 1 });
  });

  it("puts tables and dashboard versions, records history batches, refreshes a connection dataset", async () => {
    const { admin, dp } = await adminSetup();
    const table = await admin.tables.put("tbl_budget", {
      teamId: "team_ops",
      name: "Budget",
      columns: [{ name: "amount", type: "number" }],
    });
    expect(table).toMatchObject({
      created: true,
      value: { id: "tbl_budget", name: "Budget", columns: [{ name: "amount", type: "number" }] },
    });
    expect((await admin.tables.list()).data.map((t) => t.id)).toEqual(["tbl_budget", "tbl_targets"]);
    await admin.tables.delete("tbl_budget");

    const version = {
      teamId: "team_ops",
      name: "Sales",
      description: null,
      published: true,
      publishedAt: "2026-10-20T00:00:00Z",
      datasetIds: ["ds_orders"],
    };
    expect((await admin.dashboards.putVersion("dash_sales", 1, version)).created).toBe(true);
    expect((await admin.dashboards.putVersion("dash_sales", 2, { ...version, name: "Sales v2" })).created).toBe(true);
    const replaced = await admin.dashboards.putVersion("dash_sales", 2, { ...version, name: "Sales (2)" });
    expect(replaced.created).toBe(false);
    expect(replaced.value.versions.map((v) => v.version)).toEqual([1, 2]);
    expect((await admin.dashboards.get("dash_sales")).name).toBe("Sales (2)");
    expect((await admin.dashboards.list()).data.map((d) => d.id)).toEqual(["dash_sales"]);

    const views = [
      { dashboardId: "dash_sales", at: "2026-10-31T09:00:00Z", visitorId: "v1", userId: "usr_ada" },
      { dashboardId: "dash_sales", at: "2026-10-31T10:00:00Z", visitorId: "v2" },
    ];
    expect(await admin.history.recordDashboardViews(views)).toEqual({ stored: 2 });
    const counted = await dp(TOKENS.sync).dashboards.views("dash_sales", { days: 7 });
    expect(counted.series.reduce((sum, day) => sum + day.views, 0)).toBe(2);
    expect(
      await admin.history.recordRefreshRuns([
        { datasetId: "ds_orders", startedAt: "2026-10-31T00:00:00Z", durationMs: 1200, rowsProcessed: 5 },
      ]),
    ).toEqual({ stored: 1 });
    expect(
      await admin.history.recordCreditUsage([
        { teamId: "team_ops", at: "2026-10-31T00:00:00Z", category: "query", credits: 2.5 },
      ]),
    ).toEqual({ stored: 1 });
    const unknown = await admin.history
      .recordDashboardViews([{ dashboardId: "dash_nope", at: "2026-10-31T09:00:00Z", visitorId: "v1" }])
      .catch((e: unknown) => e);
    expect(unknown).toMatchObject({ status: 422, details: { path: "$[0].dashboardId" } });

    const run = await admin.datasets.refresh("ds_stores", { maxRows: 10 });
    expect(run).toMatchObject({ datasetId: "ds_stores", ok: true, rowsProcessed: 1, error: null });
    await admin.dashboards.delete("dash_sales");
    await expect(admin.dashboards.get("dash_sales")).rejects.toBeInstanceOf(NotFoundError);
  });

  it("reads the admin OpenAPI document with the admin token; a wrong token is 401", async () => {
    const { api, admin } = await adminSetup();
    const doc = await admin.openapi();
    expect(doc).toMatchObject({ openapi: "3.1.0", info: { title: "Dataport admin API" } });
    const wrong = createAdminClient({ baseUrl: ADMIN, token: TOKENS.sync, fetch: api.fetch });
    const error = await wrong.teams.list().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(DataportError);
    expect(error).toMatchObject({ status: 401, code: "unauthorized" });
  });
});

describe("the admin client over HTTP (Node listener)", () => {
  async function listening() {
    const { api } = await setup({ adminToken: ADMIN_TOKEN });
    const server = createServer(toNodeHandler(api));
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    // The client's keep-alive connections would hold close() for seconds.
    const close = () => new Promise((resolve) => server.close(resolve).closeAllConnections());
    return { origin, close };
  }

  it('raises the error the rows\' source threw mid-upload (not "fetch failed"), and the server stored nothing', async () => {
    const { origin, close } = await listening();
    try {
      const admin = createAdminClient({ baseUrl: `${origin}/api/admin/v1`, token: ADMIN_TOKEN });
      await admin.datasets.put("ds_n", {
        teamId: "team_ops",
        name: "N",
        type: "upload",
        connectionId: null,
        source: null,
      });
      await admin.datasets.replaceRows("ds_n", [{ n: 0 }]);
      const broken = new Error("source failed at row 3");
      async function* rows() {
        yield { n: 1 };
        yield { n: 2 };
        throw broken;
      }
      await expect(admin.datasets.replaceRows("ds_n", rows())).rejects.toBe(broken);
      await expect(
        admin.datasets.appendRows("ds_n", {
          format: "csv",
          body: (function* () {
            yield "n\n4\n";
            throw broken;
          })(),
        }),
      ).rejects.toBe(broken);
      expect((await admin.datasets.get("ds_n")).rowCount).toBe(1);
    } finally {
      await close();
    }
  });

  it("sends a session request once when the connection fails: a NetworkError, no second attempt", async () => {
    let sent = 0;
    const admin = createAdminClient({
      baseUrl: ADMIN,
      token: ADMIN_TOKEN,
      sleep: async () => {},
      fetch: async () => {
        sent++;
        throw new TypeError("fetch failed");
      },
    });
    const error = await admin.sessions.create({ userId: "usr_ada" }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(NetworkError);
    expect(error).toMatchObject({ code: "network_error", message: "POST /sessions failed: fetch failed" });
    expect(sent).toBe(1);
    // A PUT is retried on the same failure (3 more attempts by default).
    await expect(admin.teams.get("team_ops")).rejects.toBeInstanceOf(NetworkError);
    expect(sent).toBe(5);
  });

  it("streams 20,000 generated rows as one request body (NDJSON, no retry), stored whole", async () => {
    const { origin, close } = await listening();
    try {
      const admin = createAdminClient({ baseUrl: `${origin}/api/admin/v1/`, token: ADMIN_TOKEN, timeoutMs: 0 });
      await admin.datasets.put("ds_big", {
        teamId: "team_ops",
        name: "Big",
        type: "upload",
        connectionId: null,
        source: null,
      });
      let produced = 0;
      async function* rows() {
        for (let i = 0; i < 20_000; i++) {
          produced++;
          yield { i, label: `row ${i}`, even: i % 2 === 0 };
        }
      }
      const stored = await admin.datasets.replaceRows("ds_big", rows());
      expect(produced).toBe(20_000);
      expect(stored).toMatchObject({
        rowCount: 20_000,
        columns: [
          { name: "i", type: "number" },
          { name: "label", type: "string" },
          { name: "even", type: "boolean" },
        ],
      });
      const dp = createClient({ baseUrl: `${origin}/api/v1`, token: TOKENS.sessionAda });
      const last = await dp.datasets.rows("ds_big", { offset: 19_999 });
      expect(last.data).toEqual([{ i: 19_999, label: "row 19999", even: false }]);
    } finally {
      await close();
    }
  });
});
