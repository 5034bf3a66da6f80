import { conformanceFixture } from "./fixture.js";

/**
 * The base fixture plus dashboards, page views, refresh runs and credit
 * usage (the space's activity), for the dashboards and usage conformance
 * suites and the handler tests. Times are around the tests' clock,
 * 2026-11-01T12:00:00Z.
 */
export function activityFixture() {
  const base = conformanceFixture();
  return {
    ...base,
    dashboards: [
      {
        id: "dash_sales",
        teamId: "team_ops",
        name: "Sales overview",
        description: "Revenue by region",
        versions: [
          {
            version: 1,
            published: true,
            createdAt: "2026-09-01T10:00:00Z",
            updatedAt: "2026-09-01T10:00:00Z",
            publishedAt: "2026-09-01T11:00:00Z",
          },
          {
            version: 2,
            published: true,
            createdAt: "2026-10-01T09:00:00Z",
            updatedAt: "2026-10-05T09:00:00Z",
            publishedAt: "2026-10-05T09:30:00Z",
          },
        ],
        datasetIds: ["ds_orders", "ds_stores"],
      },
      {
        id: "dash_draft",
        teamId: "team_ops",
        name: "Draft ideas",
        description: null,
        // The highest version is current even when listed first; it was never published.
        versions: [
          {
            version: 2,
            published: false,
            createdAt: "2026-10-20T08:00:00Z",
            updatedAt: "2026-10-21T08:00:00Z",
            publishedAt: null,
          },
          {
            version: 1,
            published: true,
            createdAt: "2026-08-01T08:00:00Z",
            updatedAt: "2026-08-01T08:00:00Z",
            publishedAt: "2026-08-01T09:00:00Z",
          },
        ],
        datasetIds: ["ds_orders"],
      },
      {
        id: "dash_campaigns",
        teamId: "team_mkt",
        name: "Campaign board",
        description: null,
        versions: [
          {
            version: 1,
            published: true,
            createdAt: "2026-10-25T08:00:00Z",
            updatedAt: "2026-10-25T08:00:00Z",
            publishedAt: "2026-10-25T08:00:00Z",
          },
        ],
        datasetIds: ["ds_campaigns"],
      },
    ],
    dashboardViews: [
      { dashboardId: "dash_sales", at: "2026-09-15T10:00:00Z", visitorId: "vis_a", userId: null, editor: false },
      // One second before the 30-day window opens, then its first instant.
      { dashboardId: "dash_sales", at: "2026-10-02T23:59:59Z", visitorId: "vis_a", userId: null, editor: false },
      { dashboardId: "dash_sales", at: "2026-10-03T00:00:00Z", visitorId: "vis_c", userId: null, editor: false },
      // vis_a returns on three days, twice on the last.
      { dashboardId: "dash_sales", at: "2026-10-30T09:00:00Z", visitorId: "vis_a", userId: null, editor: false },
      { dashboardId: "dash_sales", at: "2026-10-31T09:00:00Z", visitorId: "vis_a", userId: null, editor: false },
      { dashboardId: "dash_sales", at: "2026-10-31T10:00:00Z", visitorId: "vis_b", userId: null, editor: false },
      { dashboardId: "dash_sales", at: "2026-10-31T11:00:00Z", visitorId: "vis_ada", userId: "usr_ada", editor: false },
      { dashboardId: "dash_sales", at: "2026-10-31T15:00:00Z", visitorId: "vis_ada", userId: "usr_ada", editor: false },
      { dashboardId: "dash_sales", at: "2026-10-31T12:00:00Z", visitorId: "vis_ed", userId: "usr_ada", editor: true },
      { dashboardId: "dash_sales", at: "2026-11-01T08:00:00Z", visitorId: "vis_a", userId: null, editor: false },
      { dashboardId: "dash_sales", at: "2026-11-01T08:30:00Z", visitorId: "vis_a", userId: null, editor: false },
      { dashboardId: "dash_sales", at: "2026-11-01T09:00:00Z", visitorId: "vis_bob", userId: "usr_bob", editor: false },
      { dashboardId: "dash_sales", at: "2026-11-01T09:30:00Z", visitorId: "vis_ada", userId: "usr_ada", editor: false },
      { dashboardId: "dash_sales", at: "2026-11-01T10:00:00Z", visitorId: "vis_ada", userId: "usr_ada", editor: true },
      // Written with an offset: 2026-11-01T01:30:00Z, so it counts on 2026-11-01.
      { dashboardId: "dash_sales", at: "2026-10-31T22:30:00-03:00", visitorId: "vis_d", userId: null, editor: false },
      { dashboardId: "dash_draft", at: "2026-10-31T08:00:00Z", visitorId: "vis_a", userId: null, editor: false },
      { dashboardId: "dash_draft", at: "2026-10-31T08:10:00Z", visitorId: "vis_ada", userId: "usr_ada", editor: true },
      {
        dashboardId: "dash_campaigns",
        at: "2026-10-31T08:00:00Z",
        visitorId: "vis_bob",
        userId: "usr_bob",
        editor: false,
      },
    ],
    refreshRuns: [
      { datasetId: "ds_orders", startedAt: "2026-07-01T06:00:00Z", durationMs: 250, rowsProcessed: 5, error: null },
      {
        datasetId: "ds_orders",
        startedAt: "2026-10-20T06:00:00Z",
        durationMs: 300,
        rowsProcessed: 5,
        error: "bad csv",
      },
      { datasetId: "ds_stores", startedAt: "2026-10-31T01:00:00Z", durationMs: 1000, rowsProcessed: 10, error: null },
      {
        datasetId: "ds_stores",
        startedAt: "2026-10-31T02:00:00Z",
        durationMs: 2003,
        rowsProcessed: 0,
        error: "upstream timeout",
      },
      { datasetId: "ds_stores", startedAt: "2026-10-31T04:00:00Z", durationMs: 1200, rowsProcessed: 10, error: null },
      // Stored after the 04:00 run but started earlier: the day's latest FAILED run is still this one.
      {
        datasetId: "ds_stores",
        startedAt: "2026-10-31T03:00:00Z",
        durationMs: 1500,
        rowsProcessed: 0,
        error: "permission denied",
      },
      { datasetId: "ds_stores", startedAt: "2026-11-01T01:00:00Z", durationMs: 900, rowsProcessed: 10, error: null },
      {
        datasetId: "ds_campaigns",
        startedAt: "2026-10-31T01:00:00Z",
        durationMs: 100,
        rowsProcessed: 1,
        error: "other team",
      },
    ],
    creditUsage: [
      {
        teamId: "team_ops",
        at: "2026-10-31T10:00:00Z",
        category: "dashboard_generation",
        credits: 3,
        userId: "usr_ada",
      },
      { teamId: "team_ops", at: "2026-10-31T11:00:00Z", category: "dashboard_generation", credits: 2.5, userId: null },
      { teamId: "team_ops", at: "2026-10-31T12:00:00Z", category: "ai_query", credits: 1, userId: "usr_ada" },
      { teamId: "team_ops", at: "2026-11-01T09:00:00Z", category: "ai_query", credits: 4, userId: "usr_ada" },
      { teamId: "team_ops", at: "2026-11-01T09:30:00Z", category: "ai_query", credits: 0.5, userId: "usr_bob" },
      { teamId: "team_ops", at: "2026-08-01T09:30:00Z", category: "ai_query", credits: 9, userId: "usr_ada" },
      { teamId: "team_mkt", at: "2026-11-01T09:00:00Z", category: "ai_query", credits: 7, userId: "usr_bob" },
    ],
  };
}
