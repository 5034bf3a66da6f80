import { describe, expect, it } from "vitest";
import type { ApiCallRecord, DashboardRecord } from "../../domain/model.js";
import { parseFixture } from "../../fixture/load.js";
import type { Storage } from "../../ports/storage.js";
import { analyticsFixture } from "./analytics-fixture.js";
import { type ConformanceOptions, emptyStore, loadSpace, readAllPages, type StorageFactory } from "./harness.js";

const sync = { teamId: "team_ops", credentialKind: "api-key", credentialId: "key_sync", credentialName: "Warehouse sync" } as const;
const rowsRoute = "/api/v1/datasets/:id/rows";

/** API calls as api.ts records them (`at` in toISOString form). */
const CALLS: ApiCallRecord[] = [
  { ...sync, at: "2026-11-01T10:00:00.000Z", method: "GET", route: rowsRoute, objectId: "ds_orders", status: 200, latencyMs: 10 },
  { ...sync, at: "2026-11-01T10:05:00.000Z", method: "GET", route: rowsRoute, objectId: "ds_orders", status: 200, latencyMs: 21 },
  { ...sync, at: "2026-11-01T10:06:00.000Z", method: "GET", route: rowsRoute, objectId: "ds_nope", status: 404, latencyMs: 3 },
  { ...sync, at: "2026-10-31T23:00:00.000Z", method: "GET", route: rowsRoute, objectId: "ds_orders", status: 500, latencyMs: 7 },
  { ...sync, at: "2026-11-01T10:07:00.000Z", method: "GET", route: "/api/v1/datasets/:id", objectId: "ds_stores", status: 200, latencyMs: 2 },
  { ...sync, at: "2026-11-01T10:08:00.000Z", method: "GET", route: "/api/v1/tables/:id/rows", objectId: "tbl_targets", status: 200, latencyMs: 4 },
  { ...sync, at: "2026-09-01T10:00:00.000Z", method: "GET", route: rowsRoute, objectId: "ds_orders", status: 200, latencyMs: 5 },
  {
    at: "2026-11-01T11:00:00.000Z",
    teamId: "team_ops",
    credentialKind: "session-token",
    credentialId: "usr_ada",
    credentialName: "ada@northwind.test",
    method: "GET",
    route: "/api/v1/dashboards",
    objectId: null,
    status: 200,
    latencyMs: 1,
  },
  {
    at: "2026-11-01T11:00:00.000Z",
    teamId: "team_mkt",
    credentialKind: "api-key",
    credentialId: "key_mkt",
    credentialName: "Marketing key",
    method: "GET",
    route: rowsRoute,
    objectId: "ds_campaigns",
    status: 200,
    latencyMs: 1,
  },
  {
    at: "2026-11-01T11:00:00.000Z",
    teamId: null,
    credentialKind: "anonymous",
    credentialId: null,
    credentialName: null,
    method: "GET",
    route: rowsRoute,
    objectId: "ds_orders",
    status: 401,
    latencyMs: 1,
  },
];

const lastTwoDays = { teamId: "team_ops", fromDay: "2026-10-31", toDay: "2026-11-01" };

/** Dashboards, view aggregates, refresh runs, credit usage and the API usage log. */
export function describeAnalyticsConformance(name: string, factory: StorageFactory, options: ConformanceOptions = {}): void {
  describe.skipIf(!!options.skip)(`${name}: analytics`, () => {
    const empty = emptyStore(factory);
    const seeded = async (): Promise<Storage> => {
      const store = await empty();
      await loadSpace(store, parseFixture(analyticsFixture()), options);
      return store;
    };

    it("lists the teams' dashboards with every version and gets one by id", async () => {
      const store = await seeded();
      const ops = await store.listDashboards(["team_ops"]);
      expect(ops.map((d) => d.id).sort()).toEqual(["dash_draft", "dash_sales"]);
      expect((await store.listDashboards(["team_ops", "team_mkt"])).length).toBe(3);
      expect(await store.listDashboards([])).toEqual([]);
      const sales = await store.getDashboard("dash_sales");
      expect(sales).toMatchObject({ id: "dash_sales", teamId: "team_ops", name: "Sales overview", description: "Revenue by region" });
      expect(sales!.datasetIds.sort()).toEqual(["ds_orders", "ds_stores"]);
      expect(sales!.versions.sort((a, b) => a.version - b.version)).toEqual([
        { version: 1, published: true, createdAt: "2026-09-01T10:00:00Z", updatedAt: "2026-09-01T10:00:00Z", publishedAt: "2026-09-01T11:00:00Z" },
        { version: 2, published: true, createdAt: "2026-10-01T09:00:00Z", updatedAt: "2026-10-05T09:00:00Z", publishedAt: "2026-10-05T09:30:00Z" },
      ]);
      expect(await store.getDashboard("dash_nope")).toBeNull();
    });

    it("counts views and daily unique visitors by UTC day, editors excluded, oldest first", async () => {
      const store = await seeded();
      expect(await store.viewsByDay("dash_sales", { fromDay: "2026-10-30", toDay: "2026-11-01" })).toEqual([
        { day: "2026-10-30", views: 1, uniqueVisitors: 1 },
        { day: "2026-10-31", views: 4, uniqueVisitors: 3 },
        // includes 2026-10-31T22:30:00-03:00, which is 2026-11-01 in UTC
        { day: "2026-11-01", views: 5, uniqueVisitors: 4 },
      ]);
      expect(await store.viewsByDay("dash_sales", { fromDay: "2026-10-02", toDay: "2026-10-02" })).toEqual([
        { day: "2026-10-02", views: 1, uniqueVisitors: 1 },
      ]);
      expect(await store.viewsByDay("dash_sales", { fromDay: "2026-10-03", toDay: "2026-10-29" })).toEqual([
        { day: "2026-10-03", views: 1, uniqueVisitors: 1 },
      ]);
      expect(await store.viewsByDay("dash_draft", { fromDay: "2026-10-31", toDay: "2026-10-31" })).toEqual([
        { day: "2026-10-31", views: 1, uniqueVisitors: 1 },
      ]);
      expect(await store.viewsByDay("dash_nope", { fromDay: "2026-01-01", toDay: "2026-12-31" })).toEqual([]);
    });

    it("counts views per viewer per day: users by email, one Anonymous row per day, binary order", async () => {
      const store = await seeded();
      expect(await store.viewsByViewer("dash_sales", { fromDay: "2026-10-30", toDay: "2026-11-01" })).toEqual([
        { day: "2026-10-30", viewerId: null, viewer: "Anonymous", views: 1 },
        { day: "2026-10-31", viewerId: null, viewer: "Anonymous", views: 2 },
        { day: "2026-10-31", viewerId: "usr_ada", viewer: "ada@northwind.test", views: 2 },
        { day: "2026-11-01", viewerId: null, viewer: "Anonymous", views: 3 },
        { day: "2026-11-01", viewerId: "usr_ada", viewer: "ada@northwind.test", views: 1 },
        { day: "2026-11-01", viewerId: "usr_bob", viewer: "bob@northwind.test", views: 1 },
      ]);
    });

    it("aggregates dashboard-usage per dashboard per day for the team only", async () => {
      const store = await seeded();
      expect(await store.spaceDashboardUsage(lastTwoDays)).toEqual([
        {
          day: "2026-11-01",
          dashboard_id: "dash_sales",
          dashboard: "Sales overview",
          published: true,
          views: 5,
          unique_visitors: 4,
          signed_in_viewers: 2,
          anonymous_views: 3,
        },
        { day: "2026-10-31", dashboard_id: "dash_draft", dashboard: "Draft ideas", published: false, views: 1, unique_visitors: 1, signed_in_viewers: 0, anonymous_views: 1 },
        {
          day: "2026-10-31",
          dashboard_id: "dash_sales",
          dashboard: "Sales overview",
          published: true,
          views: 4,
          unique_visitors: 3,
          signed_in_viewers: 1,
          anonymous_views: 2,
        },
      ]);
      expect(await store.spaceDashboardUsage({ teamId: "team_free", fromDay: "2026-01-01", toDay: "2026-12-31" })).toEqual([]);
    });

    it("aggregates refresh-history per dataset per day of start, the latest failure's error kept", async () => {
      const store = await seeded();
      expect(await store.spaceRefreshHistory({ teamId: "team_ops", fromDay: "2026-08-04", toDay: "2026-11-01" })).toEqual([
        {
          dataset_id: "ds_stores",
          dataset: "Stores",
          connection: "Retail warehouse",
          day: "2026-11-01",
          runs: 1,
          failures: 0,
          rows_processed: 10,
          avg_duration_ms: 900,
          last_error: null,
        },
        {
          dataset_id: "ds_stores",
          dataset: "Stores",
          connection: "Retail warehouse",
          day: "2026-10-31",
          runs: 4,
          failures: 2,
          rows_processed: 20,
          avg_duration_ms: 1426, // (1000 + 2003 + 1200 + 1500) / 4 = 1425.75
          last_error: "permission denied",
        },
        {
          dataset_id: "ds_orders",
          dataset: "Orders 2026",
          connection: null,
          day: "2026-10-20",
          runs: 1,
          failures: 1,
          rows_processed: 5,
          avg_duration_ms: 300,
          last_error: "bad csv",
        },
      ]);
    });

    it("records refresh runs; among failures at the same instant the one stored last wins; .5 rounds up", async () => {
      const store = await seeded();
      const at = "2026-11-01T05:00:00Z";
      await store.recordRefreshRun({ datasetId: "ds_orders", startedAt: at, durationMs: 1, rowsProcessed: 1, error: "first" });
      await store.recordRefreshRun({ datasetId: "ds_orders", startedAt: at, durationMs: 2, rowsProcessed: 2, error: "second" });
      const rows = await store.spaceRefreshHistory({ teamId: "team_ops", fromDay: "2026-11-01", toDay: "2026-11-01" });
      expect(rows.find((r) => r.dataset_id === "ds_orders")).toEqual({
        dataset_id: "ds_orders",
        dataset: "Orders 2026",
        connection: null,
        day: "2026-11-01",
        runs: 2,
        failures: 2,
        rows_processed: 3,
        avg_duration_ms: 2,
        last_error: "second",
      });
    });

    it("aggregates credit-usage per category per day", async () => {
      const store = await seeded();
      expect(await store.spaceCreditUsage(lastTwoDays)).toEqual([
        { day: "2026-11-01", category: "ai_query", credits: 4.5, uses: 2, users: 2 },
        { day: "2026-10-31", category: "ai_query", credits: 1, uses: 1, users: 1 },
        { day: "2026-10-31", category: "dashboard_generation", credits: 5.5, uses: 2, users: 1 },
      ]);
    });

    it("aggregates the API usage log per day, route, method and credential", async () => {
      const store = await seeded();
      for (const call of CALLS) await store.recordApiCall(call);
      expect(await store.spaceApiUsage(lastTwoDays)).toEqual([
        {
          day: "2026-11-01",
          method: "GET",
          route: "/api/v1/dashboards",
          credential_kind: "session-token",
          credential_id: "usr_ada",
          credential: "ada@northwind.test",
          calls: 1,
          errors: 0,
          server_errors: 0,
          avg_latency_ms: 1,
        },
        {
          day: "2026-11-01",
          method: "GET",
          route: "/api/v1/datasets/:id",
          credential_kind: "api-key",
          credential_id: "key_sync",
          credential: "Warehouse sync",
          calls: 1,
          errors: 0,
          server_errors: 0,
          avg_latency_ms: 2,
        },
        {
          day: "2026-11-01",
          method: "GET",
          route: rowsRoute,
          credential_kind: "api-key",
          credential_id: "key_sync",
          credential: "Warehouse sync",
          calls: 3,
          errors: 1,
          server_errors: 0,
          avg_latency_ms: 11, // 34 / 3
        },
        {
          day: "2026-11-01",
          method: "GET",
          route: "/api/v1/tables/:id/rows",
          credential_kind: "api-key",
          credential_id: "key_sync",
          credential: "Warehouse sync",
          calls: 1,
          errors: 0,
          server_errors: 0,
          avg_latency_ms: 4,
        },
        {
          day: "2026-10-31",
          method: "GET",
          route: rowsRoute,
          credential_kind: "api-key",
          credential_id: "key_sync",
          credential: "Warehouse sync",
          calls: 1,
          errors: 1,
          server_errors: 1,
          avg_latency_ms: 7,
        },
      ]);
    });

    it("reports dataset-usage: what is held, how fresh, which dashboards and how many API reads", async () => {
      const store = await seeded();
      for (const call of CALLS) await store.recordApiCall(call);
      expect(await store.spaceDatasetUsage({ teamId: "team_ops" })).toEqual([
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
          dashboards: ["Draft ideas", "Sales overview"],
          // 2xx GETs of its rows at any time (10:00, 10:05 and 09-01); not the 404, 500 or 401
          api_reads: 3,
          last_api_read_at: "2026-11-01T10:05:00.000Z",
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
          api_reads: 1,
          last_api_read_at: "2026-11-01T10:08:00.000Z",
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
          dashboards: ["Sales overview"],
          api_reads: 0,
          last_api_read_at: null,
        },
      ]);
    });

    describe("writes", () => {
      const board = (id: string, over: Partial<DashboardRecord> = {}): DashboardRecord => ({
        id,
        teamId: "team_ops",
        name: `Board ${id}`,
        description: null,
        versions: [{ version: 1, published: false, createdAt: "2026-11-01T00:00:00Z", updatedAt: "2026-11-01T00:00:00Z", publishedAt: null }],
        datasetIds: [],
        ...over,
      });
      const sortVersions = (d: DashboardRecord | null) => d && { ...d, versions: [...d.versions].sort((a, b) => a.version - b.version), datasetIds: [...d.datasetIds].sort() };
      const day = { fromDay: "2026-11-01", toDay: "2026-11-01" };

      it("lists every dashboard by id (binary order), a page at a time, with every version", async () => {
        const store = await seeded();
        await store.putDashboard(board("DASH_0", { teamId: "team_free" }));
        expect((await store.listAllDashboards({ after: null, limit: 2 })).map((d) => d.id)).toEqual(["DASH_0", "dash_campaigns"]);
        const next = await store.listAllDashboards({ after: "dash_campaigns", limit: 2 });
        expect(next.map((d) => d.id)).toEqual(["dash_draft", "dash_sales"]);
        expect(sortVersions(next[1]!)).toEqual(sortVersions(await store.getDashboard("dash_sales")));
        expect(next[1]!.versions).toHaveLength(2);
        expect(await store.listAllDashboards({ after: "dash_sales", limit: 2 })).toEqual([]);
        expect((await readAllPages((page) => store.listAllDashboards(page), 3)).map((d) => d.id)).toEqual(["DASH_0", "dash_campaigns", "dash_draft", "dash_sales"]);
      });

      it("puts a dashboard with exactly the versions given; replacing keeps its views", async () => {
        const store = await seeded();
        const created = board("dash_new", { description: "New", datasetIds: ["ds_orders"] });
        expect(await store.putDashboard(created)).toBe("created");
        expect(await store.getDashboard("dash_new")).toEqual(created);
        expect((await store.listDashboards(["team_ops"])).map((d) => d.id).sort()).toEqual(["dash_draft", "dash_new", "dash_sales"]);

        const sales = (await store.getDashboard("dash_sales"))!;
        const only = { version: 3, published: false, createdAt: "2026-11-01T00:00:00Z", updatedAt: "2026-11-01T01:00:00Z", publishedAt: null };
        const replaced = { ...sales, name: "Sales", description: null, versions: [only], datasetIds: ["ds_stores"] };
        expect(await store.putDashboard(replaced)).toBe("updated");
        expect(await store.getDashboard("dash_sales")).toEqual(replaced);
        expect(await store.viewsByDay("dash_sales", { fromDay: "2026-10-31", toDay: "2026-11-01" })).toEqual([
          { day: "2026-10-31", views: 4, uniqueVisitors: 3 },
          { day: "2026-11-01", views: 5, uniqueVisitors: 4 },
        ]);
        const usage = await store.spaceDashboardUsage({ teamId: "team_ops", ...day });
        expect(usage).toEqual([expect.objectContaining({ dashboard_id: "dash_sales", dashboard: "Sales", published: false, views: 5 })]);
      });

      it("changes a dashboard atomically: racing changes each see the one before; a change that throws writes nothing", async () => {
        const store = await seeded();
        const version = (n: number) => ({ version: n, published: false, createdAt: "2026-11-01T00:00:00Z", updatedAt: "2026-11-01T00:00:00Z", publishedAt: null });
        const seen: Array<number | null> = [];
        const results = await Promise.all(
          [1, 2, 3, 4, 5].map((n) =>
            store.changeDashboard("dash_raced", (current) => {
              seen.push(current === null ? null : current.versions.length);
              return { ...board("dash_raced"), versions: [...(current?.versions ?? []), version(n)] };
            }),
          ),
        );
        // Each change saw the one before it: the version counts it found, in the order the changes ran.
        expect(seen).toEqual([null, 1, 2, 3, 4]);
        expect(results.filter((r) => r.before === null)).toHaveLength(1);
        expect((await store.getDashboard("dash_raced"))!.versions.map((v) => v.version).sort()).toEqual([1, 2, 3, 4, 5]);

        const sales = await store.getDashboard("dash_sales");
        await expect(
          store.changeDashboard("dash_sales", () => {
            throw new Error("refused");
          }),
        ).rejects.toThrow("refused");
        expect(await store.getDashboard("dash_sales")).toEqual(sales);
      });

      it("deletes a dashboard with its views; false when unknown", async () => {
        const store = await seeded();
        expect(await store.deleteDashboard("dash_sales")).toBe(true);
        expect(await store.getDashboard("dash_sales")).toBeNull();
        expect((await store.listDashboards(["team_ops"])).map((d) => d.id)).toEqual(["dash_draft"]);
        expect(await store.spaceDashboardUsage(lastTwoDays)).toEqual([expect.objectContaining({ dashboard_id: "dash_draft", views: 1 })]);
        expect(await store.deleteDashboard("dash_sales")).toBe(false);
        // Put back under the same id, it has no views: they went with it.
        expect(await store.putDashboard(board("dash_sales"))).toBe("created");
        expect(await store.viewsByDay("dash_sales", { fromDay: "2026-01-01", toDay: "2026-12-31" })).toEqual([]);
        expect(await store.viewsByDay("dash_draft", { fromDay: "2026-10-31", toDay: "2026-10-31" })).toEqual([{ day: "2026-10-31", views: 1, uniqueVisitors: 1 }]);
        expect(await store.deleteDashboard("dash_nope")).toBe(false);
      });

      it("appends page views, counted at once (editors excluded)", async () => {
        const store = await seeded();
        await store.appendDashboardViews([
          { dashboardId: "dash_draft", at: "2026-11-01T10:00:00Z", visitorId: "vis_x", userId: null, editor: false },
          { dashboardId: "dash_draft", at: "2026-11-01T11:00:00Z", visitorId: "vis_x", userId: null, editor: false },
          { dashboardId: "dash_draft", at: "2026-11-01T12:00:00Z", visitorId: "vis_bob", userId: "usr_bob", editor: false },
          { dashboardId: "dash_draft", at: "2026-11-01T12:30:00Z", visitorId: "vis_ada", userId: "usr_ada", editor: true },
        ]);
        await store.appendDashboardViews([]);
        expect(await store.viewsByDay("dash_draft", day)).toEqual([{ day: "2026-11-01", views: 3, uniqueVisitors: 2 }]);
        expect(await store.viewsByViewer("dash_draft", day)).toEqual([
          { day: "2026-11-01", viewerId: null, viewer: "Anonymous", views: 2 },
          { day: "2026-11-01", viewerId: "usr_bob", viewer: "bob@northwind.test", views: 1 },
        ]);
      });

      it("appends refresh runs and credit usage, counted at once", async () => {
        const store = await seeded();
        await store.appendRefreshRuns([
          { datasetId: "ds_secret", startedAt: "2026-11-01T01:00:00Z", durationMs: 100, rowsProcessed: 1, error: null },
          { datasetId: "ds_secret", startedAt: "2026-11-01T02:00:00Z", durationMs: 201, rowsProcessed: 0, error: "denied" },
        ]);
        await store.appendRefreshRuns([]);
        expect((await store.spaceRefreshHistory({ teamId: "team_ops", ...day })).find((r) => r.dataset_id === "ds_secret")).toEqual({
          dataset_id: "ds_secret",
          dataset: "Payroll",
          connection: null,
          day: "2026-11-01",
          runs: 2,
          failures: 1,
          rows_processed: 1,
          avg_duration_ms: 151,
          last_error: "denied",
        });
        await store.appendCreditUsage([
          { teamId: "team_ops", at: "2026-11-01T10:00:00Z", category: "export", credits: 1.5, userId: "usr_ada" },
          { teamId: "team_ops", at: "2026-11-01T11:00:00Z", category: "export", credits: 2, userId: null },
        ]);
        await store.appendCreditUsage([]);
        expect(await store.spaceCreditUsage({ teamId: "team_ops", ...day })).toEqual([
          { day: "2026-11-01", category: "ai_query", credits: 4.5, uses: 2, users: 2 },
          { day: "2026-11-01", category: "export", credits: 3.5, uses: 2, users: 1 },
        ]);
      });
    });
  });
}
