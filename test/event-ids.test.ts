import { describe, expect, it } from "vitest";
import { eventId } from "../src/domain/crypto.js";

describe("audit event ids", () => {
  it("are evt_ + a UUIDv7 whose first 48 bits are the time in ms, unique and in time order across milliseconds", async () => {
    const before = Date.now();
    const first = Array.from({ length: 600 }, eventId);
    await new Promise((r) => setTimeout(r, 5));
    const later = eventId();
    const after = Date.now();
    for (const id of [...first, later])
      expect(id).toMatch(/^evt_[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    const ms = (id: string) => Number.parseInt(id.slice(4, 17).replace("-", ""), 16);
    expect(ms(first[0]!)).toBeGreaterThanOrEqual(before);
    expect(ms(later)).toBeLessThanOrEqual(after);
    expect(ms(later)).toBeGreaterThan(ms(first.at(-1)!));
    expect(later > first.at(-1)!).toBe(true);
    expect(new Set(first).size).toBe(600);
    // 600 ids draw from the random pool more than twice (256 per refill): the random part still differs.
    expect(new Set(first.map((id) => id.slice(-12))).size).toBe(600);
  });
});
