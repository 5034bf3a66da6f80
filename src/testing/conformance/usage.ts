import { describe, expect, it } from "vitest";
import type { ApiCallRecord } from "../../domain/model.js";
import { parseFixture } from "../../fixture/load.js";
import type { Storage } from "../../ports/storage.js";
import { activityFixture } from "./activity-fixture.js";
import { type ConformanceOptions, emptyStore, loadSpace, type StorageFactory } from "./harness.js";

const sync = {
  teamId: "team_ops",
  credentialKind: "api-key",
  credentialId: "key_sync",
  credentialName: "Warehouse sync",
} as const;
const rowsRoute = "/api/v1/datasets/:id/rows";

/** API calls as the pipeline records them (`at` in toISOString form). */
const CALLS: ApiCallRecord[] = [
  {
    ...sync,
    at: "2026-11-01T10:00:00.000Z",
    method: "GET",
    route: rowsRoute,
    objectId: "ds_orders",
    status: 200,
    latencyMs: 10,
  },
  {
    ...sync,
    at: "2026-11-01T10:05:00.000Z",
    method: "GET",
    route: rowsRoute,
    objectId: "ds_orders",
    status: 200,
    latencyMs: 21,
  },
  {
    ...sync,
    at: "2026-11-01T10:06:00.000Z",
    method: "GET",
    route: rowsRoute,
    objectId: "ds_nope",
    status: 404,
    latencyMs: 3,
  },
  {
    ...sync,
    at: "2026-10-31T23:00:00.000Z",
    method: "GET",
    route: rowsRoute,
    objectId: "ds_orders",
    status: 500,
    latencyMs: 7,
  },
  {
    ...sync,
    at: "2026-11-01T10:07:00.000Z",
    method: "GET",
    route: "/api/v1/datasets/:id",
    objectId: "ds_stores",
    status: 200,
    latencyMs: 2,
  },
  {
    ...sync,
    at: "2026-11-01T10:08:00.000Z",
    method: "GET",
    route: "/api/v1/tables/:id/rows",
    objectId: "tbl_targets",
    status: 200,
    latencyMs: 4,
  },
  {
    ...sync,
    at: "2026-09-01T10:00:00.000Z",
    method: "GET",
    route: rowsRoute,
    objectId: "ds_orders",
    status: 200,
    latencyMs: 5,
  },
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

/** The usage area: the space's usage objects, refresh runs, credit usage and the API usage log. */
export function describeUsageConformance(
  name: string,
  factory: StorageFactory,
  options: ConformanceOptions = {},
): void {
  describe.skipIf(!!options.skip)(`${name}: usage`, () => {
    const empty = emptyStore(factory);
    const seeded = async (): Promise<Storage> => {
      const store = await empty();
      await loadSpace(store, parseFixture(activityFixture()), options);
      return store;
    };

    it("aggregates dashboard-usage per dashboard per day for the team only", async () => {
      const store = await seeded();
      expect(await store.usage.spaceDashboardUsage(lastTwoDays)).toEqual([
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
        {
          day: "2026-10-31",
          dashboard_id: "dash_draft",
          dashboard: "Draft ideas",
          published: false,
          views: 1,
          unique_visitors: 1,
          signed_in_viewers: 0,
          anonymous_views: 1,
        },
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
      expect(
        await store.usage.spaceDashboardUsage({ teamId: "team_free", fromDay: "2026-01-01", toDay: "2026-12-31" }),
      ).toEqual([]);
    });

    it("aggregates refresh-history per dataset per day of start, the latest failure's error kept", async () => {
      const store = await seeded();
      expect(
        await store.usage.spaceRefreshHistory({ teamId: "team_ops", fromDay: "2026-08-04", toDay: "2026-11-01" }),
      ).toEqual([
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
      await store.usage.recordRefreshRun({
        datasetId: "ds_orders",
        startedAt: at,
        durationMs: 1,
        rowsProcessed: 1,
        error: "first",
      });
      await store.usage.recordRefreshRun({
        datasetId: "ds_orders",
        startedAt: at,
        durationMs: 2,
        rowsProcessed: 2,
        error: "second",
      });
      const rows = await store.usage.spaceRefreshHistory({
        teamId: "team_ops",
        fromDay: "2026-11-01",
        toDay: "2026-11-01",
      });
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
      expect(await store.usage.spaceCreditUsage(lastTwoDays)).toEqual([
        { day: "2026-11-01", category: "ai_query", credits: 4.5, uses: 2, users: 2 },
        { day: "2026-10-31", category: "ai_query", credits: 1, uses: 1, users: 1 },
        { day: "2026-10-31", category: "dashboard_generation", credits: 5.5, uses: 2, users: 1 },
      ]);
    });

    it("aggregates the API usage log per day, route, method and credential", async () => {
      const store = await seeded();
      for (const call of CALLS) await store.usage.recordApiCall(call);
      expect(await store.usage.spaceApiUsage(lastTwoDays)).toEqual([
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
      for (const call of CALLS) await store.usage.recordApiCall(call);
      expect(await store.usage.spaceDatasetUsage({ teamId: "team_ops" })).toEqual([
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
      const day = { fromDay: "2026-11-01", toDay: "2026-11-01" };

      it("appends refresh runs and credit usage, counted at once", async () => {
        const store = await seeded();
        await store.usage.appendRefreshRuns([
          { datasetId: "ds_secret", startedAt: "2026-11-01T01:00:00Z", durationMs: 100, rowsProcessed: 1, error: null },
          {
            datasetId: "ds_secret",
            startedAt: "2026-11-01T02:00:00Z",
            durationMs: 201,
            rowsProcessed: 0,
            error: "denied",
          },
        ]);
        await store.usage.appendRefreshRuns([]);
        expect(
          (await store.usage.spaceRefreshHistory({ teamId: "team_ops", ...day })).find(
            (r) => r.dataset_id === "ds_secret",
          ),
        ).toEqual({
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
        await store.usage.appendCreditUsage([
          { teamId: "team_ops", at: "2026-11-01T10:00:00Z", category: "export", credits: 1.5, userId: "usr_ada" },
          { teamId: "team_ops", at: "2026-11-01T11:00:00Z", category: "export", credits: 2, userId: null },
        ]);
        await store.usage.appendCreditUsage([]);
        expect(await store.usage.spaceCreditUsage({ teamId: "team_ops", ...day })).toEqual([
          { day: "2026-11-01", category: "ai_query", credits: 4.5, uses: 2, users: 2 },
          { day: "2026-11-01", category: "export", credits: 3.5, uses: 2, users: 1 },
        ]);
      });
    });
  });
}
