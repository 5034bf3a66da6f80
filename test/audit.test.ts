import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { createAdmin } from "../src/admin/index.js";
import { encodeCursor } from "../src/domain/cursor.js";
import { sha256Hex } from "../src/domain/crypto.js";
import type { AuditCategory, AuditEvent, DashboardRecord } from "../src/domain/model.js";
import { ocsfApiActivitySchema } from "../src/domain/ocsf.js";
import { createMemoryStorage } from "../src/memory/memory-storage.js";
import { auditFixture, event } from "../src/testing/conformance/audit.js";
import { NOW, setup } from "./support/api.js";
import { TOKENS } from "./support/fixture.js";

const CY_KEY = "dp_test_cy_business_nonadmin_0";
const DEE_SESSION = "sess_dee_0001";
const LAG_MS = 5000;

/** The audit conformance fixture plus a non-admin on the Business team with a key and a session. */
function fixture(extra: { auditEvents?: AuditEvent[] } = {}) {
  const base = auditFixture();
  return {
    ...base,
    users: [
      ...base.users,
      {
        id: "usr_cy",
        email: "cy@northwind.test",
        name: "Cy",
        businessAdmin: false,
        memberships: [{ teamId: "team_ops", role: "admin" }],
      },
    ],
    sessions: [...base.sessions, { token: DEE_SESSION, userId: "usr_cy" }],
    apiKeys: [
      ...base.apiKeys,
      {
        id: "key_cy",
        name: "Cy's SIEM",
        teamId: "team_ops",
        token: CY_KEY,
        createdBy: "usr_cy",
        scopes: ["audit:read"],
        allowlist: { datasets: [], connections: [], tables: [] },
        createdAt: "2026-10-01T09:00:00Z",
        revokedAt: null,
      },
    ],
    auditEvents: extra.auditEvents ?? base.auditEvents,
  };
}

async function audit(options: Parameters<typeof setup>[0] = {}) {
  const storage = createMemoryStorage();
  const env = await setup({ fixture: fixture(), ...options, storage });
  const admin = createAdmin(env.api);
  async function feed(params: Record<string, string | string[]> = {}, token: string = TOKENS.sync) {
    const search = new URLSearchParams();
    for (const [key, value] of Object.entries(params)) for (const v of [value].flat()) search.append(key, v);
    const query = search.toString();
    return env.call("GET", `/api/v1/audit${query ? `?${query}` : ""}`, { token });
  }
  /** Poll until hasMore is false, as a SIEM does; returns the raw events and the last cursor. */
  async function drain(params: Record<string, string | string[]> = {}, cursor?: string) {
    const events: AuditEvent[] = [];
    for (let i = 0; i < 1000; i++) {
      const res = await feed({ format: "raw", ...params, ...(cursor ? { cursor } : {}) });
      expect(res.status).toBe(200);
      events.push(...res.json.events);
      cursor = res.json.cursor as string;
      if (!res.json.hasMore) return { events, cursor };
    }
    throw new Error("hasMore never became false");
  }
  const record = (e: Partial<AuditEvent> & { teamId: string }) =>
    admin.recordAuditEvent({
      category: "audit",
      action: "dashboard.updated",
      actor: { type: "user", id: "usr_ada", email: "ada@northwind.test" },
      target: { type: "dashboard", id: "dash_1" },
      outcome: "success",
      ip: null,
      userAgent: null,
      ...e,
    });
  return { ...env, storage, admin, feed, drain, record };
}

const idsOf = (events: Array<{ id: string }>) => events.map((e) => e.id);

describe("GET /audit: the page", () => {
  it("returns the business's audit events as OCSF with a cursor, hasMore and lagSeconds", async () => {
    const { feed } = await audit();
    const res = await feed();
    expect(res.status).toBe(200);
    expect(Object.keys(res.json).sort()).toEqual(["cursor", "events", "hasMore", "lagSeconds"]);
    // team_ops and team_mkt are biz_1; evt_f2 belongs to another business; evt_f3 is data_access.
    expect(res.json.events.map((e: { metadata: { uid: string } }) => e.metadata.uid)).toEqual(["evt_f1"]);
    expect(res.json.hasMore).toBe(false);
    expect(res.json.lagSeconds).toBe(5);
    expect(res.json.cursor).toMatch(/^[A-Za-z0-9_-]+\.[0-9a-f]{16}$/);
  });

  it("maps to OCSF 6003 with specific values and keeps the raw event under unmapped", async () => {
    const { feed } = await audit();
    const [mapped] = (await feed()).json.events;
    expect(mapped).toEqual({
      class_uid: 6003,
      class_name: "API Activity",
      category_uid: 6,
      category_name: "Application Activity",
      activity_id: 3,
      activity_name: "Update",
      type_uid: 600303,
      type_name: "API Activity: Update",
      time: Date.parse("2026-10-01T09:00:00Z"),
      severity_id: 1,
      severity: "Informational",
      status_id: 1,
      status: "Success",
      message: "dashboard.published",
      actor: {
        app_name: "Dataport",
        user: {
          uid: "usr_ada",
          email_addr: "ada@northwind.test",
          name: "ada@northwind.test",
          type_id: 1,
          type: "User",
        },
      },
      api: { operation: "dashboard.published", service: { name: "Dataport" } },
      src_endpoint: { ip: "203.0.113.7" },
      http_request: { user_agent: "Mozilla/5.0" },
      resources: [{ uid: "dash_1", type: "dashboard" }],
      metadata: {
        version: "1.3.0",
        product: { name: "Dataport", vendor_name: "Dataport" },
        uid: "evt_f1",
        original_time: "2026-10-01T09:00:00Z",
        // Seeded (stored at 0): logged when its writer logged it.
        logged_time: Date.parse("2026-10-01T09:00:00Z"),
        tenant_uid: "team_ops",
      },
      unmapped: auditFixture().auditEvents[0],
    });
  });

  it("format=raw returns the stored shape", async () => {
    const { feed } = await audit();
    const res = await feed({ format: "raw", category: "data_access" });
    expect(res.json.events).toEqual([auditFixture().auditEvents[0], auditFixture().auditEvents[2]]);
  });

  it("category adds to audit, repeated or comma-separated", async () => {
    const { feed, record, clock } = await audit();
    await record({ teamId: "team_ops", category: "error", action: "dashboard.error", outcome: "failure" });
    clock.advance(LAG_MS);
    const kinds = async (params: Record<string, string | string[]>) =>
      idsOf((await feed({ format: "raw", ...params })).json.events).length;
    expect(await kinds({})).toBe(1);
    expect(await kinds({ category: "error" })).toBe(2);
    expect(await kinds({ category: ["data_access", "error"] })).toBe(3);
    expect(await kinds({ category: "data_access,error" })).toBe(3);
    expect(await kinds({ category: "audit" })).toBe(1);
  });
});

describe("GET /audit: exactly once", () => {
  it("paging with limit=2 from the start collects every event exactly once, in stored order", async () => {
    const { drain, record, clock } = await audit();
    for (let i = 0; i < 7; i++) {
      await record({ teamId: i % 2 ? "team_mkt" : "team_ops", time: `2026-11-01T0${i}:00:00.000Z` });
      clock.advance(10);
    }
    clock.advance(LAG_MS);
    const all = await drain({ limit: "100" });
    expect(all.events).toHaveLength(8);
    const paged = await drain({ limit: "2" });
    expect(idsOf(paged.events)).toEqual(idsOf(all.events));
    expect(new Set(idsOf(paged.events)).size).toBe(8);
  });

  it("delivers a back-dated event stored after the cursor passed its timestamp, once", async () => {
    const { drain, record, clock } = await audit();
    await record({ teamId: "team_ops", id: "evt_new", time: "2026-11-01T11:00:00.000Z" });
    clock.advance(LAG_MS);
    const first = await drain();
    expect(idsOf(first.events)).toEqual(["evt_f1", "evt_new"]);
    await record({ teamId: "team_ops", id: "evt_late", time: "2026-10-01T00:00:00.000Z" });
    clock.advance(LAG_MS);
    const second = await drain({}, first.cursor);
    expect(idsOf(second.events)).toEqual(["evt_late"]);
    const third = await drain({}, second.cursor);
    expect(third.events).toEqual([]);
  });

  it("holds back events younger than lagSeconds (fixed clock)", async () => {
    const { feed, drain, record, clock } = await audit();
    const start = await drain();
    await record({ teamId: "team_ops", id: "evt_young" });
    expect((await feed({ cursor: start.cursor })).json.events).toEqual([]);
    clock.advance(LAG_MS - 1);
    expect((await feed({ cursor: start.cursor })).json.events).toEqual([]);
    clock.advance(1);
    const res = await feed({ cursor: start.cursor, format: "raw" });
    expect(idsOf(res.json.events)).toEqual(["evt_young"]);
  });

  it("uses the configured horizon and reports it", async () => {
    const { feed, record } = await audit({ auditLagSeconds: 0 });
    await record({ teamId: "team_ops", id: "evt_now" });
    const res = await feed({ format: "raw" });
    expect(res.json.lagSeconds).toBe(0);
    expect(idsOf(res.json.events)).toEqual(["evt_f1", "evt_now"]);
  });

  it("an empty page returns the cursor that was sent", async () => {
    const { feed, drain } = await audit();
    const { cursor } = await drain();
    const res = await feed({ cursor });
    expect(res.json).toEqual({ events: [], cursor, hasMore: false, lagSeconds: 5 });
  });

  it("a first read with no events returns a cursor that later continues correctly", async () => {
    const env = await setup({ fixture: fixture({ auditEvents: [] }) });
    const admin = createAdmin(env.api);
    const empty = await env.call("GET", "/api/v1/audit?format=raw", { token: TOKENS.sync });
    expect(empty.json.events).toEqual([]);
    expect(empty.json.hasMore).toBe(false);
    await admin.recordAuditEvent(event("evt_first", "team_ops", "audit", "2020-01-01T00:00:00.000Z"));
    env.clock.advance(LAG_MS);
    const next = await env.call("GET", `/api/v1/audit?format=raw&cursor=${empty.json.cursor}`, { token: TOKENS.sync });
    expect(idsOf(next.json.events)).toEqual(["evt_first"]);
  });

  it("since applies to a first read and keeps applying through its cursor; a since sent with a cursor is ignored", async () => {
    const { feed, record, clock } = await audit();
    await record({ teamId: "team_ops", id: "evt_old", time: "2026-10-15T00:00:00.000Z" });
    await record({ teamId: "team_ops", id: "evt_recent", time: "2026-10-20T00:00:00.000Z" });
    clock.advance(LAG_MS);
    const first = await feed({ format: "raw", since: "2026-10-16T00:00:00+02:00", limit: "1" });
    expect(idsOf(first.json.events)).toEqual(["evt_recent"]);
    await record({ teamId: "team_ops", id: "evt_late_old", time: "2026-10-01T00:00:00.000Z" });
    await record({ teamId: "team_ops", id: "evt_late_new", time: "2026-10-31T00:00:00.000Z" });
    clock.advance(LAG_MS);
    const next = await feed({ format: "raw", cursor: first.json.cursor, since: "2000-01-01" });
    expect(idsOf(next.json.events)).toEqual(["evt_late_new"]);
    const dated = await feed({ format: "raw", since: "2026-10-16" });
    expect(idsOf(dated.json.events)).toEqual(["evt_recent", "evt_late_new"]);
  });

  it("writers and a poller interleaved in any order never lose or repeat an event (model-based)", async () => {
    type Op =
      | { kind: "write"; team: string; category: AuditCategory; backdateMin: number }
      | { kind: "tick"; ms: number }
      | { kind: "poll"; limit: number };
    const op = fc.oneof(
      fc.record({
        kind: fc.constant("write" as const),
        team: fc.constantFrom("team_ops", "team_mkt", "team_other"),
        category: fc.constantFrom<AuditCategory>("audit", "data_access", "error"),
        backdateMin: fc.integer({ min: 0, max: 600 }),
      }),
      fc.record({ kind: fc.constant("tick" as const), ms: fc.integer({ min: 0, max: 8000 }) }),
      fc.record({ kind: fc.constant("poll" as const), limit: fc.integer({ min: 1, max: 4 }) }),
    );
    await fc.assert(
      fc.asyncProperty(fc.array(op, { maxLength: 40 }), fc.boolean(), async (ops: Op[], withErrors) => {
        const { feed, record, clock } = await audit();
        const categories: AuditCategory[] = withErrors ? ["audit", "error"] : ["audit"];
        const expected = ["evt_f1"];
        const delivered: string[] = [];
        let cursor: string | undefined;
        let n = 0;
        const poll = async (limit: number) => {
          const res = await feed({
            format: "raw",
            limit: String(limit),
            category: categories,
            ...(cursor ? { cursor } : {}),
          });
          expect(res.status).toBe(200);
          for (const e of res.json.events as AuditEvent[]) {
            expect(delivered).not.toContain(e.id);
            delivered.push(e.id);
          }
          cursor = res.json.cursor;
          return res.json.hasMore as boolean;
        };
        for (const step of ops) {
          if (step.kind === "write") {
            const id = `evt_m${n++}`;
            await record({
              id,
              teamId: step.team,
              category: step.category,
              time: new Date(clock.now() - step.backdateMin * 60_000).toISOString(),
            });
            if (step.team !== "team_other" && categories.includes(step.category)) expected.push(id);
          } else if (step.kind === "tick") clock.advance(step.ms);
          else await poll(step.limit);
        }
        clock.advance(LAG_MS);
        while (await poll(3));
        expect(delivered).toEqual(expected);
      }),
      { numRuns: 60 },
    );
  });

  it("concurrent writers while a poller reads: every event delivered once", async () => {
    const { feed, record } = await audit({ auditLagSeconds: 0 });
    const delivered: string[] = [];
    let cursor: string | undefined;
    const pollOnce = async () => {
      const res = await feed({ format: "raw", limit: "3", ...(cursor ? { cursor } : {}) });
      delivered.push(...idsOf(res.json.events));
      cursor = res.json.cursor;
      return res.json.hasMore as boolean;
    };
    let writing = true;
    const writers = Promise.all(
      Array.from({ length: 40 }, async (_, i) => {
        await new Promise((resolve) => setTimeout(resolve, i % 7));
        await record({ teamId: i % 2 ? "team_ops" : "team_mkt", id: `evt_c${i}` });
      }),
    ).finally(() => {
      writing = false;
    });
    let polls = 0;
    const poller = (async () => {
      while (writing) {
        await pollOnce();
        polls++;
        // Memory ports resolve in microtasks: yield so the timers of the writers can fire.
        await new Promise((resolve) => setImmediate(resolve));
      }
    })();
    await Promise.all([writers, poller]);
    while (await pollOnce());
    expect(polls).toBeGreaterThan(1);
    expect(delivered).toHaveLength(41);
    expect(new Set(delivered).size).toBe(41);
  });
});

describe("GET /audit: bad input", () => {
  it.each([
    ["limit", "0"],
    ["limit", "1001"],
    ["limit", "ten"],
    ["format", "csv"],
    ["category", "everything"],
    ["category", "audit,"],
    ["since", "yesterday"],
    ["since", "2026-13-01T00:00:00Z"],
    ["cursor", "garbage"],
    ["cursor", "x".repeat(600)],
  ])("%s=%s is 400 invalid_parameter", async (parameter, value) => {
    const { feed } = await audit();
    const res = await feed({ [parameter]: value });
    expect(res.status).toBe(400);
    expect(res.json.error).toMatchObject({ code: "invalid_parameter", details: { parameter } });
  });

  it("refuses a tampered cursor, a cursor of another version and one naming an invalid position", async () => {
    const { feed, drain } = await audit();
    const { cursor } = await drain();
    const [payload, check] = cursor.split(".") as [string, string];
    const edited = Buffer.from(JSON.stringify({ v: 1, p: "2", s: null })).toString("base64url");
    // Well-formed, correctly checksummed cursors whose content is wrong.
    const forged = (content: unknown) => {
      const body = Buffer.from(JSON.stringify(content)).toString("base64url");
      return `${body}.${sha256Hex(`dataport.audit-cursor.v1:${body}`).slice(0, 16)}`;
    };
    expect(forged({ v: 1, p: "1", s: null })).toBe(encodeCursor({ position: "1", since: null }));
    const flipped = check.replace(/.$/, (c) => (c === "0" ? "1" : "0"));
    for (const bad of [
      `${edited}.${check}`,
      `${payload}.${flipped}`,
      payload,
      forged({ v: 2, p: "1", s: null }),
      forged({ v: 1, p: "0", s: null }),
      forged({ v: 1, p: "1", s: "soon" }),
      forged([1]),
    ]) {
      const res = await feed({ cursor: bad });
      expect(res.status).toBe(400);
      expect(res.json.error.details).toEqual({ parameter: "cursor" });
    }
  });
});

describe("GET /audit: who may read", () => {
  it("403 plan_required for a Pro-plan key with audit:read", async () => {
    const { feed } = await audit();
    const res = await feed({}, TOKENS.noAdmin);
    expect(res.status).toBe(403);
    expect(res.json.error.code).toBe("plan_required");
  });

  it("403 forbidden for a Business key created by a non-admin", async () => {
    const { feed } = await audit();
    const res = await feed({}, CY_KEY);
    expect(res.status).toBe(403);
    expect(res.json.error.code).toBe("forbidden");
  });

  it("403 insufficient_scope without audit:read; 404 for another team's id", async () => {
    const { feed } = await audit();
    const scope = await feed({}, TOKENS.readOnly);
    expect(scope.status).toBe(403);
    expect(scope.json.error).toMatchObject({ code: "insufficient_scope", details: { required: "audit:read" } });
    const other = await feed({ teamId: "team_mkt" });
    expect(other.status).toBe(404);
  });

  it("a session needs teamId and membership, and must be a business admin", async () => {
    const { feed } = await audit();
    const missing = await feed({}, TOKENS.sessionAda);
    expect(missing.status).toBe(400);
    expect(missing.json.error.code).toBe("team_required");
    expect((await feed({ teamId: "team_mkt" }, TOKENS.sessionAda)).status).toBe(404);
    const ok = await feed({ teamId: "team_ops", format: "raw" }, TOKENS.sessionAda);
    expect(ok.status).toBe(200);
    expect(idsOf(ok.json.events)).toEqual(["evt_f1"]);
    const notAdmin = await feed({ teamId: "team_ops" }, DEE_SESSION);
    expect(notAdmin.status).toBe(403);
    expect(notAdmin.json.error.code).toBe("forbidden");
    const pro = await feed({ teamId: "team_mkt" }, TOKENS.sessionBob);
    expect(pro.status).toBe(403);
    expect(pro.json.error.code).toBe("plan_required");
  });

  it("polling the feed writes no audit event", async () => {
    const { feed, storage, clock } = await audit();
    const before = storage.state.auditLog.length;
    for (let i = 0; i < 3; i++) {
      expect((await feed({ category: ["data_access", "error"] })).status).toBe(200);
      clock.advance(LAG_MS);
    }
    await feed({ limit: "0" });
    expect(storage.state.auditLog.length).toBe(before);
  });
});

describe("events the library writes", () => {
  it("a dataset row read is a data_access event naming the key, the dataset and the client", async () => {
    const { call, drain, clock } = await audit();
    const start = await drain({ category: "data_access" });
    const rows = await call("GET", "/api/v1/datasets/ds_orders/rows?maxRows=2", {
      token: TOKENS.sync,
      headers: { "user-agent": "curl/8" },
    });
    expect(rows.status).toBe(200);
    clock.advance(LAG_MS);
    const { events } = await drain({ category: "data_access" }, start.cursor);
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({
      teamId: "team_ops",
      category: "data_access",
      action: "dataset.rows.read",
      actor: { type: "api-key", id: "key_sync", name: "Warehouse sync" },
      target: { type: "dataset", id: "ds_orders" },
      outcome: "success",
      ip: "198.51.100.7",
      userAgent: "curl/8",
      details: { offset: 0, returnedRows: 2, requestId: rows.headers.get("x-request-id") },
    });
    expect(events[0]!.time).toBe(NOW);
    // Not in the default (audit) category.
    expect((await drain({}, start.cursor)).events).toEqual([]);
  });

  it("API key creation and revocation are audit events with CRUD activities", async () => {
    const { admin, feed, drain, clock } = await audit();
    const start = await drain();
    const { key } = await admin.createApiKey({
      teamId: "team_ops",
      name: "SIEM",
      createdBy: "usr_ada",
      scopes: ["audit:read"],
    });
    await admin.revokeApiKey(key.id, { userId: "usr_ada" });
    clock.advance(LAG_MS);
    const res = await feed({ cursor: start.cursor });
    expect(
      res.json.events.map((e: { api: { operation: string }; activity_id: number; type_uid: number }) => [
        e.api.operation,
        e.activity_id,
        e.type_uid,
      ]),
    ).toEqual([
      ["api_key.created", 1, 600301],
      ["api_key.revoked", 4, 600304],
    ]);
  });

  it("a dashboard error from the host is an error event, only with category=error", async () => {
    const { admin, storage, drain, clock } = await audit();
    const dashboard: DashboardRecord = {
      id: "dash_sales",
      teamId: "team_mkt",
      name: "Sales",
      description: null,
      versions: [],
      datasetIds: [],
    };
    storage.dashboards.getDashboard = async (id) => (id === dashboard.id ? dashboard : null);
    const start = await drain({ category: "error" });
    await admin.recordDashboardError({
      dashboardId: "dash_sales",
      message: "query timed out",
      userId: "usr_bob",
      at: "2026-11-01T11:59:00.000Z",
    });
    await expect(admin.recordDashboardError({ dashboardId: "nope", message: "x" })).rejects.toMatchObject({
      status: 404,
    });
    clock.advance(LAG_MS);
    const { events } = await drain({ category: "error" }, start.cursor);
    expect(events).toEqual([
      {
        id: expect.stringMatching(/^evt_/),
        teamId: "team_mkt",
        time: "2026-11-01T11:59:00.000Z",
        category: "error",
        action: "dashboard.error",
        actor: { type: "user", id: "usr_bob", email: "bob@northwind.test" },
        target: { type: "dashboard", id: "dash_sales" },
        outcome: "failure",
        ip: null,
        userAgent: null,
        details: { message: "query timed out" },
      },
    ]);
    expect((await drain({}, start.cursor)).events).toEqual([]);
  });

  it("the API's own 5xx is an error event of the credential's team; without a credential none is stored", async () => {
    const { call, storage } = await audit({ logger: () => {} });
    const apiErrors = () => storage.state.auditLog.filter((e) => e.event.action === "api.error").map((e) => e.event);
    storage.catalog.getDataset = async () => {
      throw new Error("disk on fire");
    };
    const failed = await call("GET", "/api/v1/datasets/ds_orders", { token: TOKENS.sync });
    expect(failed.status).toBe(500);
    expect(apiErrors()).toEqual([
      {
        id: expect.stringMatching(/^evt_/),
        teamId: "team_ops",
        time: NOW,
        category: "error",
        action: "api.error",
        actor: { type: "api-key", id: "key_sync", name: "Warehouse sync" },
        target: { type: "route", id: "GET /api/v1/datasets/:id" },
        outcome: "failure",
        ip: "198.51.100.7",
        userAgent: null,
        details: { requestId: failed.headers.get("x-request-id"), status: 500 },
      },
    ]);
    storage.credentials.findApiKeyByHash = storage.credentials.findApiKeyWithTeam = async () => {
      throw new Error("still on fire");
    };
    expect((await call("GET", "/api/v1/datasets/ds_orders", { token: TOKENS.sync })).status).toBe(500);
    expect(apiErrors()).toHaveLength(1);
  });
});

describe("OCSF schema", () => {
  it("every event the feed maps validates against the OCSF zod schema", async () => {
    const { admin, call, feed, record, clock, storage } = await audit();
    storage.dashboards.getDashboard = async (id) => ({
      id,
      teamId: "team_ops",
      name: "D",
      description: null,
      versions: [],
      datasetIds: [],
    });
    await call("GET", "/api/v1/datasets/ds_orders/rows", { token: TOKENS.sync });
    const { key } = await admin.createApiKey({ teamId: "team_ops", name: "k", createdBy: "usr_ada", scopes: [] });
    await admin.revokeApiKey(key.id);
    await admin.recordDashboardError({ dashboardId: "dash_x", message: "boom" });
    await record({ teamId: "team_mkt", actor: null, target: null, ip: null, outcome: "denied", action: "weird" });
    await record({ teamId: "team_ops", actor: { type: "system", id: "cron", name: "nightly" }, time: "not a time" });
    const row = await call("POST", "/api/v1/tables/tbl_targets/rows", {
      token: TOKENS.sync,
      body: { region: "APAC", target: 5 },
    });
    expect(row.status).toBe(201);
    await call("PATCH", `/api/v1/tables/tbl_targets/rows/${row.json._id}`, { token: TOKENS.sync, body: { target: 6 } });
    await call("DELETE", `/api/v1/tables/tbl_targets/rows/${row.json._id}`, { token: TOKENS.sync });
    clock.advance(LAG_MS);
    const res = await feed({ category: ["data_access", "error"] });
    expect(res.json.events.length).toBe(11);
    for (const mapped of res.json.events) {
      const check = ocsfApiActivitySchema.safeParse(mapped);
      expect(check.success, JSON.stringify(check.error?.issues)).toBe(true);
      expect(mapped.type_uid).toBe(600300 + mapped.activity_id);
      expect(Number.isInteger(mapped.time)).toBe(true);
    }
    const byOp = Object.fromEntries(res.json.events.map((e: { api: { operation: string } }) => [e.api.operation, e]));
    expect(["table.row.created", "table.row.updated", "table.row.deleted"].map((op) => byOp[op].type_uid)).toEqual([
      600301, 600303, 600304,
    ]);
    expect(byOp["dataset.rows.read"]).toMatchObject({
      activity_id: 2,
      actor: { user: { uid: "key_sync", type: "API Key" } },
    });
    expect(byOp["dashboard.error"]).toMatchObject({ activity_id: 99, severity_id: 3, status_id: 2 });
    // No client address: no source, rather than an invented one.
    expect(byOp["dashboard.error"]).not.toHaveProperty("src_endpoint");
    expect(byOp["table.row.created"].src_endpoint).toEqual({ ip: "198.51.100.7" });
    for (const mapped of res.json.events) expect(mapped.metadata.logged_time, mapped.api.operation).toBeGreaterThan(0);
    expect(byOp["weird"]).toMatchObject({
      activity_id: 99,
      status_id: 99,
      status_detail: "denied",
      actor: { app_name: "Dataport" },
    });
    expect(byOp["weird"].actor.user).toBeUndefined();
    expect(byOp["api_key.revoked"].actor.user).toMatchObject({ type_id: 3, type: "System" });
    const badTime = res.json.events.find((e: { unmapped: { time: string } }) => e.unmapped.time === "not a time");
    expect(badTime.time).toBe(Date.parse(NOW));
  });

  it("the schema rejects a wrong type_uid, a missing actor and an unpinned version", async () => {
    const { feed } = await audit();
    const [good] = (await feed()).json.events;
    expect(ocsfApiActivitySchema.safeParse(good).success).toBe(true);
    expect(ocsfApiActivitySchema.safeParse({ ...good, type_uid: 600302 }).success).toBe(false);
    const { actor: _actor, ...noActor } = good;
    expect(ocsfApiActivitySchema.safeParse(noActor).success).toBe(false);
    expect(ocsfApiActivitySchema.safeParse({ ...good, metadata: { ...good.metadata, version: "1.0.0" } }).success).toBe(
      false,
    );
    expect(ocsfApiActivitySchema.safeParse({ ...good, time: "2026-10-01T09:00:00Z" }).success).toBe(false);
  });
});
