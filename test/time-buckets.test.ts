import { describe, expect, it } from "vitest";
import { TIME_UNITS, timeBucket } from "../src/domain/time-buckets.js";

const all = (value: unknown) => Object.fromEntries(TIME_UNITS.map((unit) => [unit, timeBucket(unit, value)]));

describe("timeBucket", () => {
  it("cuts a datetime to each unit, as strings", () => {
    expect(all("2026-03-05T14:30:15.123Z")).toEqual({
      hour: "2026-03-05T14",
      day: "2026-03-05",
      week: "2026-03-02",
      month: "2026-03",
      quarter: "2026-Q1",
      year: "2026",
    });
  });

  it("a date's hour is T00; its week the Monday on or before it", () => {
    expect(all("2026-03-08")).toEqual({
      hour: "2026-03-08T00",
      day: "2026-03-08",
      week: "2026-03-02",
      month: "2026-03",
      quarter: "2026-Q1",
      year: "2026",
    });
    expect(timeBucket("week", "2026-03-09")).toBe("2026-03-09");
    expect(timeBucket("week", "2026-01-01")).toBe("2025-12-29");
    expect(timeBucket("week", "2024-03-01")).toBe("2024-02-26");
    expect(timeBucket("week", "0000-01-03")).toBe("0000-01-03");
    expect(timeBucket("week", "0000-01-01")).toBeNull(); // its Monday is in the year -1
  });

  it("converts an offset to UTC, across days, months and years; no offset is UTC", () => {
    expect(timeBucket("hour", "2026-03-05T01:30+02:00")).toBe("2026-03-04T23");
    expect(timeBucket("hour", "2026-12-31T23:30-01:00")).toBe("2027-01-01T00");
    expect(timeBucket("day", "2024-03-01T00:59+01:00")).toBe("2024-02-29");
    expect(timeBucket("day", "2023-03-01T00:59+01:00")).toBe("2023-02-28");
    expect(timeBucket("quarter", "2026-03-31T23:00-02:00")).toBe("2026-Q2");
    expect(timeBucket("hour", "2026-03-05T14:30")).toBe("2026-03-05T14");
    expect(timeBucket("hour", "2026-03-05T14:30:59.999999999+00:00")).toBe("2026-03-05T14");
    expect(timeBucket("year", "9999-12-31T23:00-01:00")).toBeNull(); // the year 10000
    expect(timeBucket("year", "0000-01-01T00:30+01:00")).toBeNull(); // the year -1
  });

  it.each([
    ["a number", 20260305],
    ["null", null],
    ["a boolean", true],
    ["an object", { at: "2026-03-05" }],
    ["a space for T", "2026-03-05 14:30"],
    ["an offset without a colon", "2026-03-05T14:30+0200"],
    ["a month", "2026-03"],
    ["lower-case t", "2026-03-05t14:30"],
    ["lower-case z", "2026-03-05T14:30z"],
    ["an offset on a date", "2026-03-05Z"],
    ["ten digits of a second", "2026-03-05T14:30:00.1234567890"],
    ["an empty fraction", "2026-03-05T14:30:00."],
    ["hours only", "2026-03-05T14"],
    ["February 30", "2026-02-30"],
    ["February 29 of a common year", "2100-02-29"],
    ["month 13", "2026-13-01"],
    ["day 0", "2026-03-00"],
    ["hour 24", "2026-03-05T24:30"],
    ["minute 60", "2026-03-05T14:60"],
    ["second 60", "2026-03-05T14:30:60"],
    ["an offset of 24 hours", "2026-03-05T14:30+24:00"],
    ["non-ASCII digits", "２０２６-03-05"],
    ["a trailing line break", "2026-03-05\n"],
  ])("%s is in the null bucket", (_, value) => {
    for (const unit of TIME_UNITS) expect(timeBucket(unit, value)).toBeNull();
  });

  it("agrees with Date on 20,000 datetimes with offsets from the years 0001 to 9998", () => {
    let seed = 4242;
    const next = (n: number) => (seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31) % n;
    const two = (n: number) => String(n).padStart(2, "0");
    let compared = 0;
    for (let i = 0; i < 20_000; i++) {
      const year = 1 + next(9998);
      const month = 1 + next(12);
      const day = 1 + next(31);
      const text = `${String(year).padStart(4, "0")}-${two(month)}-${two(day)}T${two(next(24))}:${two(next(60))}:${two(next(60))}${
        ["Z", "", `+${two(next(24))}:${two(next(60))}`, `-${two(next(24))}:${two(next(60))}`][next(4)]
      }`;
      const leap = year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0);
      if (day > [31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][month - 1]!) {
        expect([text, timeBucket("hour", text)]).toEqual([text, null]);
        continue;
      }
      const date = new Date(/Z|[+-]\d\d:\d\d$/.test(text) ? text : `${text}Z`);
      const iso = date.toISOString();
      const monday = new Date(date.getTime() - ((date.getUTCDay() + 6) % 7) * 86_400_000).toISOString();
      const y = date.getUTCFullYear();
      const expected = {
        hour: iso.slice(0, 13),
        day: iso.slice(0, 10),
        week: monday.slice(0, 10),
        month: iso.slice(0, 7),
        quarter: `${iso.slice(0, 4)}-Q${Math.floor(date.getUTCMonth() / 3) + 1}`,
        year: iso.slice(0, 4),
      };
      if (y < 1 || y > 9998) continue; // toISOString writes other years with six digits
      expect([text, all(text)]).toEqual([text, expected]);
      compared++;
    }
    expect(compared).toBeGreaterThan(19_000);
  });
});
