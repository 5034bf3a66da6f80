import { describe, expect, it } from "vitest";
import { type ConformanceOptions, emptyStore, seededStore, type StorageFactory } from "./harness.js";

/** `ping` (readiness probes) and `close`. */
export function describeLifecycleConformance(name: string, factory: StorageFactory, options: ConformanceOptions): void {
  describe.skipIf(!!options.skip)(`${name}: lifecycle`, () => {
    const seeded = seededStore(factory);
    const empty = emptyStore(factory);

    it("answers ping with a round trip while open, empty or seeded", async () => {
      await expect((await empty()).ping()).resolves.toBeUndefined();
      await expect((await seeded()).ping()).resolves.toBeUndefined();
    });

    it("rejects ping once closed (a probe must not report a closed store ready), and closing twice is harmless", async () => {
      const store = await seeded();
      await store.close();
      await expect(store.ping()).rejects.toThrow();
      await expect(store.close()).resolves.toBeUndefined();
    });
  });
}
