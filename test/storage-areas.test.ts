import { describe, expect, it } from "vitest";
import { createMemoryStorage } from "../src/memory/index.js";
import type { IdentityStore } from "../src/ports/storage.js";
import { hasKeyWithTeamLookup } from "../src/storage/areas.js";
import { assertWritable, mountStorage } from "../src/storage/mount.js";
import { wrapStoreCalls } from "../src/sql/store-calls.js";

const bounded = { timeoutMs: 5_000, metrics: null };
const team = { id: "team_ops", name: "Ops", plan: "pro", businessId: null, isPersonal: false } as const;

/** The reads of another memory store's identity area, and no writes. */
function readOnlyIdentity(): IdentityStore {
  const { identity } = createMemoryStorage();
  return {
    getBusiness: (id) => identity.getBusiness(id),
    getTeam: (id) => identity.getTeam(id),
    listBusinessTeams: (id) => identity.listBusinessTeams(id),
    getUser: (id) => identity.getUser(id),
    listMemberships: (id) => identity.listMemberships(id),
    listBusinesses: (page) => identity.listBusinesses(page),
    listTeams: (page) => identity.listTeams(page),
    listUsers: (page) => identity.listUsers(page),
  };
}

describe("storage areas", () => {
  it("uses the one-call key lookup only while the identity area is the one it reads, through wrapping too", () => {
    const base = createMemoryStorage();
    const other = createMemoryStorage();
    expect(hasKeyWithTeamLookup(base)).toBe(true);
    expect(hasKeyWithTeamLookup(wrapStoreCalls(base, bounded))).toBe(true);
    expect(hasKeyWithTeamLookup(mountStorage(base, { identity: other.identity }))).toBe(false);
    expect(hasKeyWithTeamLookup(mountStorage(base, { credentials: other.credentials }))).toBe(false);
    expect(hasKeyWithTeamLookup(wrapStoreCalls(mountStorage(base, { identity: other.identity }), bounded))).toBe(false);
    expect(hasKeyWithTeamLookup({ ...base, identity: other.identity })).toBe(false); // plain spread: nothing to delete
  });

  it("answers 405 naming the area for a write a mounted area lacks, before and after the timing wrapper", async () => {
    const mounted = mountStorage(createMemoryStorage(), { identity: readOnlyIdentity() });
    await expect(mounted.identity.putTeam(team)).rejects.toMatchObject({ status: 405, code: "method_not_allowed", message: expect.stringContaining("identity area is read-only") });
    expect(() => assertWritable(mounted.identity, "deleteUser")).toThrow(/identity area is read-only/);
    const timed = wrapStoreCalls(mounted, bounded);
    expect(() => assertWritable(timed.identity, "putTeam")).toThrow(/identity area is read-only/);
    await expect(timed.identity.putTeam(team)).rejects.toMatchObject({ status: 405 });
    // Reads are the host's; the other areas and the lifecycle stay the base store's.
    expect(await timed.identity.getTeam("team_ops")).toBeNull();
    expect(() => assertWritable(timed.catalog, "putDataset")).not.toThrow();
    await expect(timed.ping()).resolves.toBeUndefined();
    // An area is not a promise: awaiting it hands back the area.
    expect(await Promise.resolve(mounted.identity)).toBe(mounted.identity);
  });

  it("keeps a supplied area's own writes, and refuses an area that does not exist", async () => {
    const host = createMemoryStorage();
    const mounted = mountStorage(createMemoryStorage(), { identity: host.identity });
    expect(await mounted.identity.putTeam(team)).toBe("created");
    expect(await host.identity.getTeam("team_ops")).toEqual(team);
    expect(() => mountStorage(createMemoryStorage(), { analytics: {} } as never)).toThrow(/unknown storage area 'analytics'/);
  });
});
