import { describe, expect, it } from "vitest";
import { activityFixture } from "../src/testing/conformance/activity-fixture.js";
import { NOW, setup } from "./support/api.js";
import { TOKENS } from "./support/fixture.js";

const fixture = activityFixture();
const DAY_MS = 86_400_000;
const utcDay = (at: string | number) => new Date(at).toISOString().slice(0, 10);

/** The N UTC days ending on NOW's day, oldest first. */
function windowDays(days: number): string[] {
  return Array.from({ length: days }, (_, i) => utcDay(Date.parse(NOW) - (days - 1 - i) * DAY_MS));
}

/** Non-editor fixture views of a dashboard on a day. */
function viewsOn(dashboardId: string, day: string) {
  return fixture.dashboardViews.filter((v) => v.dashboardId === dashboardId && !v.editor && utcDay(v.at) === day);
}

function expectedByDay(dashboardId: string, days: number) {
  return windowDays(days).map((day) => {
    const views = viewsOn(dashboardId, day);
    return { day, views: views.length, uniqueVisitors: new Set(views.map((v) => v.visitorId)).size };
  });
}

function expectedByViewer(dashboardId: string, days: number) {
  const email = new Map(fixture.users.map((u) => [u.id, u.email]));
  return windowDays(days).flatMap((day) => {
    const counts = new Map<string | null, number>();
    for (const v of viewsOn(dashboardId, day)) counts.set(v.userId, (counts.get(v.userId) ?? 0) + 1);
    return [...counts]
      .map(([viewerId, views]) => ({
        day,
        viewerId,
        viewer: viewerId === null ? "Anonymous" : email.get(viewerId)!,
        views,
      }))
      .sort((a, b) => (a.viewer < b.viewer ? -1 : a.viewer > b.viewer ? 1 : 0));
  });
}

const sum = (items: Array<{ views: number }>) => items.reduce((n, i) => n + i.views, 0);

describe("GET /dashboards", () => {
  it("lists the key's team's dashboards, current version only, newest first", async () => {
    const { call } = await setup({ fixture, viewUrl: "https://view.example.com/" });
    const res = await call("GET", "/api/v1/dashboards", { token: TOKENS.readOnly });
    expect(res.status).toBe(200);
    expect(res.json).toEqual({
      dashboards: [
        {
          id: "dash_draft",
          name: "Draft ideas",
          description: null,
          published: false,
          publishedUrl: null,
          version: 2,
          createdAt: "2026-10-20T08:00:00Z",
          updatedAt: "2026-10-21T08:00:00Z",
          publishedAt: null,
        },
        {
          id: "dash_sales",
          name: "Sales overview",
          description: "Revenue by region",
          published: true,
          publishedUrl: "https://view.example.com/d/dash_sales",
          version: 2,
          createdAt: "2026-10-01T09:00:00Z",
          updatedAt: "2026-10-05T09:00:00Z",
          publishedAt: "2026-10-05T09:30:00Z",
        },
      ],
    });
  });

  it("builds publishedUrl on the app URL when no view URL is set", async () => {
    const { call } = await setup({ fixture, appUrl: "https://bi.example.com" });
    const res = await call("GET", "/api/v1/dashboards", { token: TOKENS.sync });
    expect(res.json.dashboards.map((d: { publishedUrl: string | null }) => d.publishedUrl)).toEqual([
      null,
      "https://bi.example.com/d/dash_sales",
    ]);
  });

  it("takes teamId for a session: required, membership-checked, Free plan refused", async () => {
    const { call } = await setup({ fixture });
    const ada = await call("GET", "/api/v1/dashboards?teamId=team_ops", { token: TOKENS.sessionAda });
    expect(ada.status).toBe(200);
    expect(ada.json.dashboards.map((d: { id: string }) => d.id)).toEqual(["dash_draft", "dash_sales"]);
    const bob = await call("GET", "/api/v1/dashboards?teamId=team_mkt", { token: TOKENS.sessionBob });
    expect(bob.json.dashboards.map((d: { id: string }) => d.id)).toEqual(["dash_campaigns"]);

    const missing = await call("GET", "/api/v1/dashboards", { token: TOKENS.sessionAda });
    expect(missing.status).toBe(400);
    expect(missing.json.error.code).toBe("team_required");
    const outsider = await call("GET", "/api/v1/dashboards?teamId=team_ops", { token: TOKENS.sessionBob });
    expect(outsider.status).toBe(404);
    expect(outsider.json.error.code).toBe("not_found");
    const free = await call("GET", "/api/v1/dashboards?teamId=team_free", { token: TOKENS.sessionAda });
    expect(free.status).toBe(403);
    expect(free.json.error.code).toBe("plan_required");
  });

  it("refuses a key without dashboards:read and a key naming another team", async () => {
    const { call } = await setup({ fixture });
    const noScope = await call("GET", "/api/v1/dashboards", { token: TOKENS.noAdmin });
    expect(noScope.status).toBe(403);
    expect(noScope.json.error).toMatchObject({ code: "insufficient_scope", details: { required: "dashboards:read" } });
    const otherTeam = await call("GET", "/api/v1/dashboards?teamId=team_mkt", { token: TOKENS.sync });
    expect(otherTeam.status).toBe(404);
  });
});

describe("GET /dashboards/{id}/views", () => {
  it("by day (default 30 days): every day of the window oldest first, zeros included, editors excluded", async () => {
    const { call } = await setup({ fixture });
    const res = await call("GET", "/api/v1/dashboards/dash_sales/views", { token: TOKENS.readOnly });
    expect(res.status).toBe(200);
    const series = expectedByDay("dash_sales", 30);
    expect(series[0]).toEqual({ day: "2026-10-03", views: 1, uniqueVisitors: 1 });
    expect(series.at(-1)!.day).toBe("2026-11-01");
    expect(res.json).toEqual({
      dashboardId: "dash_sales",
      name: "Sales overview",
      days: 30,
      totals: { views: sum(series), uniqueVisitorsByDay: series.reduce((n, d) => n + d.uniqueVisitors, 0) },
      series,
    });
    expect(res.json.by).toBeUndefined();
  });

  it("sums daily uniques: a visitor returning on three days counts three times", async () => {
    const { call } = await setup({ fixture });
    const res = await call("GET", "/api/v1/dashboards/dash_sales/views?days=3", { token: TOKENS.sync });
    const returning = fixture.dashboardViews.filter(
      (v) => v.visitorId === "vis_a" && windowDays(3).includes(utcDay(v.at)),
    );
    expect(new Set(returning.map((v) => utcDay(v.at))).size).toBe(3);
    const series = expectedByDay("dash_sales", 3);
    const distinctOverWindow = new Set(
      fixture.dashboardViews
        .filter((v) => v.dashboardId === "dash_sales" && !v.editor && windowDays(3).includes(utcDay(v.at)))
        .map((v) => v.visitorId),
    ).size;
    expect(res.json.series).toEqual(series);
    expect(res.json.totals.uniqueVisitorsByDay).toBe(series.reduce((n, d) => n + d.uniqueVisitors, 0));
    expect(res.json.totals.uniqueVisitorsByDay).toBeGreaterThan(distinctOverWindow);
    // An editor session and a view written with a UTC offset (2026-10-31T22:30-03:00 is 2026-11-01 UTC).
    expect(res.json.series.at(-1)).toEqual({ day: "2026-11-01", views: 5, uniqueVisitors: 4 });
  });

  it("windows on UTC days ending today: days=1 is today alone, days=31 reaches 2026-10-02", async () => {
    const { call } = await setup({ fixture });
    const one = await call("GET", "/api/v1/dashboards/dash_sales/views?days=1", { token: TOKENS.sync });
    expect(one.json.series).toEqual(expectedByDay("dash_sales", 1));
    expect(one.json.series.map((d: { day: string }) => d.day)).toEqual(["2026-11-01"]);
    const thirtyOne = await call("GET", "/api/v1/dashboards/dash_sales/views?days=31", { token: TOKENS.sync });
    expect(thirtyOne.json.series[0]).toEqual({ day: "2026-10-02", views: 1, uniqueVisitors: 1 });
    const year = await call("GET", "/api/v1/dashboards/dash_sales/views?days=365", { token: TOKENS.sync });
    expect(year.json.series).toHaveLength(365);
    expect(year.json.totals.views).toBe(
      fixture.dashboardViews.filter((v) => v.dashboardId === "dash_sales" && !v.editor).length,
    );
  });

  it("by viewer: signed-in users by address, public-link viewers one Anonymous row per day", async () => {
    const { call } = await setup({ fixture });
    const res = await call("GET", "/api/v1/dashboards/dash_sales/views?by=viewer&days=3", { token: TOKENS.sync });
    expect(res.status).toBe(200);
    const series = expectedByViewer("dash_sales", 3);
    expect(series).toContainEqual({ day: "2026-11-01", viewerId: null, viewer: "Anonymous", views: 3 });
    expect(res.json).toEqual({
      dashboardId: "dash_sales",
      name: "Sales overview",
      days: 3,
      by: "viewer",
      totals: {
        views: sum(series),
        uniqueVisitorsByDay: expectedByDay("dash_sales", 3).reduce((n, d) => n + d.uniqueVisitors, 0),
      },
      series,
    });
  });

  it("never serves raw analytics: no visitor ids or addresses", async () => {
    const { call } = await setup({ fixture });
    for (const by of ["day", "viewer"]) {
      const res = await call("GET", `/api/v1/dashboards/dash_sales/views?by=${by}&days=365`, { token: TOKENS.sync });
      expect(res.text).not.toMatch(/vis_/);
    }
  });

  it("answers the same 404 for an unknown dashboard and one outside the boundary", async () => {
    const { call } = await setup({ fixture });
    const cases = [
      await call("GET", "/api/v1/dashboards/dash_nope/views", { token: TOKENS.sync }),
      await call("GET", "/api/v1/dashboards/dash_campaigns/views", { token: TOKENS.sync }),
      await call("GET", "/api/v1/dashboards/dash_sales/views", { token: TOKENS.sessionBob }),
    ];
    for (const res of cases) {
      expect(res.status).toBe(404);
      const { requestId, ...rest } = res.json.error;
      expect(rest).toEqual({ code: "not_found", message: "dashboard not found" });
      expect(requestId).toBe(res.headers.get("x-request-id"));
    }
    const bob = await call("GET", "/api/v1/dashboards/dash_campaigns/views?days=7", { token: TOKENS.sessionBob });
    expect(bob.status).toBe(200);
    expect(bob.json.totals).toEqual({ views: 1, uniqueVisitorsByDay: 1 });
  });

  it("refuses bad days and by with 400 invalid_parameter naming the parameter", async () => {
    const { call } = await setup({ fixture });
    const cases: Array<[string, string]> = [
      ["days=0", "days"],
      ["days=366", "days"],
      ["days=abc", "days"],
      ["days=-1", "days"],
      ["days=1.5", "days"],
      ["days=1&days=2", "days"],
      ["by=week", "by"],
      ["by=", "by"],
    ];
    for (const [query, parameter] of cases) {
      const res = await call("GET", `/api/v1/dashboards/dash_sales/views?${query}`, { token: TOKENS.sync });
      expect(res.status, query).toBe(400);
      expect(res.json.error.code).toBe("invalid_parameter");
      expect(res.json.error.details.parameter).toBe(parameter);
    }
  });
});
