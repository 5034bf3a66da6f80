import { describe, expect, it } from "vitest";
import { createDataApi } from "../../src/server/api.js";
import { createMemoryStorage } from "../../src/memory/memory-storage.js";
import type { IdentityStore } from "../../src/ports/storage.js";
import { mountStorage } from "../../src/storage/mount.js";
import { setup } from "../support/api.js";
import { ADMIN_TOKEN, httpAdmin } from "../support/admin.js";
import { TOKENS } from "../support/fixture.js";

describe("the admin HTTP API", () => {
  it("is not mounted without an admin token: its paths answer 404 like any unknown path", async () => {
    const { call } = await setup();
    const answer = await call("GET", "/api/admin/v1/teams", { token: "x".repeat(32) });
    expect(answer.status).toBe(404);
    expect(answer.json.error.code).toBe("not_found");
  });

  it("refuses a missing or wrong token, API keys and session tokens with 401; the admin token never works on /api/v1", async () => {
    const { call } = await setup({ adminToken: ADMIN_TOKEN });
    for (const token of [undefined, `${ADMIN_TOKEN}x`, TOKENS.sync, TOKENS.sessionAda]) {
      const answer = await call("GET", "/api/admin/v1/teams", { token });
      expect(answer.status).toBe(401);
      expect(answer.json.error.code).toBe("unauthorized");
      expect(answer.headers.get("www-authenticate")).toBe("Bearer");
      expect(answer.headers.get("x-request-id")).toBe(answer.json.error.requestId);
    }
    expect((await call("GET", "/api/admin/v1/teams", { token: ADMIN_TOKEN })).status).toBe(200);
    expect((await call("GET", "/api/v1/me", { token: ADMIN_TOKEN })).status).toBe(401);
  });

  it("refuses an admin token shorter than 24 printable characters at startup", () => {
    expect(() => createDataApi({ adminToken: "short" })).toThrow(/at least 24 printable/);
    expect(() => createDataApi({ adminToken: `${"x".repeat(23)} y` })).toThrow(/at least 24 printable/);
  });

  it("serves its own OpenAPI 3.1 document behind the admin token", async () => {
    const { call } = await setup({ adminToken: ADMIN_TOKEN });
    expect((await call("GET", "/api/admin/v1/openapi.json")).status).toBe(401);
    const doc = await call("GET", "/api/admin/v1/openapi.json", { token: ADMIN_TOKEN });
    expect(doc.status).toBe(200);
    expect(doc.json.openapi).toBe("3.1.0");
    expect(doc.json.info.title).toBe("Dataport admin API");
    // Its own description, not the Data API's (which speaks of API keys and session tokens).
    expect(doc.json.info.description).toMatch(/^The host's admin API: /);
    expect(doc.json.info.description).toContain("Authorization: Bearer <admin token>");
    expect(doc.json.info.description).not.toContain("session token (membership");
    expect(Object.keys(doc.json.paths)).toContain("/api/admin/v1/users/{id}/memberships/{teamId}");
    expect(doc.json.paths["/api/admin/v1/teams/{id}"].put.security).toEqual([{ adminAuth: [] }]);
    expect(doc.json.paths["/api/admin/v1/datasets/{id}/rows"].put.requestBody.content).toHaveProperty("text/csv");
    // Admin JSON bodies (batches of up to 10,000 items) take 32 MiB, more than the API's 1 MiB: the document says so.
    expect(doc.json.paths["/api/admin/v1/teams/{id}"].put.requestBody.description).toBe(
      "At most 33,554,432 bytes (413 payload_too_large beyond).",
    );
    // The Data Access API's own document does not list admin operations.
    const api = await call("GET", "/api/v1/openapi.json");
    expect(Object.keys(api.json.paths).some((p) => p.startsWith("/api/admin"))).toBe(false);
  });

  it("uploads CSV and NDJSON rows; a ragged CSV is refused naming its line and stores nothing", async () => {
    const { api, call } = await setup({ adminToken: ADMIN_TOKEN });
    const send = httpAdmin(api);
    await send("PUT", "/datasets/ds_csv", {
      teamId: "team_ops",
      name: "CSV",
      type: "upload",
      connectionId: null,
      source: null,
    });
    const csv = 'city,pop,note\nLyon,513275,"says ""hi"""\nOslo,709037,"two\nlines"\n';
    const uploaded = await send("PUT", "/datasets/ds_csv/rows", csv, { "content-type": "text/csv" });
    expect(uploaded.status).toBe(200);
    expect(uploaded.json).toMatchObject({
      rowCount: 2,
      columns: [
        { name: "city", type: "string" },
        { name: "pop", type: "number" },
        { name: "note", type: "string" },
      ],
    });
    const read = await call("GET", "/api/v1/datasets/ds_csv/rows?teamId=team_ops", { token: TOKENS.sessionAda });
    expect(read.json.data).toEqual([
      { city: "Lyon", pop: 513275, note: 'says "hi"' },
      { city: "Oslo", pop: 709037, note: "two\nlines" },
    ]);
    const ragged = await send("PUT", "/datasets/ds_csv/rows", "city,pop\nA,1\nB,2\nC,3,extra\n", {
      "content-type": "text/csv",
    });
    expect(ragged.status).toBe(422);
    expect(ragged.json.error).toMatchObject({ code: "validation_failed", details: { line: 4 } });
    expect((await send("GET", "/datasets/ds_csv")).json.rowCount).toBe(2);
    const ndjson = await send(
      "POST",
      "/datasets/ds_csv/rows",
      '{"city":"Rome","pop":2873000}\n\n{"city":"Bern","pop":134000}\n',
      {
        "content-type": "application/x-ndjson",
      },
    );
    expect(ndjson.json.rowCount).toBe(4);
    const badLine = await send("POST", "/datasets/ds_csv/rows", '{"city":"X"}\n{"city":\n', {
      "content-type": "application/x-ndjson",
    });
    expect(badLine.status).toBe(422);
    expect(badLine.json.error.details.line).toBe(2);
    expect((await send("GET", "/datasets/ds_csv")).json.rowCount).toBe(4);
    expect((await send("PUT", "/datasets/ds_csv/rows", "a,b", { "content-type": "text/plain" })).status).toBe(415);
  });

  it("converts uploads to declared columns and refuses what does not fit", async () => {
    const { api } = await setup({ adminToken: ADMIN_TOKEN });
    const send = httpAdmin(api);
    const columns = [
      { name: "sku", type: "string" },
      { name: "qty", type: "number" },
    ];
    await send("PUT", "/datasets/ds_decl", {
      teamId: "team_ops",
      name: "Declared",
      type: "upload",
      connectionId: null,
      source: null,
      columns,
    });
    const ok = await send("PUT", "/datasets/ds_decl/rows", "sku,qty\n007,3\n", { "content-type": "text/csv" });
    expect(ok.json).toMatchObject({ rowCount: 1, columns, columnsDeclared: true });
    const wrongType = await send("PUT", "/datasets/ds_decl/rows", "sku,qty\nA,many\n", { "content-type": "text/csv" });
    expect(wrongType.status).toBe(422);
    expect(wrongType.json.error.details).toMatchObject({ line: 2, column: "qty" });
    const extra = await send("PUT", "/datasets/ds_decl/rows", '[{"sku":"A","qty":1,"colour":"red"}]');
    expect(extra.status).toBe(422);
  });

  it("answers 405 naming the area for a change to an area the host supplies read-only", async () => {
    const hostStore = createMemoryStorage();
    const readOnly: IdentityStore = {
      getBusiness: (id) => hostStore.identity.getBusiness(id),
      getTeam: (id) => hostStore.identity.getTeam(id),
      listBusinessTeams: (id) => hostStore.identity.listBusinessTeams(id),
      getUser: (id) => hostStore.identity.getUser(id),
      listMemberships: (id) => hostStore.identity.listMemberships(id),
      listBusinesses: (page) => hostStore.identity.listBusinesses(page),
      listTeams: (page) => hostStore.identity.listTeams(page),
      listUsers: (page) => hostStore.identity.listUsers(page),
    };
    const { api, call } = await setup({
      storage: mountStorage(createMemoryStorage(), { identity: readOnly }),
      adminToken: ADMIN_TOKEN,
    });
    const send = httpAdmin(api);
    const refused = await send("PUT", "/teams/team_ops", {
      name: "Ops",
      plan: "pro",
      businessId: null,
      isPersonal: false,
    });
    expect(refused.status).toBe(405);
    expect(refused.json.error.code).toBe("method_not_allowed");
    expect(refused.json.error.message).toContain("identity area is read-only");
    expect((await send("DELETE", "/users/usr_ada")).status).toBe(405);
    // Other areas stay writable; reads of the host's area still answer.
    expect((await send("GET", "/teams?limit=5")).status).toBe(200);
    expect((await call("GET", "/api/v1/me", { token: TOKENS.sync })).status).toBe(401); // the host's identity has no team_ops
  });
});

describe("refreshing a dataset", () => {
  it("records an upstream failure without the connection's secrets or the URL's query", async () => {
    const { UpstreamUnavailableError } = await import("../../src/ports/connector.js");
    const leaky = {
      isSpatial: () => false,
      async query(): Promise<never> {
        throw new UpstreamUnavailableError(
          "GET https://gis.example.com/q?token=tok_SECRET_42&f=json answered 500 for key tok_SECRET_42",
        );
      },
    };
    const { api, call } = await setup({ adminToken: ADMIN_TOKEN, connectors: { leaky } });
    const send = httpAdmin(api);
    expect(
      (
        await send("PUT", "/connections/conn_leaky", {
          teamId: "team_ops",
          name: "Leaky",
          type: "leaky",
          config: { token: "tok_SECRET_42" },
        })
      ).status,
    ).toBe(201);
    await send("PUT", "/datasets/ds_leaky", {
      teamId: "team_ops",
      name: "Leaky",
      type: "connection",
      connectionId: "conn_leaky",
      source: "q",
    });
    const run = await send("POST", "/datasets/ds_leaky/refresh", {});
    expect(run.status).toBe(200);
    expect(run.json.ok).toBe(false);
    expect(run.json.error).toContain("answered 500");
    expect(run.json.error).not.toContain("tok_SECRET_42");
    const history = await call("GET", "/api/v1/space/refresh-history?teamId=team_ops&days=1", {
      token: TOKENS.sessionAda,
    });
    expect(JSON.stringify(history.json)).not.toContain("tok_SECRET_42");
  });
});

describe("a refresh body", () => {
  it("is checked before anything is read or written: a maxRows that is not a positive integer, or an unknown field, is 422 and the rows stay", async () => {
    const { api, call } = await setup({ adminToken: ADMIN_TOKEN });
    const send = httpAdmin(api);
    await send("PUT", "/connections/conn_cities", {
      teamId: "team_ops",
      name: "Cities",
      type: "memory",
      config: { tables: { cities: [{ city: "Lyon" }, { city: "Oslo" }] } },
    });
    await send("PUT", "/datasets/ds_cities", {
      teamId: "team_ops",
      name: "Cities",
      type: "connection",
      connectionId: "conn_cities",
      source: "cities",
    });
    expect((await send("POST", "/datasets/ds_cities/refresh", {})).json).toMatchObject({ ok: true, rowsProcessed: 2 });
    for (const [body, path] of [
      [{ maxRows: "x" }, "$.maxRows"],
      [{ maxRows: -1 }, "$.maxRows"],
      [{ maxRows: 0.5 }, "$.maxRows"],
      [{ limit: 5 }, "$.limit"],
    ] as const) {
      const refused = await send("POST", "/datasets/ds_cities/refresh", body);
      expect([refused.status, refused.json.error.code, refused.json.error.details]).toEqual([
        422,
        "validation_failed",
        { path },
      ]);
    }
    const rows = await call("GET", "/api/v1/datasets/ds_cities/rows?teamId=team_ops", { token: TOKENS.sessionAda });
    expect(rows.json.data).toEqual([{ city: "Lyon" }, { city: "Oslo" }]);
  });
});

describe("a connection changed through the admin API", () => {
  it("answers its next query from the new config, not from the cache of the old one", async () => {
    const { api, call } = await setup({ adminToken: ADMIN_TOKEN });
    const send = httpAdmin(api);
    const put = (city: string) =>
      send("PUT", "/connections/conn_cities", {
        teamId: "team_ops",
        name: "Cities",
        type: "memory",
        config: { tables: { cities: [{ city }] } },
      });
    await put("Lyon");
    await send("PUT", "/datasets/ds_cities", {
      teamId: "team_ops",
      name: "Cities",
      type: "connection",
      connectionId: "conn_cities",
      source: "cities",
    });
    const query = () => call("GET", "/api/v1/connections/conn_cities/query", { token: TOKENS.sessionAda });
    const first = await query();
    expect(first.json, JSON.stringify(first.json)).toHaveProperty("data");
    expect(first.json.data).toEqual([{ city: "Lyon" }]);
    await put("Oslo");
    expect((await query()).json.data).toEqual([{ city: "Oslo" }]);
  });
});

describe("history batches", () => {
  it("take 10,000 items in one call (beyond the API's 1 MiB body limit) and refuse 10,001", async () => {
    const { api, call } = await setup({ adminToken: ADMIN_TOKEN });
    const send = httpAdmin(api);
    await send("PUT", "/dashboards/dash_busy/versions/1", {
      teamId: "team_ops",
      name: "Busy",
      description: null,
      published: true,
      publishedAt: null,
      datasetIds: [],
    });
    const view = (i: number) => ({
      dashboardId: "dash_busy",
      at: "2026-11-01T08:00:00Z",
      visitorId: `visitor_${i}_with_a_longer_id`,
      userId: null,
      editor: false,
    });
    const views = Array.from({ length: 10_000 }, (_, i) => view(i));
    expect(JSON.stringify(views).length).toBeGreaterThan(1024 * 1024);
    expect(await send("POST", "/dashboard-views", views)).toEqual({ status: 201, json: { stored: 10_000 } });
    const counted = await call("GET", "/api/v1/dashboards/dash_busy/views?teamId=team_ops&days=1", {
      token: TOKENS.sessionAda,
    });
    expect(counted.json.series.at(-1)).toMatchObject({ day: "2026-11-01", views: 10_000 });
    const tooMany = await send("POST", "/dashboard-views", [...views, view(10_000)]);
    expect(tooMany.status).toBe(422);
    expect(tooMany.json.error.code).toBe("validation_failed");
  });
});
