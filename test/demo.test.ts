import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { createDataApi } from "../src/server/api.js";
import { parseFixture } from "../src/fixture/load.js";
import { createFixedClock } from "../src/memory/fixed-clock.js";
import { createMemoryStorage } from "../src/memory/memory-storage.js";

/**
 * The demo space is alive: its activity is written relative to the moment it
 * loads (docs/fixtures.md), so on any date — here two a year apart, one just
 * after midnight UTC and one just before — it shows recent views, refresh
 * runs, credit usage and audit events.
 */
const DEMO = join(import.meta.dirname, "..", "examples", "demo", "space.json");
const KEY = "dp_demo_full_access_0000000000001";

async function demoAt(now: string) {
  const clock = createFixedClock(now);
  const storage = createMemoryStorage();
  await storage.seed(parseFixture(JSON.parse(readFileSync(DEMO, "utf8")), { clock }));
  const api = createDataApi({ storage, clock });
  return async (path: string) => {
    const response = await api.fetch(
      new Request(`http://demo.test/api/v1${path}`, { headers: { authorization: `Bearer ${KEY}` } }),
    );
    expect(response.status, path).toBe(200);
    return (await response.json()) as any;
  };
}

const day = (iso: string, daysBack: number) =>
  new Date(Date.parse(iso) - daysBack * 86_400_000).toISOString().slice(0, 10);

describe("the demo space on any date", () => {
  for (const now of ["2026-03-15T00:30:00.000Z", "2027-03-16T23:30:00.000Z"]) {
    it(`shows recent activity when loaded at ${now}`, async () => {
      const get = await demoAt(now);

      for (const dashboard of ["dash_sales", "dash_stores"]) {
        const views = await get(`/dashboards/${dashboard}/views?days=7`);
        expect(views.totals.views, dashboard).toBeGreaterThan(0);
        expect(views.series.map((d: { day: string }) => d.day)).toEqual([6, 5, 4, 3, 2, 1, 0].map((n) => day(now, n)));
        // Views every day of the week, not only a burst on one of them.
        expect(views.series.filter((d: { views: number }) => d.views > 0).length, dashboard).toBeGreaterThanOrEqual(5);
      }

      const refreshes = await get("/space/refresh-history?days=3");
      expect(refreshes.rows.length).toBeGreaterThan(0);
      expect(refreshes.rows.every((r: { day: string }) => r.day >= day(now, 2) && r.day <= day(now, 0))).toBe(true);
      expect(refreshes.rows.reduce((n: number, r: { runs: number }) => n + r.runs, 0)).toBeGreaterThanOrEqual(4);

      const credits = await get("/space/credit-usage?days=3");
      expect(credits.rows.length).toBeGreaterThan(0);
      const usage = await get("/space/dashboard-usage?days=7");
      expect(usage.rows.length).toBeGreaterThan(0);

      // Audit events of the last week, none from the future.
      const feed = await get("/audit?format=raw&category=data_access&category=error");
      const times = feed.events.map((e: { time: string }) => Date.parse(e.time));
      expect(times).toHaveLength(5);
      for (const time of times) {
        expect(time).toBeLessThanOrEqual(Date.parse(now));
        expect(time).toBeGreaterThan(Date.parse(now) - 7 * 86_400_000);
      }

      // Freshness follows the load too; the input-table rows the README's compare-and-set example quotes stay absolute.
      const stores = await get("/datasets/ds_stores");
      expect(Date.parse(now) - Date.parse(stores.lastRefreshedAt)).toBe(2 * 3_600_000);
      const targets = await get("/tables/tbl_targets/rows");
      expect(targets.data[0]._updatedAt).toBe("2026-10-01T00:00:00Z");
    });
  }

  it("is written with relative times, so the file itself names no date of its activity", () => {
    const demo = JSON.parse(readFileSync(DEMO, "utf8"));
    const times = [
      ...demo.dashboardViews.map((v: { at: string }) => v.at),
      ...demo.refreshRuns.map((r: { startedAt: string }) => r.startedAt),
      ...demo.creditUsage.map((c: { at: string }) => c.at),
      ...demo.auditEvents.map((e: { time: string }) => e.time),
    ];
    expect(times.length).toBeGreaterThan(600);
    for (const time of times) expect(time).toMatch(/^(-P(\d+D)?(T(\d+H)?(\d+M)?)?|PT0S)$/);
  });
});
