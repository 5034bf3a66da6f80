import { describe, expect, it } from "vitest";
import { hasKeyWithTeamLookup } from "../../storage/areas.js";
import { sha256Hex } from "../../domain/crypto.js";
import type { ApiKeyRecord, SessionRecord } from "../../domain/model.js";
import type { Storage } from "../../ports/storage.js";
import { conformanceFixture, TOKENS } from "./fixture.js";
import { type ConformanceOptions, emptyStore, type StorageFactory } from "./harness.js";

const T = Date.parse("2026-11-01T12:00:00.000Z");
const iso = (ms: number) => new Date(ms).toISOString();

/** The conformance fixture's API keys as stored: the plaintext replaced by its hash. */
function fixtureKeys(): ApiKeyRecord[] {
  return conformanceFixture().apiKeys.map(({ token, ...key }) => ({
    ...key,
    scopes: key.scopes as ApiKeyRecord["scopes"],
    tokenHash: sha256Hex(token),
  }));
}

const session = (id: string, token: string, userId: string, expiresAt: string | null): SessionRecord => ({
  id,
  tokenHash: sha256Hex(token),
  userId,
  expiresAt,
});

/** Ada's session expires at T; Bob's never does. */
const ADA_SESSION = session("sess_ada", TOKENS.sessionAda, "usr_ada", iso(T));
const BOB_SESSION = session("sess_bob", TOKENS.sessionBob, "usr_bob", null);

/** The fixture's keys and two sessions, written through the credentials area's own methods (never `seed`). */
async function writeCredentials(store: Storage): Promise<void> {
  for (const key of fixtureKeys()) await store.credentials.insertApiKey(key);
  await store.credentials.insertSession(ADA_SESSION);
  await store.credentials.insertSession(BOB_SESSION);
}

/**
 * Session tokens and API keys (`CredentialStore`), from an empty store
 * through the area's own methods: usable against a credentials area a host
 * supplies through `mountStorage`.
 */
export function describeCredentialsConformance(
  name: string,
  factory: StorageFactory,
  options: ConformanceOptions = {},
): void {
  describe.skipIf(!!options.skip)(`${name}: credentials`, () => {
    const empty = emptyStore(factory);
    const written = async () => {
      const store = await empty();
      await writeCredentials(store);
      return store;
    };

    it("finds sessions and keys by token hash only", async () => {
      const store = await written();
      expect(await store.credentials.findSessionUser(sha256Hex(TOKENS.sessionAda), T - 1)).toBe("usr_ada");
      expect(await store.credentials.findSessionUser(TOKENS.sessionAda, T - 1)).toBeNull();
      expect(await store.credentials.findSessionUser(sha256Hex("nope"), T - 1)).toBeNull();
      const key = await store.credentials.findApiKeyByHash(sha256Hex(TOKENS.sync));
      expect(key).toMatchObject({ id: "key_sync", name: "Warehouse sync", teamId: "team_ops", revokedAt: null });
      expect(key?.allowlist).toEqual({
        datasets: ["ds_orders", "ds_stores"],
        connections: ["conn_retail"],
        tables: ["tbl_targets"],
      });
      expect(await store.credentials.findApiKeyByHash(sha256Hex("nope"))).toBeNull();
      expect(await store.credentials.findApiKeyByHash(TOKENS.sync)).toBeNull();
      expect((await store.credentials.findApiKeyByHash(sha256Hex(TOKENS.revoked)))?.revokedAt).toBe(
        "2026-09-02T09:00:00Z",
      );
    });

    it("refuses a session at or after its expiry, by the `now` it is given; a session without expiry never expires", async () => {
      const store = await written();
      const ada = sha256Hex(TOKENS.sessionAda);
      expect(await store.credentials.findSessionUser(ada, T - 1)).toBe("usr_ada");
      expect(await store.credentials.findSessionUser(ada, T)).toBeNull();
      expect(await store.credentials.findSessionUser(ada, T + 1)).toBeNull();
      // Time is the caller's: an earlier `now` finds it again.
      expect(await store.credentials.findSessionUser(ada, T - 60_000)).toBe("usr_ada");
      const bob = sha256Hex(TOKENS.sessionBob);
      expect(await store.credentials.findSessionUser(bob, 0)).toBe("usr_bob");
      expect(await store.credentials.findSessionUser(bob, Date.parse("2100-01-01T00:00:00Z"))).toBe("usr_bob");
    });

    it("gets a session by id, expired or not, exactly as inserted", async () => {
      const store = await written();
      expect(await store.credentials.getSession("sess_ada")).toEqual(ADA_SESSION);
      expect(await store.credentials.getSession("sess_bob")).toEqual(BOB_SESSION);
      expect(await store.credentials.getSession("sess_nope")).toBeNull();
      expect(await store.credentials.getSession(ADA_SESSION.tokenHash)).toBeNull();
    });

    it("refuses a session whose id or token hash is taken, and stores nothing of it", async () => {
      const store = await written();
      const sameId = session("sess_ada", "another-token-0001", "usr_bob", null);
      await expect(store.credentials.insertSession(sameId)).rejects.toThrow();
      expect(await store.credentials.findSessionUser(sameId.tokenHash, T - 1)).toBeNull();
      expect(await store.credentials.getSession("sess_ada")).toEqual(ADA_SESSION);
      const sameHash = session("sess_other", TOKENS.sessionAda, "usr_bob", null);
      await expect(store.credentials.insertSession(sameHash)).rejects.toThrow();
      expect(await store.credentials.getSession("sess_other")).toBeNull();
      expect(await store.credentials.findSessionUser(sameHash.tokenHash, T - 1)).toBe("usr_ada");
    });

    it("deletes a session by id at once; false when there was none", async () => {
      const store = await written();
      expect(await store.credentials.deleteSession("sess_ada")).toBe(true);
      expect(await store.credentials.findSessionUser(ADA_SESSION.tokenHash, T - 1)).toBeNull();
      expect(await store.credentials.getSession("sess_ada")).toBeNull();
      expect(await store.credentials.deleteSession("sess_ada")).toBe(false);
      expect(await store.credentials.findSessionUser(BOB_SESSION.tokenHash, T)).toBe("usr_bob");
      // The token hash is free again.
      await store.credentials.insertSession({ ...ADA_SESSION, id: "sess_ada_2" });
      expect(await store.credentials.findSessionUser(ADA_SESSION.tokenHash, T - 1)).toBe("usr_ada");
    });

    it("deletes every session of a user, expired ones included, and says how many", async () => {
      const store = await written();
      await store.credentials.insertSession(
        session("sess_ada_old", "ada-old-token-01", "usr_ada", iso(T - 86_400_000)),
      );
      expect(await store.credentials.deleteUserSessions("usr_ada")).toBe(2);
      expect(await store.credentials.getSession("sess_ada")).toBeNull();
      expect(await store.credentials.getSession("sess_ada_old")).toBeNull();
      expect(await store.credentials.findSessionUser(ADA_SESSION.tokenHash, T - 1)).toBeNull();
      expect(await store.credentials.getSession("sess_bob")).toEqual(BOB_SESSION);
      expect(await store.credentials.deleteUserSessions("usr_ada")).toBe(0);
      expect(await store.credentials.deleteUserSessions("usr_nope")).toBe(0);
    });

    it("gets a key by id and lists a team's keys newest first, then by id", async () => {
      const store = await written();
      expect(await store.credentials.getApiKey("key_ro")).toEqual(fixtureKeys().find((k) => k.id === "key_ro"));
      expect(await store.credentials.getApiKey("key_nope")).toBeNull();
      // key_ro and key_sync share a createdAt: by id.
      expect((await store.credentials.listApiKeys("team_ops")).map((k) => k.id)).toEqual([
        "key_ro",
        "key_sync",
        "key_old",
      ]);
      expect((await store.credentials.listApiKeys("team_mkt")).map((k) => k.id)).toEqual(["key_mkt"]);
      expect(await store.credentials.listApiKeys("team_nope")).toEqual([]);
    });

    it("finds a key with its team in one call, when the store offers it (findApiKeyWithTeam)", async () => {
      const store = await written();
      // Optional, and only for the identity area of the same store: authentication otherwise uses findApiKeyByHash +
      // getTeam.
      if (!hasKeyWithTeamLookup(store) || !store.credentials.findApiKeyWithTeam) return;
      const ops = {
        id: "team_ops",
        name: "Operations",
        plan: "business",
        businessId: "biz_1",
        isPersonal: false,
      } as const;
      await store.identity.putTeam(ops);
      const found = await store.credentials.findApiKeyWithTeam(sha256Hex(TOKENS.sync));
      expect(found?.key).toEqual(await store.credentials.findApiKeyByHash(sha256Hex(TOKENS.sync)));
      expect(found?.team).toEqual(ops);
      expect((await store.credentials.findApiKeyWithTeam(sha256Hex(TOKENS.revoked)))?.key.revokedAt).toBe(
        "2026-09-02T09:00:00Z",
      );
      // team_free was never written: the key comes with team null.
      expect(await store.credentials.findApiKeyWithTeam(sha256Hex(TOKENS.freeTeam))).toEqual({
        key: await store.credentials.getApiKey("key_free"),
        team: null,
      });
      expect(await store.credentials.findApiKeyWithTeam(sha256Hex("nope"))).toBeNull();
      expect(await store.credentials.findApiKeyWithTeam(TOKENS.sync)).toBeNull();
    });

    it("inserts, refuses duplicates and revokes keys", async () => {
      const store = await written();
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
      await store.credentials.insertApiKey(key);
      expect(await store.credentials.getApiKey("key_new")).toEqual(key);
      await expect(store.credentials.insertApiKey(key)).rejects.toThrow();
      await expect(store.credentials.insertApiKey({ ...key, id: "key_other" })).rejects.toThrow();
      expect(await store.credentials.getApiKey("key_other")).toBeNull();
      await expect(store.credentials.insertApiKey({ ...key, tokenHash: sha256Hex("dp_live_other") })).rejects.toThrow();
      expect(await store.credentials.findApiKeyByHash(sha256Hex("dp_live_other"))).toBeNull();
      expect((await store.credentials.listApiKeys("team_ops"))[0]?.id).toBe("key_new");
      const revoked = await store.credentials.revokeApiKey("key_new", "2026-11-02T00:00:00.000Z");
      expect(revoked).toEqual({ ...key, revokedAt: "2026-11-02T00:00:00.000Z" });
      const again = await store.credentials.revokeApiKey("key_new", "2026-11-03T00:00:00.000Z");
      expect(again?.revokedAt).toBe("2026-11-02T00:00:00.000Z");
      expect((await store.credentials.getApiKey("key_new"))?.revokedAt).toBe("2026-11-02T00:00:00.000Z");
      expect((await store.credentials.findApiKeyByHash(key.tokenHash))?.revokedAt).toBe("2026-11-02T00:00:00.000Z");
      expect(await store.credentials.revokeApiKey("key_missing", "2026-11-03T00:00:00.000Z")).toBeNull();
    });

    it("marks the keys a deleted user created, once, and only those", async () => {
      const store = await written();
      expect(await store.credentials.markKeysCreatorDeleted("usr_bob")).toBe(1);
      expect(await store.credentials.getApiKey("key_mkt")).toEqual({
        ...fixtureKeys().find((k) => k.id === "key_mkt"),
        creatorDeleted: true,
      });
      expect((await store.credentials.findApiKeyByHash(sha256Hex(TOKENS.noAdmin)))?.creatorDeleted).toBe(true);
      if (hasKeyWithTeamLookup(store) && store.credentials.findApiKeyWithTeam)
        expect((await store.credentials.findApiKeyWithTeam(sha256Hex(TOKENS.noAdmin)))?.key.creatorDeleted).toBe(true);
      expect((await store.credentials.listApiKeys("team_mkt")).map((k) => k.creatorDeleted)).toEqual([true]);
      // Ada's keys are untouched, and carry no flag at all.
      expect(await store.credentials.getApiKey("key_sync")).not.toHaveProperty("creatorDeleted");
      expect(await store.credentials.markKeysCreatorDeleted("usr_bob")).toBe(0);
      expect(await store.credentials.markKeysCreatorDeleted("usr_nope")).toBe(0);
    });
  });
}
