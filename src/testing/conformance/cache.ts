import { afterEach, describe, expect, it } from "vitest";
import { type Clock, systemClock } from "../../base/clock.js";
import { createFixedClock } from "../../memory/fixed-clock.js";
import type { Cache } from "../../ports/cache.js";

/**
 * Returns a cache whose TTLs are measured on `clock`. A cache that measures
 * time on its own server (Redis) uses the clock where it can and real time
 * otherwise: the suite checks expiry both on a moved clock and in real time.
 */
export type CacheFactory = (options: {
  clock: Clock;
}) => Promise<Cache & { close?(): Promise<void> }> | (Cache & { close?(): Promise<void> });

export interface CacheConformanceOptions {
  /** Skip the whole suite, with this reason shown. */
  skip?: string;
  /** Caches from separate factory calls share entries (a shared store such as Redis). */
  shared?: boolean;
  /** The cache implements `ping` (a cache on a server): checked to answer. */
  ping?: boolean;
  /**
   * The cache implements `claimFlight`/`releaseFlight`: checked to be atomic across instances (with `shared`) and held
   * by token.
   */
  flights?: boolean;
}

let unique = 0;
const freshKey = (name: string) => `${name}:${process.pid}:${Date.now()}:${++unique}`;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** The cache port's conformance suite. */
export function runCacheConformance(name: string, factory: CacheFactory, options: CacheConformanceOptions = {}): void {
  describe.skipIf(!!options.skip)(`${name}: cache`, () => {
    const open: Array<{ close?(): Promise<void> }> = [];
    afterEach(async () => {
      await Promise.all(open.splice(0).map((c) => c.close?.()));
    });
    const cache = async (clock: Clock = systemClock) => {
      const made = await factory({ clock });
      open.push(made);
      return made;
    };

    it.skipIf(!options.ping)("answers ping with a round trip to its server", async () => {
      const c = await cache();
      expect(typeof c.ping).toBe("function");
      await expect(c.ping!()).resolves.toBeUndefined();
    });

    it.skipIf(!options.flights)(
      "claims a flight for one caller at a time, and gives it back only to its holder's token",
      async () => {
        const [a, b] = [await cache(), options.shared ? await cache() : undefined];
        const other = b ?? a;
        const name = freshKey("flight");
        // Ten claims at once, half through another instance when the cache is shared: exactly one wins.
        const claims = await Promise.all(
          Array.from({ length: 10 }, (_, i) => (i % 2 ? other : a).claimFlight!(name, 5_000)),
        );
        const winners = claims.filter((token): token is string => token !== null);
        expect(winners).toHaveLength(1);
        await a.releaseFlight!(name, "not-the-token");
        expect(await other.claimFlight!(name, 5_000)).toBeNull();
        await other.releaseFlight!(name, winners[0]!);
        const next = await a.claimFlight!(name, 5_000);
        expect(typeof next).toBe("string");
        expect(next).not.toBe(winners[0]);
      },
    );

    it.skipIf(!options.flights)("lets a claimed flight lapse after its time", async () => {
      const c = await cache();
      const name = freshKey("lapse");
      expect(typeof (await c.claimFlight!(name, 100))).toBe("string");
      await sleep(250);
      expect(typeof (await c.claimFlight!(name, 100))).toBe("string");
    });

    it("returns what was set, as JSON values, and undefined for a missing key", async () => {
      const c = await cache();
      const key = freshKey("value");
      expect(await c.get(key)).toBeUndefined();
      const value = { features: [{ id: 1, name: "Lyon", tags: ["a", "b"] }], total: 2.5, ok: true, none: null };
      await c.set(key, value, 60);
      expect(await c.get(key)).toEqual(value);
      const nullKey = freshKey("null");
      await c.set(nullKey, null, 60);
      expect(await c.get(nullKey)).toBeNull();
    });

    it("overwrites and deletes entries, keeping keys apart", async () => {
      const c = await cache();
      const a = freshKey("a");
      const b = freshKey("b");
      await c.set(a, "first", 60);
      await c.set(b, "other", 60);
      await c.set(a, "second", 60);
      expect(await c.get(a)).toBe("second");
      await c.delete(a);
      expect(await c.get(a)).toBeUndefined();
      expect(await c.get(b)).toBe("other");
      await c.delete(freshKey("never-set"));
    });

    it("does not return an entry once its TTL has passed on the injected clock", async () => {
      const clock = createFixedClock("2026-11-01T00:00:00.000Z");
      const c = await cache(clock);
      const key = freshKey("clock");
      await c.set(key, 42, 30);
      clock.advance(29_000);
      expect(await c.get(key)).toBe(42);
      clock.advance(1_001);
      expect(await c.get(key)).toBeUndefined();
    });

    it("expires entries in real time with a sub-second TTL", async () => {
      const c = await cache(systemClock);
      const key = freshKey("real");
      await c.set(key, "soon gone", 0.15);
      expect(await c.get(key)).toBe("soon gone");
      await sleep(300);
      expect(await c.get(key)).toBeUndefined();
    });

    it.skipIf(!options.shared)("shares entries between instances", async () => {
      const first = await cache();
      const second = await cache();
      const key = freshKey("shared");
      await first.set(key, { n: 1 }, 60);
      expect(await second.get(key)).toEqual({ n: 1 });
      await second.delete(key);
      expect(await first.get(key)).toBeUndefined();
    });
  });
}
