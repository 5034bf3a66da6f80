import { describe, expect, it } from "vitest";
import { activityFixture } from "../src/testing/conformance/activity-fixture.js";
import { NOW, setup } from "./support/api.js";
import { TOKENS } from "./support/fixture.js";

const fixture = activityFixture();
const DAY_MS = 86_400_000;
const utcDay = (at: string | number) => new Date(at).toISOString().slice(0, 10);
const inLast = (days: number, at: string) =>
  utcDay(at) >= utcDay(Date.parse(NOW) - (days - 1) * DAY_MS) && utcDay(at) <= utcDay(NOW);
const byText = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

/** Group items by a key, in first-seen order. */
function groups<T>(items: T[], key: (item: T) => string): T[][] {
  const map = new Map<string, T[]>();
  for (const item of items) map.set(key(item), [...(map.get(key(item)) ?? []), item]);
  return [...map.values()];
}

function expectedRefreshHistory(teamId: string, days: number) {
  const datasets = new Map(
    [...fixture.datasets, ...fixture.tables.map((t) => ({ ...t, connectionId: null }))]
      .filter((d) => d.teamId === teamId)
      .map((d) => [d.id, d]),
  );
  const runs = fixture.refreshRuns.filter((r) => datasets.has(r.datasetId) && inLast(days, r.startedAt));
  return groups(runs, (r) => `${r.datasetId} ${utcDay(r.startedAt)}`)
    .map((group) => {
      const dataset = datasets.get(group[0]!.datasetId)!;
      const failed = group
        .filter((r) => r.error !== null)
        .sort((a, b) => Date.parse(a.startedAt) - Date.parse(b.startedAt));
      return {
        dataset_id: dataset.id,
        dataset: dataset.name,
        connection: fixture.connections.find((c) => c.id === dataset.connectionId)?.name ?? null,
        day: utcDay(group[0]!.startedAt),
        runs: group.length,
        failures: failed.length,
        rows_processed: group.reduce((n, r) => n + r.rowsProcessed, 0),
        avg_duration_ms: Math.round(group.reduce((n, r) => n + r.durationMs, 0) / group.length),
        last_error: failed.at(-1)?.error ?? null,
      };
    })
    .sort((a, b) => byText(b.day, a.day) || byText(a.dataset, b.dataset));
}

function expectedDashboardUsage(teamId: string, days: number) {
  const dashboards = new Map(fixture.dashboards.filter((d) => d.teamId === teamId).map((d) => [d.id, d]));
  const views = fixture.dashboardViews.filter((v) => dashboards.has(v.dashboardId) && !v.editor && inLast(days, v.at));
  return groups(views, (v) => `${v.dashboardId} ${utcDay(v.at)}`)
    .map((group) => {
      const dashboard = dashboards.get(group[0]!.dashboardId)!;
      const current = [...dashboard.versions].sort((a, b) => b.version - a.version)[0]!;
      return {
        day: utcDay(group[0]!.at),
        dashboard_id: dashboard.id,
        dashboard: dashboard.name,
        published: current.published,
        views: group.length,
        unique_visitors: new Set(group.map((v) => v.visitorId)).size,
        signed_in_viewers: new Set(group.filter((v) => v.userId !== null).map((v) => v.userId)).size,
        anonymous_views: group.filter((v) => v.userId === null).length,
      };
    })
    .sort((a, b) => byText(b.day, a.day) || byText(a.dashboard, b.dashboard));
}

function expectedCreditUsage(teamId: string, days: number) {
  const uses = fixture.creditUsage.filter((c) => c.teamId === teamId && inLast(days, c.at));
  return groups(uses, (c) => `${c.category} ${utcDay(c.at)}`)
    .map((group) => ({
      day: utcDay(group[0]!.at),
      category: group[0]!.category,
      credits: group.reduce((n, c) => n + c.credits, 0),
      uses: group.length,
      users: new Set(group.filter((c) => c.userId !== null).map((c) => c.userId)).size,
    }))
    .sort((a, b) => byText(b.day, a.day) || byText(a.category, b.category));
}

const names = (res: { json: { columns: Array<{ name: string }> } }) => res.json.columns.map((c) => c.name);

describe("GET /space/{object}", () => {
  it("serves refresh-history with exactly the spec's fields, failing runs counted, default 90 days", async () => {
    const { call } = await setup({ fixture });
    // A member's session sees the whole team (an API key sees only its allowlist: test/hostile).
    const res = await call("GET", "/api/v1/space/refresh-history?teamId=team_ops", { token: TOKENS.sessionAda });
    expect(res.status).toBe(200);
    expect(res.json.object).toBe("refresh-history");
    expect(res.json.days).toBe(90);
    expect(res.json.columns).toEqual([
      { name: "dataset_id", type: "string" },
      { name: "dataset", type: "string" },
      { name: "connection", type: "string" },
      { name: "day", type: "date" },
      { name: "runs", type: "number" },
      { name: "failures", type: "number" },
      { name: "rows_processed", type: "number" },
      { name: "avg_duration_ms", type: "number" },
      { name: "last_error", type: "string" },
    ]);
    const expected = expectedRefreshHistory("team_ops", 90);
    expect(expected.map((r) => [r.day, r.failures, r.last_error])).toEqual([
      ["2026-11-01", 0, null],
      ["2026-10-31", 2, "permission denied"],
      ["2026-10-20", 1, "bad csv"],
    ]);
    expect(res.json.rows).toEqual(expected);
    for (const row of res.json.rows) expect(Object.keys(row)).toEqual(names(res));
    const year = await call("GET", "/api/v1/space/refresh-history?teamId=team_ops&days=365", {
      token: TOKENS.sessionAda,
    });
    expect(year.json.rows).toEqual(expectedRefreshHistory("team_ops", 365));
    expect(year.json.rows).toHaveLength(4);
  });

  it("serves dashboard-usage per dashboard per day, editor sessions excluded", async () => {
    const { call } = await setup({ fixture });
    for (const days of [2, 30, 365]) {
      const res = await call("GET", `/api/v1/space/dashboard-usage?days=${days}`, { token: TOKENS.sync });
      expect(res.status).toBe(200);
      expect(names(res)).toEqual([
        "day",
        "dashboard_id",
        "dashboard",
        "published",
        "views",
        "unique_visitors",
        "signed_in_viewers",
        "anonymous_views",
      ]);
      expect(res.json.rows).toEqual(expectedDashboardUsage("team_ops", days));
    }
    const bob = await call("GET", "/api/v1/space/dashboard-usage?teamId=team_mkt&days=7", { token: TOKENS.sessionBob });
    expect(bob.json.rows).toEqual([
      {
        day: "2026-10-31",
        dashboard_id: "dash_campaigns",
        dashboard: "Campaign board",
        published: true,
        views: 1,
        unique_visitors: 1,
        signed_in_viewers: 1,
        anonymous_views: 0,
      },
    ]);
  });

  it("serves credit-usage per category per day with numeric credits", async () => {
    const { call } = await setup({ fixture });
    const res = await call("GET", "/api/v1/space/credit-usage?teamId=team_ops", { token: TOKENS.sessionAda });
    expect(res.status).toBe(200);
    expect(res.json.columns).toEqual([
      { name: "day", type: "date" },
      { name: "category", type: "string" },
      { name: "credits", type: "number" },
      { name: "uses", type: "number" },
      { name: "users", type: "number" },
    ]);
    const expected = expectedCreditUsage("team_ops", 90);
    expect(expected[0]).toEqual({ day: "2026-11-01", category: "ai_query", credits: 4.5, uses: 2, users: 2 });
    expect(res.json.rows).toEqual(expected);
    const year = await call("GET", "/api/v1/space/credit-usage?teamId=team_ops&days=365", { token: TOKENS.sessionAda });
    expect(year.json.rows).toEqual(expectedCreditUsage("team_ops", 365));
    expect(year.json.rows.length).toBe(expected.length + 1);
  });

  it("serves api-usage from the API's own log: calls made with the fixture's keys, by route template", async () => {
    const { call } = await setup({ fixture });
    await call("GET", "/api/v1/datasets/ds_orders/rows", { token: TOKENS.sync });
    await call("GET", "/api/v1/datasets/ds_orders/rows?maxRows=1", { token: TOKENS.sync });
    await call("GET", "/api/v1/datasets/ds_nope/rows", { token: TOKENS.sync });
    await call("GET", "/api/v1/datasets/ds_secret/rows", { token: TOKENS.sync });
    await call("GET", "/api/v1/datasets", { token: TOKENS.readOnly }); // 403: no data:read
    await call("GET", "/api/v1/dashboards?teamId=team_ops", { token: TOKENS.sessionAda });
    await call("GET", "/api/v1/dashboards?teamId=team_free", { token: TOKENS.sessionAda }); // counted for team_free
    await call("GET", "/api/v1/datasets", { token: TOKENS.noAdmin }); // team_mkt
    await call("GET", "/api/v1/me"); // unauthenticated: no team

    const res = await call("GET", "/api/v1/space/api-usage?days=1", { token: TOKENS.sync });
    expect(res.status).toBe(200);
    expect(names(res)).toEqual([
      "day",
      "method",
      "route",
      "credential_kind",
      "credential_id",
      "credential",
      "calls",
      "errors",
      "server_errors",
      "avg_latency_ms",
    ]);
    const latency = expect.any(Number);
    const row = { day: "2026-11-01", method: "GET", server_errors: 0, avg_latency_ms: latency };
    expect(res.json.rows).toEqual([
      {
        ...row,
        route: "/api/v1/dashboards",
        credential_kind: "session-token",
        credential_id: "usr_ada",
        credential: "ada@northwind.test",
        calls: 1,
        errors: 0,
      },
      {
        ...row,
        route: "/api/v1/datasets",
        credential_kind: "api-key",
        credential_id: "key_ro",
        credential: "Read only",
        calls: 1,
        errors: 1,
      },
      {
        ...row,
        route: "/api/v1/datasets/:id/rows",
        credential_kind: "api-key",
        credential_id: "key_sync",
        credential: "Warehouse sync",
        calls: 4,
        errors: 2,
      },
    ]);

    // The read itself is logged, under its template.
    const again = await call("GET", "/api/v1/space/api-usage?days=1", { token: TOKENS.sync });
    expect(again.json.rows).toContainEqual({
      ...row,
      route: "/api/v1/space/:object",
      credential_kind: "api-key",
      credential_id: "key_sync",
      credential: "Warehouse sync",
      calls: 1,
      errors: 0,
    });
    expect(again.text).not.toContain("ds_orders");
  });

  it("windows api-usage on the clock's days", async () => {
    const { call, clock } = await setup({ fixture });
    clock.set("2026-10-20T10:00:00Z");
    await call("GET", "/api/v1/me", { token: TOKENS.sync });
    clock.set(NOW);
    const week = await call("GET", "/api/v1/space/api-usage?days=7", { token: TOKENS.sync });
    expect(week.json.rows).toEqual([]);
    const month = await call("GET", "/api/v1/space/api-usage?days=30", { token: TOKENS.sync });
    expect(month.json.rows.map((r: { day: string; route: string }) => [r.day, r.route])).toEqual([
      ["2026-11-01", "/api/v1/space/:object"], // the days=7 read above
      ["2026-10-20", "/api/v1/me"],
    ]);
    expect(month.json.rows[1]).toEqual({
      day: "2026-10-20",
      method: "GET",
      route: "/api/v1/me",
      credential_kind: "api-key",
      credential_id: "key_sync",
      credential: "Warehouse sync",
      calls: 1,
      errors: 0,
      server_errors: 0,
      avg_latency_ms: expect.any(Number),
    });
  });

  it("serves dataset-usage as current state: size, freshness, dashboards and API reads; days does not apply", async () => {
    const { call } = await setup({ fixture });
    await call("GET", "/api/v1/datasets/ds_orders/rows", { token: TOKENS.sync });
    await call("GET", "/api/v1/datasets/ds_orders/rows?maxRows=2", { token: TOKENS.sync });
    await call("GET", "/api/v1/datasets/ds_orders", { token: TOKENS.sync }); // metadata, not a read of rows
    await call("GET", "/api/v1/datasets/ds_secret/rows", { token: TOKENS.sync }); // 404, not a read
    const res = await call("GET", "/api/v1/space/dataset-usage?teamId=team_ops", { token: TOKENS.sessionAda });
    expect(res.status).toBe(200);
    expect(res.json.days).toBe(90);
    expect(res.json.columns).toEqual([
      { name: "dataset_id", type: "string" },
      { name: "dataset", type: "string" },
      { name: "type", type: "string" },
      { name: "connection", type: "string" },
      { name: "row_count", type: "number" },
      { name: "column_count", type: "number" },
      { name: "last_refreshed_at", type: "datetime" },
      { name: "updated_at", type: "datetime" },
      { name: "last_refresh_error", type: "string" },
      { name: "dashboards", type: "json" },
      { name: "api_reads", type: "number" },
      { name: "last_api_read_at", type: "datetime" },
    ]);
    const readers = (id: string) =>
      fixture.dashboards
        .filter((d) => d.teamId === "team_ops" && d.datasetIds.includes(id))
        .map((d) => d.name)
        .sort(byText);
    expect(res.json.rows).toEqual([
      {
        dataset_id: "ds_orders",
        dataset: "Orders 2026",
        type: "upload",
        connection: null,
        row_count: 5,
        column_count: 3,
        last_refreshed_at: null,
        updated_at: "2026-10-02T10:00:00Z",
        last_refresh_error: "bad csv",
        dashboards: readers("ds_orders"),
        api_reads: 2,
        last_api_read_at: NOW,
      },
      {
        dataset_id: "ds_secret",
        dataset: "Payroll",
        type: "upload",
        connection: null,
        row_count: 1,
        column_count: 1,
        last_refreshed_at: null,
        updated_at: "2026-10-02T10:00:00Z",
        last_refresh_error: null,
        dashboards: [],
        api_reads: 0,
        last_api_read_at: null,
      },
      {
        dataset_id: "tbl_targets",
        dataset: "Quarterly targets",
        type: "input_table",
        connection: null,
        row_count: 1,
        column_count: 2,
        last_refreshed_at: null,
        updated_at: "2026-10-01T00:00:00Z",
        last_refresh_error: null,
        dashboards: [],
        api_reads: 0,
        last_api_read_at: null,
      },
      {
        dataset_id: "ds_stores",
        dataset: "Stores",
        type: "connection",
        connection: "Retail warehouse",
        row_count: 1,
        column_count: 2,
        last_refreshed_at: "2026-10-03T00:00:00Z",
        updated_at: "2026-10-03T00:00:00Z",
        last_refresh_error: null,
        dashboards: readers("ds_stores"),
        api_reads: 0,
        last_api_read_at: null,
      },
    ]);
    expect(readers("ds_orders")).toEqual(["Draft ideas", "Sales overview"]);
    const oneDay = await call("GET", "/api/v1/space/dataset-usage?teamId=team_ops&days=1", {
      token: TOKENS.sessionAda,
    });
    expect(oneDay.json.days).toBe(1);
    expect(oneDay.json.rows).toEqual(res.json.rows);
  });

  it("keeps each team's activity to itself", async () => {
    const { call } = await setup({ fixture });
    const res = await call("GET", "/api/v1/space/refresh-history?teamId=team_mkt", { token: TOKENS.sessionBob });
    expect(res.json.rows).toEqual(expectedRefreshHistory("team_mkt", 90));
    expect(res.json.rows.map((r: { dataset_id: string }) => r.dataset_id)).toEqual(["ds_campaigns"]);
    const datasets = await call("GET", "/api/v1/space/dataset-usage?teamId=team_mkt", { token: TOKENS.sessionBob });
    expect(datasets.json.rows.map((r: { dataset_id: string }) => r.dataset_id)).toEqual(["ds_campaigns"]);
  });

  it("refuses bad input: days out of range or malformed 400, unknown object 404", async () => {
    const { call } = await setup({ fixture });
    for (const days of ["0", "366", "abc", "", "9e1"]) {
      const res = await call("GET", `/api/v1/space/refresh-history?days=${days}`, { token: TOKENS.sync });
      expect(res.status, days).toBe(400);
      expect(res.json.error).toMatchObject({ code: "invalid_parameter", details: { parameter: "days" } });
    }
    for (const object of ["nope", "__proto__", "toString", "refresh_history"]) {
      const res = await call("GET", `/api/v1/space/${object}`, { token: TOKENS.sync });
      expect(res.status, object).toBe(404);
      expect(res.json.error.code).toBe("not_found");
    }
  });

  it("applies the teamId and scope rules", async () => {
    const { call } = await setup({ fixture });
    const missing = await call("GET", "/api/v1/space/api-usage", { token: TOKENS.sessionAda });
    expect(missing.status).toBe(400);
    expect(missing.json.error.code).toBe("team_required");
    expect((await call("GET", "/api/v1/space/api-usage?teamId=team_ops", { token: TOKENS.sessionBob })).status).toBe(
      404,
    );
    expect(
      (await call("GET", "/api/v1/space/api-usage?teamId=team_free", { token: TOKENS.sessionAda })).json.error.code,
    ).toBe("plan_required");
    expect((await call("GET", "/api/v1/space/api-usage?teamId=team_mkt", { token: TOKENS.sync })).status).toBe(404);
    const noScope = await call("GET", "/api/v1/space/api-usage", { token: TOKENS.noAdmin });
    expect(noScope.status).toBe(403);
    expect(noScope.json.error.code).toBe("insufficient_scope");
  });
});
