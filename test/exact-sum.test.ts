import { describe, expect, it } from "vitest";
import { exactSum } from "../src/domain/exact-sum.js";

const sumOf = (values: readonly number[]) => {
  const sum = exactSum();
  for (const v of values) sum.add(v);
  return sum;
};

/** Python's math.fsum (Shewchuk's partials, then round-half-even): the correctly rounded sum, an independent oracle. */
function fsum(values: readonly number[]): number {
  const partials: number[] = [];
  for (let x of values) {
    let i = 0;
    for (let y of partials) {
      if (Math.abs(x) < Math.abs(y)) [x, y] = [y, x];
      const hi = x + y;
      const lo = y - (hi - x);
      if (lo !== 0) partials[i++] = lo;
      x = hi;
    }
    partials.length = i;
    partials.push(x);
  }
  let n = partials.length;
  if (n === 0) return 0;
  let hi = partials[--n]!;
  let lo = 0;
  while (n > 0) {
    const x = hi;
    const y = partials[--n]!;
    hi = x + y;
    lo = y - (hi - x);
    if (lo !== 0) break;
  }
  if (n > 0 && ((lo < 0 && partials[n - 1]! < 0) || (lo > 0 && partials[n - 1]! > 0))) {
    const y = lo * 2;
    const x = hi + y;
    if (y === x - hi) hi = x;
  }
  return hi;
}

/** A fixed pseudo-random sequence in [0, 1): a failure must be repeatable. */
function random(seed: number): () => number {
  let s = seed;
  return () => (s = (s * 1_103_515_245 + 12_345) % 2 ** 31) / 2 ** 31;
}

describe("exactSum", () => {
  it("is exact where a running sum is not", () => {
    expect(sumOf(Array(10).fill(0.1)).total()).toBe(1);
    expect(
      Array(10)
        .fill(0.1)
        .reduce((a, b) => a + b, 0),
    ).not.toBe(1);
    expect(sumOf([1e16, 1, -1e16]).total()).toBe(1);
    expect(sumOf([0.1, 0.2]).total()).toBe(0.30000000000000004); // the exact sum of the two doubles, a tie, to even
    expect(sumOf([2 ** 53, 1, 1]).total()).toBe(2 ** 53 + 2);
    expect(sumOf([3, -3, 5e-324, 5e-324]).total()).toBe(1e-323);
  });

  it("keeps integers exact up to 2^53 and beyond it rounds once", () => {
    expect(sumOf([2 ** 52, 2 ** 52 - 1]).total()).toBe(2 ** 53 - 1);
    expect(sumOf([9_007_199_254_740_000, 991]).total()).toBe(9_007_199_254_740_991);
    expect(sumOf([2 ** 53, 1, 2 ** 53, 1]).total()).toBe(2 ** 54 + 2);
  });

  it("passes through the double range: only a total beyond it is infinite", () => {
    expect(sumOf([1e308, 1e308, -1e308]).total()).toBe(1e308);
    expect(sumOf([1e308, 1e308]).total()).toBe(Number.POSITIVE_INFINITY);
    expect(sumOf([-1e308, -1e308]).total()).toBe(Number.NEGATIVE_INFINITY);
    expect(sumOf([1e308, 1e308]).mean(2)).toBe(1e308);
  });

  it("means are the exact sum divided once", () => {
    expect(sumOf([1, 2]).mean(3)).toBe(1);
    expect(sumOf([0.1, 0.2, 0.3]).mean(3)).toBe(0.2);
    expect(sumOf([1, 1, 1.5]).mean(3)).toBe(3.5 / 3);
    expect(sumOf([5e-324]).mean(3)).toBe(0);
    expect(sumOf([]).total()).toBe(0);
  });

  it.each([
    ["amounts with cents", (r: () => number) => Math.round(r() * 1e7) / 100],
    ["mixed signs and magnitudes", (r: () => number) => (r() - 0.5) * 10 ** Math.floor(r() * 40 - 20)],
    ["near-cancelling pairs", (r: () => number) => (r() < 0.5 ? 1 : -1) * (1e15 + r())],
  ])("on 100,000 %s: the correctly rounded sum", (_, draw) => {
    const next = random(7);
    const values = Array.from({ length: 100_000 }, () => draw(next));
    expect(sumOf(values).total()).toBe(fsum(values));
  });
});
