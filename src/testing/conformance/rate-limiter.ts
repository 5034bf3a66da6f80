import { afterEach, describe, expect, it } from "vitest";
import type { RateLimiter } from "../../ports/rate-limiter.js";

/** Returns a rate limiter; with `shared`, two calls return limiters over the same buckets. */
export type RateLimiterFactory = () =>
  Promise<RateLimiter & { close?(): Promise<void> }> | (RateLimiter & { close?(): Promise<void> });

export interface RateLimiterConformanceOptions {
  /** Skip the whole suite, with this reason shown. */
  skip?: string;
  /** Limiters from separate factory calls share buckets (a shared store such as Redis). */
  shared?: boolean;
  /** The limiter implements `ping` (a limiter on a server): checked to answer. */
  ping?: boolean;
}

const T0 = Date.parse("2026-11-01T00:00:00.000Z");
let unique = 0;
/** A key no earlier run used, so a shared store needs no cleanup between tests. */
const freshKey = (name: string) => `${name}:${process.pid}:${Date.now()}:${++unique}`;

/**
 * The rate-limiter port's conformance suite: token-bucket arithmetic on the
 * caller's clock, atomic takes under concurrency, independent keys.
 */
export function runRateLimiterConformance(
  name: string,
  factory: RateLimiterFactory,
  options: RateLimiterConformanceOptions = {},
): void {
  describe.skipIf(!!options.skip)(`${name}: rate limiter`, () => {
    const open: Array<{ close?(): Promise<void> }> = [];
    afterEach(async () => {
      await Promise.all(open.splice(0).map((l) => l.close?.()));
    });
    const limiter = async () => {
      const made = await factory();
      open.push(made);
      return made;
    };

    it.skipIf(!options.ping)("answers ping with a round trip to its server", async () => {
      const rl = await limiter();
      expect(typeof rl.ping).toBe("function");
      await expect(rl.ping!()).resolves.toBeUndefined();
    });

    it("allows a burst, then refuses with Retry-After until a token refills", async () => {
      const rl = await limiter();
      const key = freshKey("burst");
      const limit = { ratePerSecond: 1, burst: 3 };
      expect(await rl.take(key, limit, T0)).toEqual({
        allowed: true,
        remaining: 2,
        resetSeconds: 1,
        retryAfterSeconds: 0,
      });
      expect(await rl.take(key, limit, T0)).toEqual({
        allowed: true,
        remaining: 1,
        resetSeconds: 2,
        retryAfterSeconds: 0,
      });
      expect(await rl.take(key, limit, T0)).toEqual({
        allowed: true,
        remaining: 0,
        resetSeconds: 3,
        retryAfterSeconds: 0,
      });
      expect(await rl.take(key, limit, T0)).toEqual({
        allowed: false,
        remaining: 0,
        resetSeconds: 3,
        retryAfterSeconds: 1,
      });
      expect((await rl.take(key, limit, T0 + 500)).allowed).toBe(false);
      const refilled = await rl.take(key, limit, T0 + 1000);
      expect(refilled).toMatchObject({ allowed: true, remaining: 0 });
      expect((await rl.take(key, limit, T0 + 1000)).allowed).toBe(false);
    });

    it("refills at the rate and never beyond the burst", async () => {
      const rl = await limiter();
      const key = freshKey("refill");
      const limit = { ratePerSecond: 2, burst: 4 };
      for (let i = 0; i < 4; i++) expect((await rl.take(key, limit, T0)).allowed).toBe(true);
      // 1.5 s at 2/s: three tokens back.
      expect(await rl.take(key, limit, T0 + 1500)).toMatchObject({ allowed: true, remaining: 2 });
      // An hour later the bucket is full again, not fuller.
      expect(await rl.take(key, limit, T0 + 3_600_000)).toMatchObject({ allowed: true, remaining: 3 });
    });

    it("says how long until a token at a slow rate", async () => {
      const rl = await limiter();
      const key = freshKey("slow");
      const limit = { ratePerSecond: 0.5, burst: 1 };
      expect((await rl.take(key, limit, T0)).allowed).toBe(true);
      expect(await rl.take(key, limit, T0)).toMatchObject({ allowed: false, retryAfterSeconds: 2, resetSeconds: 2 });
      expect((await rl.take(key, limit, T0 + 2000)).allowed).toBe(true);
    });

    it("keeps buckets of different keys apart", async () => {
      const rl = await limiter();
      const a = freshKey("a");
      const b = freshKey("b");
      const limit = { ratePerSecond: 1, burst: 1 };
      expect((await rl.take(a, limit, T0)).allowed).toBe(true);
      expect((await rl.take(a, limit, T0)).allowed).toBe(false);
      expect((await rl.take(b, limit, T0)).allowed).toBe(true);
    });

    it("allows exactly min(N, tokens) of N concurrent takes", async () => {
      const rl = await limiter();
      const key = freshKey("concurrent");
      const limit = { ratePerSecond: 1, burst: 5 };
      const decisions = await Promise.all(Array.from({ length: 20 }, () => rl.take(key, limit, T0)));
      expect(decisions.filter((d) => d.allowed)).toHaveLength(5);
      expect(decisions.filter((d) => !d.allowed).every((d) => d.retryAfterSeconds === 1)).toBe(true);
    });

    it.skipIf(!options.shared)("shares buckets between instances", async () => {
      const first = await limiter();
      const second = await limiter();
      const key = freshKey("shared");
      const limit = { ratePerSecond: 1, burst: 2 };
      const decisions = await Promise.all([first, second, first, second].map((rl) => rl.take(key, limit, T0)));
      expect(decisions.filter((d) => d.allowed)).toHaveLength(2);
    });
  });
}
