import { describe, expect, it } from "vitest";
import { FixtureError, parseFixture } from "../src/fixture/load.js";
import { parseRelativeTime, resolveRelativeTimes } from "../src/fixture/relative.js";
import { createFixedClock } from "../src/memory/fixed-clock.js";
import { testFixture } from "./support/fixture.js";

const NOW = "2027-02-10T12:00:00.000Z";
const clock = createFixedClock(NOW);

function refusal(fixture: unknown): FixtureError {
  try {
    parseFixture(fixture, { clock });
  } catch (error) {
    if (error instanceof FixtureError) return error;
    throw error;
  }
  throw new Error("the fixture was accepted");
}

describe("relative times in fixtures", () => {
  it("reads signed ISO 8601 durations of weeks, days, hours, minutes and seconds", () => {
    expect(parseRelativeTime("-P2DT3H")).toBe(-(2 * 24 + 3) * 3_600_000);
    expect(parseRelativeTime("PT0S")).toBe(0);
    expect(parseRelativeTime("+PT30M")).toBe(30 * 60_000);
    expect(parseRelativeTime("P1W")).toBe(7 * 86_400_000);
    expect(parseRelativeTime("-PT1.5S")).toBe(-1500);
    for (const text of ["P", "-P", "PT", "P1DT", "P1Y", "P1M", "-P2D3H", "2026-10-01T00:00:00Z", "P-1D", "PT1H2D"]) {
      expect(parseRelativeTime(text), text).toBeNull();
    }
  });

  it("resolves them against the loading clock, at every timestamp field, and keeps absolute times", () => {
    const fixture = testFixture();
    fixture.apiKeys[0]!.createdAt = "-P30D";
    fixture.connections[0]!.createdAt = "-P40DT6H";
    fixture.datasets[1]!.lastRefreshedAt = "-PT2H";
    fixture.datasets[1]!.updatedAt = "-PT2H";
    fixture.tables[0]!.updatedAt = "-P1D";
    fixture.tables[0]!.rows[0]!._createdAt = "-P1DT1H";
    fixture.tables[0]!.rows[0]!._updatedAt = "-P1D";
    const f = fixture as Record<string, any>;
    f.dashboards = [
      {
        id: "dash_1",
        teamId: "team_ops",
        name: "D",
        versions: [{ version: 1, published: true, createdAt: "-P10D", updatedAt: "-P9D", publishedAt: "-P9D" }],
      },
    ];
    f.dashboardViews = [{ dashboardId: "dash_1", at: "-PT5M", visitorId: "v1" }];
    f.refreshRuns = [{ datasetId: "ds_stores", startedAt: "-PT2H", durationMs: 10, rowsProcessed: 1 }];
    f.creditUsage = [{ teamId: "team_ops", at: "-P2DT4H", category: "ai_query", credits: 1 }];
    f.auditEvents = [
      { id: "evt_1", teamId: "team_ops", time: "-P3D", category: "audit", action: "dashboard.published" },
      {
        id: "evt_2",
        teamId: "team_ops",
        time: "2026-10-01T09:00:00Z",
        category: "audit",
        action: "dashboard.published",
      },
    ];
    const before = JSON.stringify(fixture);
    const space = parseFixture(fixture, { clock });
    const at = (ms: number) => new Date(Date.parse(NOW) - ms).toISOString();
    const H = 3_600_000;
    const D = 24 * H;
    expect(space.apiKeys[0]!.createdAt).toBe(at(30 * D));
    expect(space.connections[0]!.createdAt).toBe(at(40 * D + 6 * H));
    expect(space.datasets[1]).toMatchObject({ lastRefreshedAt: at(2 * H), updatedAt: at(2 * H) });
    expect(space.tables[0]).toMatchObject({ updatedAt: at(D) });
    expect(space.tables[0]!.rows[0]).toMatchObject({ _createdAt: at(D + H), _updatedAt: at(D) });
    expect(space.dashboards[0]!.versions[0]).toEqual({
      version: 1,
      published: true,
      createdAt: at(10 * D),
      updatedAt: at(9 * D),
      publishedAt: at(9 * D),
    });
    expect(space.dashboardViews[0]!.at).toBe(at(5 * 60_000));
    expect(space.refreshRuns[0]!.startedAt).toBe(at(2 * H));
    expect(space.creditUsage[0]!.at).toBe(at(2 * D + 4 * H));
    expect(space.auditEvents.map((e) => e.time)).toEqual([at(3 * D), "2026-10-01T09:00:00Z"]);
    // The input is left as it was.
    expect(JSON.stringify(fixture)).toBe(before);
    // Another clock, other instants.
    expect(parseFixture(fixture, { clock: createFixedClock("2030-01-01T00:00:00Z") }).refreshRuns[0]!.startedAt).toBe(
      "2029-12-31T22:00:00.000Z",
    );
  });

  it("leaves row values alone, and keeps a row's __proto__ key as a plain key", () => {
    const fixture = JSON.parse(
      JSON.stringify(testFixture()).replace(
        '"region":"EMEA","target":120000',
        '"region":"EMEA","target":120000,"note":"-P2D","__proto__":{"polluted":true}',
      ),
    );
    fixture.tables[0].rows[0]._updatedAt = "-P1D";
    fixture.datasets[0].rows[0].order_id = "-P1D";
    const space = parseFixture(fixture, { clock });
    const row = space.tables[0]!.rows[0]!;
    expect(row.note).toBe("-P2D");
    expect(Object.hasOwn(row, "__proto__")).toBe(true);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    expect(space.datasets[0]!.rows[0]!.order_id).toBe("-P1D");
  });

  it("names the path of a relative time it cannot read", () => {
    const bad = (mutate: (f: Record<string, any>) => void) => {
      const fixture = testFixture() as Record<string, any>;
      mutate(fixture);
      return refusal(fixture);
    };
    const years = bad((f) => (f.apiKeys[1].createdAt = "-P1Y"));
    expect(years.path).toBe("$.apiKeys[1].createdAt");
    expect(years.message).toContain(
      '"-P1Y" is not a relative time: use a signed ISO 8601 duration of weeks, days, hours, minutes and seconds',
    );
    expect(bad((f) => (f.tables[0].rows[0]._createdAt = "-PT")).path).toBe("$.tables[0].rows[0]._createdAt");
    expect(bad((f) => (f.datasets[0].updatedAt = "-P999999999D")).message).toContain("out of range");
    // An absolute time that is wrong is still the schema's to refuse.
    expect(bad((f) => (f.datasets[0].updatedAt = "yesterday")).path).toBe("$.datasets[0].updatedAt");
  });

  it("shares what holds no relative time", () => {
    const fixture = testFixture();
    expect(resolveRelativeTimes(fixture, Date.parse(NOW))).toBe(fixture);
    expect(resolveRelativeTimes(null, 0)).toBeNull();
  });
});
