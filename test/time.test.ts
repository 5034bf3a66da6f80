import { describe, expect, it } from "vitest";
import { isoTime } from "../src/domain/time.js";

describe("isoTime", () => {
  it("writes what Date#toISOString writes, from 1970 to the end of year 9999", () => {
    const edges = [
      0, 1, 999, 1000, 86_399_999, 86_400_000, 951_782_400_000, 951_868_799_999, 951_868_800_000, 1_709_164_800_000,
      4_107_542_400_000, 253_402_300_799_999,
    ];
    // A fixed pseudo-random walk over the range (no Math.random: a failure must be repeatable).
    let seed = 12_345;
    const next = () => (seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31) / 2 ** 31;
    const spread = Array.from({ length: 20_000 }, () => Math.floor(next() * 253_402_300_800_000));
    for (const ms of [...edges, ...spread]) expect([ms, isoTime(ms)]).toEqual([ms, new Date(ms).toISOString()]);
  });

  it("drops a fraction of a millisecond as Date does, and leaves other years and invalid times to Date", () => {
    expect(isoTime(1.75)).toBe("1970-01-01T00:00:00.001Z");
    expect(isoTime(-1)).toBe("1969-12-31T23:59:59.999Z");
    expect(isoTime(253_402_300_800_000)).toBe("+010000-01-01T00:00:00.000Z");
    expect(() => isoTime(Number.NaN)).toThrow(RangeError);
  });
});
