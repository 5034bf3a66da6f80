import { describe, expect, it } from "vitest";
import type { DashboardRecord } from "../../domain/model.js";
import { parseFixture } from "../../fixture/load.js";
import type { Storage } from "../../ports/storage.js";
import { activityFixture } from "./activity-fixture.js";
import { type ConformanceOptions, emptyStore, loadSpace, readAllPages, type StorageFactory } from "./harness.js";

const lastTwoDays = { teamId: "team_ops", fromDay: "2026-10-31", toDay: "2026-11-01" };

/** The dashboards area: dashboards with their versions, page views and their aggregates. */
export function describeDashboardsConformance(
  name: string,
  factory: StorageFactory,
  options: ConformanceOptions = {},
): void {
  describe.skipIf(!!options.skip)(`${name}: dashboards`, () => {
    const empty = emptyStore(factory);
    const seeded = async (): Promise<Storage> => {
      const store = await empty();
      await loadSpace(store, parseFixture(activityFixture()), options);
      return store;
    };

    it("lists the teams' dashboards with every version and gets one by id", async () => {
      const store = await seeded();
      const ops = await store.dashboards.listDashboards(["team_ops"]);
      expect(ops.map((d) => d.id).sort()).toEqual(["dash_draft", "dash_sales"]);
      expect((await store.dashboards.listDashboards(["team_ops", "team_mkt"])).length).toBe(3);
      expect(await store.dashboards.listDashboards([])).toEqual([]);
      const sales = await store.dashboards.getDashboard("dash_sales");
      expect(sales).toMatchObject({
        id: "dash_sales",
        teamId: "team_ops",
        name: "Sales overview",
        description: "Revenue by region",
      });
      expect(sales!.datasetIds.sort()).toEqual(["ds_orders", "ds_stores"]);
      expect(sales!.versions.sort((a, b) => a.version - b.version)).toEqual([
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
      ]);
      expect(await store.dashboards.getDashboard("dash_nope")).toBeNull();
    });

    it("counts views and daily unique visitors by UTC day, editors excluded, oldest first", async () => {
      const store = await seeded();
      expect(await store.dashboards.viewsByDay("dash_sales", { fromDay: "2026-10-30", toDay: "2026-11-01" })).toEqual([
        { day: "2026-10-30", views: 1, uniqueVisitors: 1 },
        { day: "2026-10-31", views: 4, uniqueVisitors: 3 },
        // includes 2026-10-31T22:30:00-03:00, which is 2026-11-01 in UTC
        { day: "2026-11-01", views: 5, uniqueVisitors: 4 },
      ]);
      expect(await store.dashboards.viewsByDay("dash_sales", { fromDay: "2026-10-02", toDay: "2026-10-02" })).toEqual([
        { day: "2026-10-02", views: 1, uniqueVisitors: 1 },
      ]);
      expect(await store.dashboards.viewsByDay("dash_sales", { fromDay: "2026-10-03", toDay: "2026-10-29" })).toEqual([
        { day: "2026-10-03", views: 1, uniqueVisitors: 1 },
      ]);
      expect(await store.dashboards.viewsByDay("dash_draft", { fromDay: "2026-10-31", toDay: "2026-10-31" })).toEqual([
        { day: "2026-10-31", views: 1, uniqueVisitors: 1 },
      ]);
      expect(await store.dashboards.viewsByDay("dash_nope", { fromDay: "2026-01-01", toDay: "2026-12-31" })).toEqual(
        [],
      );
    });

    it("counts views per viewer per day: users by email, one Anonymous row per day, binary order", async () => {
      const store = await seeded();
      expect(
        await store.dashboards.viewsByViewer("dash_sales", { fromDay: "2026-10-30", toDay: "2026-11-01" }),
      ).toEqual([
        { day: "2026-10-30", viewerId: null, viewer: "Anonymous", views: 1 },
        { day: "2026-10-31", viewerId: null, viewer: "Anonymous", views: 2 },
        { day: "2026-10-31", viewerId: "usr_ada", viewer: "ada@northwind.test", views: 2 },
        { day: "2026-11-01", viewerId: null, viewer: "Anonymous", views: 3 },
        { day: "2026-11-01", viewerId: "usr_ada", viewer: "ada@northwind.test", views: 1 },
        { day: "2026-11-01", viewerId: "usr_bob", viewer: "bob@northwind.test", views: 1 },
      ]);
    });

    describe("writes", () => {
      const board = (id: string, over: Partial<DashboardRecord> = {}): DashboardRecord => ({
        id,
        teamId: "team_ops",
        name: `Board ${id}`,
        description: null,
        versions: [
          {
            version: 1,
            published: false,
            createdAt: "2026-11-01T00:00:00Z",
            updatedAt: "2026-11-01T00:00:00Z",
            publishedAt: null,
          },
        ],
        datasetIds: [],
        ...over,
      });
      const sortVersions = (d: DashboardRecord | null) =>
        d && {
          ...d,
          versions: [...d.versions].sort((a, b) => a.version - b.version),
          datasetIds: [...d.datasetIds].sort(),
        };
      const day = { fromDay: "2026-11-01", toDay: "2026-11-01" };
      it("lists every dashboard by id (binary order), a page at a time, with every version", async () => {
        const store = await seeded();
        await store.dashboards.putDashboard(board("DASH_0", { teamId: "team_free" }));
        expect((await store.dashboards.listAllDashboards({ after: null, limit: 2 })).map((d) => d.id)).toEqual([
          "DASH_0",
          "dash_campaigns",
        ]);
        const next = await store.dashboards.listAllDashboards({ after: "dash_campaigns", limit: 2 });
        expect(next.map((d) => d.id)).toEqual(["dash_draft", "dash_sales"]);
        expect(sortVersions(next[1]!)).toEqual(sortVersions(await store.dashboards.getDashboard("dash_sales")));
        expect(next[1]!.versions).toHaveLength(2);
        expect(await store.dashboards.listAllDashboards({ after: "dash_sales", limit: 2 })).toEqual([]);
        expect((await readAllPages((page) => store.dashboards.listAllDashboards(page), 3)).map((d) => d.id)).toEqual([
          "DASH_0",
          "dash_campaigns",
          "dash_draft",
          "dash_sales",
        ]);
      });

      it("puts a dashboard with exactly the versions given; replacing keeps its views", async () => {
        const store = await seeded();
        const created = board("dash_new", { description: "New", datasetIds: ["ds_orders"] });
        expect(await store.dashboards.putDashboard(created)).toBe("created");
        expect(await store.dashboards.getDashboard("dash_new")).toEqual(created);
        expect((await store.dashboards.listDashboards(["team_ops"])).map((d) => d.id).sort()).toEqual([
          "dash_draft",
          "dash_new",
          "dash_sales",
        ]);

        const sales = (await store.dashboards.getDashboard("dash_sales"))!;
        const only = {
          version: 3,
          published: false,
          createdAt: "2026-11-01T00:00:00Z",
          updatedAt: "2026-11-01T01:00:00Z",
          publishedAt: null,
        };
        const replaced = { ...sales, name: "Sales", description: null, versions: [only], datasetIds: ["ds_stores"] };
        expect(await store.dashboards.putDashboard(replaced)).toBe("updated");
        expect(await store.dashboards.getDashboard("dash_sales")).toEqual(replaced);
        expect(await store.dashboards.viewsByDay("dash_sales", { fromDay: "2026-10-31", toDay: "2026-11-01" })).toEqual(
          [
            { day: "2026-10-31", views: 4, uniqueVisitors: 3 },
            { day: "2026-11-01", views: 5, uniqueVisitors: 4 },
          ],
        );
        const usage = await store.usage.spaceDashboardUsage({ teamId: "team_ops", ...day });
        expect(usage).toEqual([
          expect.objectContaining({ dashboard_id: "dash_sales", dashboard: "Sales", published: false, views: 5 }),
        ]);
      });

      it("changes a dashboard atomically: racing changes each see the one before; a change that throws writes nothing", async () => {
        const store = await seeded();
        const version = (n: number) => ({
          version: n,
          published: false,
          createdAt: "2026-11-01T00:00:00Z",
          updatedAt: "2026-11-01T00:00:00Z",
          publishedAt: null,
        });
        const seen: Array<number | null> = [];
        const results = await Promise.all(
          [1, 2, 3, 4, 5].map((n) =>
            store.dashboards.changeDashboard("dash_raced", (current) => {
              seen.push(current === null ? null : current.versions.length);
              return { ...board("dash_raced"), versions: [...(current?.versions ?? []), version(n)] };
            }),
          ),
        );
        // Each change saw the one before it: the version counts it found, in the order the changes ran.
        expect(seen).toEqual([null, 1, 2, 3, 4]);
        expect(results.filter((r) => r.before === null)).toHaveLength(1);
        expect((await store.dashboards.getDashboard("dash_raced"))!.versions.map((v) => v.version).sort()).toEqual([
          1, 2, 3, 4, 5,
        ]);

        const sales = await store.dashboards.getDashboard("dash_sales");
        await expect(
          store.dashboards.changeDashboard("dash_sales", () => {
            throw new Error("refused");
          }),
        ).rejects.toThrow("refused");
        expect(await store.dashboards.getDashboard("dash_sales")).toEqual(sales);
      });

      it("deletes a dashboard with its views; false when unknown", async () => {
        const store = await seeded();
        expect(await store.dashboards.deleteDashboard("dash_sales")).toBe(true);
        expect(await store.dashboards.getDashboard("dash_sales")).toBeNull();
        expect((await store.dashboards.listDashboards(["team_ops"])).map((d) => d.id)).toEqual(["dash_draft"]);
        expect(await store.usage.spaceDashboardUsage(lastTwoDays)).toEqual([
          expect.objectContaining({ dashboard_id: "dash_draft", views: 1 }),
        ]);
        expect(await store.dashboards.deleteDashboard("dash_sales")).toBe(false);
        // Put back under the same id, it has no views: they went with it.
        expect(await store.dashboards.putDashboard(board("dash_sales"))).toBe("created");
        expect(await store.dashboards.viewsByDay("dash_sales", { fromDay: "2026-01-01", toDay: "2026-12-31" })).toEqual(
          [],
        );
        expect(await store.dashboards.viewsByDay("dash_draft", { fromDay: "2026-10-31", toDay: "2026-10-31" })).toEqual(
          [{ day: "2026-10-31", views: 1, uniqueVisitors: 1 }],
        );
        expect(await store.dashboards.deleteDashboard("dash_nope")).toBe(false);
      });

      it("appends page views, counted at once (editors excluded)", async () => {
        const store = await seeded();
        await store.dashboards.appendDashboardViews([
          { dashboardId: "dash_draft", at: "2026-11-01T10:00:00Z", visitorId: "vis_x", userId: null, editor: false },
          { dashboardId: "dash_draft", at: "2026-11-01T11:00:00Z", visitorId: "vis_x", userId: null, editor: false },
          {
            dashboardId: "dash_draft",
            at: "2026-11-01T12:00:00Z",
            visitorId: "vis_bob",
            userId: "usr_bob",
            editor: false,
          },
          {
            dashboardId: "dash_draft",
            at: "2026-11-01T12:30:00Z",
            visitorId: "vis_ada",
            userId: "usr_ada",
            editor: true,
          },
        ]);
        await store.dashboards.appendDashboardViews([]);
        expect(await store.dashboards.viewsByDay("dash_draft", day)).toEqual([
          { day: "2026-11-01", views: 3, uniqueVisitors: 2 },
        ]);
        expect(await store.dashboards.viewsByViewer("dash_draft", day)).toEqual([
          { day: "2026-11-01", viewerId: null, viewer: "Anonymous", views: 2 },
          { day: "2026-11-01", viewerId: "usr_bob", viewer: "bob@northwind.test", views: 1 },
        ]);
      });
    });
  });
}
