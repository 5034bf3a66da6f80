import { describe, expect, it } from "vitest";
import { sha256Hex } from "../../domain/crypto.js";
import { parseFixture } from "../../fixture/load.js";
import { conformanceFixture, TOKENS } from "./fixture.js";
import { type ConformanceOptions, emptyStore, seededStore, type StorageFactory } from "./harness.js";

/** `seed`, `ping` (readiness probes) and `close`: the store as a whole. */
export function describeLifecycleConformance(
  name: string,
  factory: StorageFactory,
  options: ConformanceOptions = {},
): void {
  describe.skipIf(!!options.skip)(`${name}: lifecycle`, () => {
    const seeded = seededStore(factory);
    const empty = emptyStore(factory);

    it("seeds an empty store once and keeps what a second seed would overwrite", async () => {
      const store = await empty();
      expect(await store.seed(parseFixture(conformanceFixture()))).toBe("loaded");
      const changed = conformanceFixture();
      changed.teams[0]!.name = "Renamed";
      expect(await store.seed(parseFixture(changed))).toBe("kept");
      expect((await store.identity.getTeam("team_ops"))?.name).toBe("Operations");
    });

    it("seeds fixture sessions under their derived id, never expiring", async () => {
      const store = await seeded();
      const tokenHash = sha256Hex(TOKENS.sessionAda);
      expect(await store.credentials.getSession(`sess_${tokenHash.slice(0, 24)}`)).toEqual({
        id: `sess_${tokenHash.slice(0, 24)}`,
        tokenHash,
        userId: "usr_ada",
        expiresAt: null,
      });
      expect(await store.credentials.findSessionUser(tokenHash, Date.parse("2100-01-01T00:00:00Z"))).toBe("usr_ada");
    });

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
