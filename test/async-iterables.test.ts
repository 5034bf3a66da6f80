import { describe, expect, it } from "vitest";
import { deferred, mapped, NOTHING } from "../src/domain/async-iterables.js";

describe("async iterables over values in memory", () => {
  it("mapped yields each value as map makes it, when it is asked for, and stops on return", async () => {
    const made: number[] = [];
    const iterable = mapped(["a", "b", "c"], (value, index) => {
      made.push(index);
      return `${value}${index}`;
    });
    expect(made).toEqual([]);
    const out: string[] = [];
    for await (const value of iterable) out.push(value);
    expect(out).toEqual(["a0", "b1", "c2"]);
    expect(made).toEqual([0, 1, 2]);

    // Each iteration starts again; a consumer that breaks early ends it (return) and nothing more is made.
    made.length = 0;
    for await (const value of iterable) {
      expect(value).toBe("a0");
      break;
    }
    expect(made).toEqual([0]);
    const iterator = iterable[Symbol.asyncIterator]();
    expect(await iterator.next()).toEqual({ done: false, value: "a0" });
    expect(await iterator.return!()).toEqual({ done: true, value: undefined });
    expect(await iterator.next()).toEqual({ done: true, value: undefined });
  });

  it("NOTHING yields nothing; deferred makes its iterable only when iterated", async () => {
    const out: unknown[] = [];
    for await (const value of NOTHING) out.push(value);
    expect(out).toEqual([]);

    let made = 0;
    const later = deferred(() => {
      made++;
      return mapped([1, 2], (n) => n * 10);
    });
    expect(made).toBe(0);
    for await (const value of later) out.push(value);
    expect(out).toEqual([10, 20]);
    expect(made).toBe(1);
  });
});
