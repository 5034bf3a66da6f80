import { describe, expect, it } from "vitest";
import { sha256Hex } from "../../domain/crypto.js";
import type { ApiKeyRecord } from "../../domain/model.js";
import { type ConformanceOptions, emptyStore, seededStore, type StorageFactory } from "./harness.js";
import { TOKENS } from "./fixture.js";

export function describeIdentityConformance(name: string, factory: StorageFactory, options: ConformanceOptions): void {
  describe.skipIf(!!options.skip)(`${name}: identity`, () => {
    const seeded = seededStore(factory);
    const empty = emptyStore(factory);

    it("seeds an empty store once and keeps what a second seed would overwrite", async () => {
      const store = await seeded();
      const { parseFixture } = await import("../../fixture/load.js");
      const { conformanceFixture } = await import("./fixture.js");
      const changed = conformanceFixture();
      changed.teams[0]!.name = "Renamed";
      expect(await store.seed(parseFixture(changed))).toBe("kept");
      expect((await store.getTeam("team_ops"))?.name).toBe("Operations");
    });

    it("reads teams, businesses, users and memberships", async () => {
      const store = await seeded();
      expect(await store.getTeam("team_ops")).toEqual({ id: "team_ops", name: "Operations", plan: "business", businessId: "biz_1", isPersonal: false });
      expect(await store.getTeam("nope")).toBeNull();
      expect(await store.getBusiness("biz_1")).toEqual({ id: "biz_1", name: "Northwind" });
      expect((await store.listBusinessTeams("biz_1")).map((t) => t.id)).toEqual(["team_mkt", "team_ops"]);
      expect(await store.getUser("usr_ada")).toEqual({ id: "usr_ada", email: "ada@northwind.test", name: "Ada", businessAdmin: true });
      expect(await store.listMemberships("usr_ada")).toEqual([
        { userId: "usr_ada", teamId: "team_free", role: "owner" },
        { userId: "usr_ada", teamId: "team_ops", role: "owner" },
      ]);
    });

    it("finds sessions and keys by token hash only", async () => {
      const store = await seeded();
      expect(await store.findSessionUser(sha256Hex(TOKENS.sessionAda))).toBe("usr_ada");
      expect(await store.findSessionUser(TOKENS.sessionAda)).toBeNull();
      const key = await store.findApiKeyByHash(sha256Hex(TOKENS.sync));
      expect(key).toMatchObject({ id: "key_sync", name: "Warehouse sync", teamId: "team_ops", revokedAt: null });
      expect(key?.allowlist).toEqual({ datasets: ["ds_orders", "ds_stores"], connections: ["conn_retail"], tables: ["tbl_targets"] });
      expect(await store.findApiKeyByHash(sha256Hex("nope"))).toBeNull();
      expect((await store.findApiKeyByHash(sha256Hex(TOKENS.revoked)))?.revokedAt).toBe("2026-09-02T09:00:00Z");
    });

    it("finds a key with its team in one call, when the store offers it (findApiKeyWithTeam)", async () => {
      const store = await seeded();
      if (!store.findApiKeyWithTeam) return; // optional: authentication then uses findApiKeyByHash + getTeam
      const found = await store.findApiKeyWithTeam(sha256Hex(TOKENS.sync));
      expect(found?.key).toEqual(await store.findApiKeyByHash(sha256Hex(TOKENS.sync)));
      expect(found?.team).toEqual(await store.getTeam("team_ops"));
      expect(found?.team).toMatchObject({ id: "team_ops", plan: expect.any(String) });
      expect((await store.findApiKeyWithTeam(sha256Hex(TOKENS.revoked)))?.key.revokedAt).toBe("2026-09-02T09:00:00Z");
      expect(await store.findApiKeyWithTeam(sha256Hex("nope"))).toBeNull();
      expect(await store.findApiKeyWithTeam(TOKENS.sync)).toBeNull();
    });

    it("inserts, refuses duplicates and revokes keys", async () => {
      const store = await empty();
      const { parseFixture } = await import("../../fixture/load.js");
      const { conformanceFixture } = await import("./fixture.js");
      await store.seed(parseFixture(conformanceFixture()));
      const key: ApiKeyRecord = {
        id: "key_new",
        name: "New",
        teamId: "team_ops",
        tokenHash: sha256Hex("dp_live_new"),
        createdBy: "usr_ada",
        scopes: ["data:read"],
        allowlist: { datasets: ["ds_orders"], connections: [], tables: [] },
        createdAt: "2026-11-01T00:00:00.000Z",
        revokedAt: null,
      };
      await store.insertApiKey(key);
      expect(await store.getApiKey("key_new")).toEqual(key);
      await expect(store.insertApiKey(key)).rejects.toThrow();
      await expect(store.insertApiKey({ ...key, id: "key_other" })).rejects.toThrow();
      expect((await store.listApiKeys("team_ops"))[0]?.id).toBe("key_new");
      const revoked = await store.revokeApiKey("key_new", "2026-11-02T00:00:00.000Z");
      expect(revoked?.revokedAt).toBe("2026-11-02T00:00:00.000Z");
      const again = await store.revokeApiKey("key_new", "2026-11-03T00:00:00.000Z");
      expect(again?.revokedAt).toBe("2026-11-02T00:00:00.000Z");
      expect(await store.revokeApiKey("key_missing", "2026-11-03T00:00:00.000Z")).toBeNull();
    });
  });
}
