import { describe, expect, it } from "vitest";
import type { Business, Membership, Team, User } from "../../domain/model.js";
import type { Storage } from "../../ports/storage.js";
import { type ConformanceOptions, emptyStore, readAllPages, type StorageFactory } from "./harness.js";

const NORTHWIND: Business = { id: "biz_1", name: "Northwind" };
const OPS: Team = { id: "team_ops", name: "Operations", plan: "business", businessId: "biz_1", isPersonal: false };
const MKT: Team = { id: "team_mkt", name: "Marketing", plan: "pro", businessId: "biz_1", isPersonal: false };
const FREE: Team = { id: "team_free", name: "Hobby", plan: "free", businessId: null, isPersonal: true };
const ADA: User = { id: "usr_ada", email: "ada@northwind.test", name: "Ada", businessAdmin: true };
const BOB: User = { id: "usr_bob", email: "bob@northwind.test", name: "Bob", businessAdmin: false };
const MEMBERSHIPS: Membership[] = [
  { userId: "usr_ada", teamId: "team_ops", role: "owner" },
  { userId: "usr_ada", teamId: "team_free", role: "owner" },
  { userId: "usr_bob", teamId: "team_mkt", role: "editor" },
];

/** The conformance fixture's people and teams, written through the identity area's own methods (never `seed`). */
async function writeIdentity(store: Storage): Promise<void> {
  await store.identity.putBusiness(NORTHWIND);
  for (const team of [OPS, MKT, FREE]) await store.identity.putTeam(team);
  for (const user of [ADA, BOB]) await store.identity.putUser(user);
  for (const membership of MEMBERSHIPS) await store.identity.putMembership(membership);
}

const team = (id: string, businessId: string | null = null): Team => ({
  id,
  name: `Team ${id}`,
  plan: "pro",
  businessId,
  isPersonal: false,
});
const user = (id: string): User => ({ id, email: `${id}@example.test`, name: id, businessAdmin: false });

/**
 * Businesses, teams, users and memberships (`IdentityStore` and
 * `IdentityWrites`). Every test starts from an empty store and writes its
 * data through the area's methods, so a host can run this suite against the
 * identity area it supplies: `mountStorage(base, { identity: hostArea })`.
 */
export function describeIdentityConformance(
  name: string,
  factory: StorageFactory,
  options: ConformanceOptions = {},
): void {
  describe.skipIf(!!options.skip)(`${name}: identity`, () => {
    const empty = emptyStore(factory);
    const written = async () => {
      const store = await empty();
      await writeIdentity(store);
      return store;
    };

    it("reads teams, businesses, users and memberships", async () => {
      const store = await written();
      expect(await store.identity.getTeam("team_ops")).toEqual({
        id: "team_ops",
        name: "Operations",
        plan: "business",
        businessId: "biz_1",
        isPersonal: false,
      });
      expect(await store.identity.getTeam("nope")).toBeNull();
      expect(await store.identity.getBusiness("biz_1")).toEqual({ id: "biz_1", name: "Northwind" });
      expect(await store.identity.getBusiness("nope")).toBeNull();
      expect((await store.identity.listBusinessTeams("biz_1")).map((t) => t.id)).toEqual(["team_mkt", "team_ops"]);
      expect(await store.identity.listBusinessTeams("biz_nope")).toEqual([]);
      expect(await store.identity.getUser("usr_ada")).toEqual({
        id: "usr_ada",
        email: "ada@northwind.test",
        name: "Ada",
        businessAdmin: true,
      });
      expect(await store.identity.getUser("nope")).toBeNull();
      expect(await store.identity.listMemberships("usr_ada")).toEqual([
        { userId: "usr_ada", teamId: "team_free", role: "owner" },
        { userId: "usr_ada", teamId: "team_ops", role: "owner" },
      ]);
      expect(await store.identity.listMemberships("usr_nope")).toEqual([]);
    });

    it("answers created for a new id and updated for a known one, and reads back what was put last", async () => {
      const store = await empty();
      expect(await store.identity.putBusiness(NORTHWIND)).toBe("created");
      expect(await store.identity.putBusiness({ id: "biz_1", name: "Northwind Ltd" })).toBe("updated");
      expect(await store.identity.getBusiness("biz_1")).toEqual({ id: "biz_1", name: "Northwind Ltd" });

      expect(await store.identity.putTeam(OPS)).toBe("created");
      expect(
        await store.identity.putTeam({ ...OPS, name: "Ops", plan: "free", businessId: null, isPersonal: true }),
      ).toBe("updated");
      expect(await store.identity.getTeam("team_ops")).toEqual({
        id: "team_ops",
        name: "Ops",
        plan: "free",
        businessId: null,
        isPersonal: true,
      });
      expect(await store.identity.listBusinessTeams("biz_1")).toEqual([]);

      expect(await store.identity.putUser(ADA)).toBe("created");
      expect(await store.identity.putUser({ ...ADA, email: "ada@contoso.test", businessAdmin: false })).toBe("updated");
      expect(await store.identity.getUser("usr_ada")).toEqual({
        id: "usr_ada",
        email: "ada@contoso.test",
        name: "Ada",
        businessAdmin: false,
      });

      expect(await store.identity.putMembership({ userId: "usr_ada", teamId: "team_ops", role: "viewer" })).toBe(
        "created",
      );
      expect(await store.identity.putMembership({ userId: "usr_ada", teamId: "team_ops", role: "admin" })).toBe(
        "updated",
      );
      expect(await store.identity.listMemberships("usr_ada")).toEqual([
        { userId: "usr_ada", teamId: "team_ops", role: "admin" },
      ]);
    });

    it("keeps what was put, whatever the caller does later to the object it passed or got back", async () => {
      const store = await empty();
      const passed = { ...OPS };
      await store.identity.putTeam(passed);
      passed.name = "Changed after the put";
      const read = (await store.identity.getTeam("team_ops"))!;
      Reflect.set(read, "name", "Changed on a read copy");
      expect(await store.identity.getTeam("team_ops")).toEqual(OPS);
      // The user exists first: a host's own tables may enforce the reference (callers check it anyway).
      await store.identity.putUser(ADA);
      const membership = { userId: "usr_ada", teamId: "team_ops", role: "owner" as const };
      await store.identity.putMembership(membership);
      membership.teamId = "team_other";
      const memberships = await store.identity.listMemberships("usr_ada");
      Reflect.apply(Array.prototype.push, memberships, [{ userId: "usr_ada", teamId: "team_x", role: "owner" }]);
      expect(await store.identity.listMemberships("usr_ada")).toEqual([
        { userId: "usr_ada", teamId: "team_ops", role: "owner" },
      ]);
    });

    it("keeps a team's and a user's memberships when either is replaced", async () => {
      const store = await written();
      expect(await store.identity.putTeam({ ...OPS, name: "Ops renamed" })).toBe("updated");
      expect(await store.identity.putUser({ ...ADA, name: "Ada L." })).toBe("updated");
      expect(await store.identity.listMemberships("usr_ada")).toEqual([
        { userId: "usr_ada", teamId: "team_free", role: "owner" },
        { userId: "usr_ada", teamId: "team_ops", role: "owner" },
      ]);
    });

    it("deletes a team with every membership in it, and nothing else", async () => {
      const store = await written();
      await store.identity.putMembership({ userId: "usr_bob", teamId: "team_ops", role: "viewer" });
      expect(await store.identity.deleteTeam("team_ops")).toBe(true);
      expect(await store.identity.getTeam("team_ops")).toBeNull();
      expect(await store.identity.listMemberships("usr_ada")).toEqual([
        { userId: "usr_ada", teamId: "team_free", role: "owner" },
      ]);
      expect(await store.identity.listMemberships("usr_bob")).toEqual([
        { userId: "usr_bob", teamId: "team_mkt", role: "editor" },
      ]);
      expect((await store.identity.listBusinessTeams("biz_1")).map((t) => t.id)).toEqual(["team_mkt"]);
      expect(await store.identity.getUser("usr_ada")).toEqual(ADA);
      expect(await store.identity.deleteTeam("team_ops")).toBe(false);
      // Put back under the same id, it is a new team: its old memberships stay gone.
      expect(await store.identity.putTeam(OPS)).toBe("created");
      expect(await store.identity.listMemberships("usr_ada")).toEqual([
        { userId: "usr_ada", teamId: "team_free", role: "owner" },
      ]);
    });

    it("deletes a user with its memberships, and nothing else", async () => {
      const store = await written();
      expect(await store.identity.deleteUser("usr_ada")).toBe(true);
      expect(await store.identity.getUser("usr_ada")).toBeNull();
      expect(await store.identity.listMemberships("usr_ada")).toEqual([]);
      expect(await store.identity.listMemberships("usr_bob")).toEqual([
        { userId: "usr_bob", teamId: "team_mkt", role: "editor" },
      ]);
      expect(await store.identity.getTeam("team_ops")).toEqual(OPS);
      expect(await store.identity.deleteUser("usr_ada")).toBe(false);
      expect(await store.identity.putUser(ADA)).toBe("created");
      expect(await store.identity.listMemberships("usr_ada")).toEqual([]);
    });

    it("deletes one membership; false when there was none", async () => {
      const store = await written();
      expect(await store.identity.deleteMembership("usr_ada", "team_ops")).toBe(true);
      expect(await store.identity.listMemberships("usr_ada")).toEqual([
        { userId: "usr_ada", teamId: "team_free", role: "owner" },
      ]);
      expect(await store.identity.deleteMembership("usr_ada", "team_ops")).toBe(false);
      expect(await store.identity.deleteMembership("usr_bob", "team_ops")).toBe(false);
      expect(await store.identity.deleteMembership("usr_nope", "team_mkt")).toBe(false);
      expect(await store.identity.getTeam("team_ops")).toEqual(OPS);
      expect(await store.identity.getUser("usr_ada")).toEqual(ADA);
    });

    it("deletes a business; false when unknown", async () => {
      const store = await written();
      await store.identity.putBusiness({ id: "biz_2", name: "Contoso" });
      expect(await store.identity.deleteBusiness("biz_2")).toBe(true);
      expect(await store.identity.getBusiness("biz_2")).toBeNull();
      expect(await store.identity.deleteBusiness("biz_2")).toBe(false);
      expect(await store.identity.getBusiness("biz_1")).toEqual(NORTHWIND);
    });

    it("lists teams by id in binary order, a page at a time after an id", async () => {
      const store = await empty();
      // Binary order: uppercase before lowercase, "1" before "9", "9" before letters, ü after z.
      for (const id of ["team_ops", "team_ü", "team_mkt", "team_9", "Team_Z", "team_free", "team_10"])
        await store.identity.putTeam(team(id));
      const ids = (teams: Team[]) => teams.map((t) => t.id);
      expect(ids(await store.identity.listTeams({ after: null, limit: 3 }))).toEqual(["Team_Z", "team_10", "team_9"]);
      expect(ids(await store.identity.listTeams({ after: "team_9", limit: 3 }))).toEqual([
        "team_free",
        "team_mkt",
        "team_ops",
      ]);
      expect(ids(await store.identity.listTeams({ after: "team_ops", limit: 3 }))).toEqual(["team_ü"]);
      expect(await store.identity.listTeams({ after: "team_ü", limit: 3 })).toEqual([]);
      // `after` need not be a stored id.
      expect(ids(await store.identity.listTeams({ after: "team_a", limit: 100 }))).toEqual([
        "team_free",
        "team_mkt",
        "team_ops",
        "team_ü",
      ]);
      expect(await store.identity.listTeams({ after: null, limit: 1 })).toEqual([team("Team_Z")]);
      expect(ids(await readAllPages((page) => store.identity.listTeams(page), 2))).toEqual([
        "Team_Z",
        "team_10",
        "team_9",
        "team_free",
        "team_mkt",
        "team_ops",
        "team_ü",
      ]);
      await store.identity.deleteTeam("team_mkt");
      expect(ids(await store.identity.listTeams({ after: "team_free", limit: 2 }))).toEqual(["team_ops", "team_ü"]);
    });

    it("lists businesses and users by id, a page at a time", async () => {
      const store = await empty();
      for (const id of ["biz_2", "BIZ_0", "biz_1"]) await store.identity.putBusiness({ id, name: `Business ${id}` });
      expect(await store.identity.listBusinesses({ after: null, limit: 2 })).toEqual([
        { id: "BIZ_0", name: "Business BIZ_0" },
        { id: "biz_1", name: "Business biz_1" },
      ]);
      expect(await store.identity.listBusinesses({ after: "biz_1", limit: 2 })).toEqual([
        { id: "biz_2", name: "Business biz_2" },
      ]);
      for (const id of ["usr_c", "usr_a", "USR_B", "usr_b"]) await store.identity.putUser(user(id));
      expect((await store.identity.listUsers({ after: null, limit: 10 })).map((u) => u.id)).toEqual([
        "USR_B",
        "usr_a",
        "usr_b",
        "usr_c",
      ]);
      expect(await store.identity.listUsers({ after: "usr_a", limit: 1 })).toEqual([user("usr_b")]);
      await store.identity.deleteUser("usr_b");
      expect((await readAllPages((page) => store.identity.listUsers(page), 1)).map((u) => u.id)).toEqual([
        "USR_B",
        "usr_a",
        "usr_c",
      ]);
    });

    it("lists a business's teams by id, only that business's", async () => {
      const store = await written();
      await store.identity.putBusiness({ id: "biz_2", name: "Contoso" });
      for (const id of ["team_b", "Team_A", "team_a"]) await store.identity.putTeam(team(id, "biz_2"));
      expect((await store.identity.listBusinessTeams("biz_2")).map((t) => t.id)).toEqual([
        "Team_A",
        "team_a",
        "team_b",
      ]);
      expect((await store.identity.listBusinessTeams("biz_1")).map((t) => t.id)).toEqual(["team_mkt", "team_ops"]);
      await store.identity.putTeam({ ...team("team_b"), businessId: "biz_1" });
      expect((await store.identity.listBusinessTeams("biz_2")).map((t) => t.id)).toEqual(["Team_A", "team_a"]);
      expect((await store.identity.listBusinessTeams("biz_1")).map((t) => t.id)).toEqual([
        "team_b",
        "team_mkt",
        "team_ops",
      ]);
    });
  });
}
