import type { Business, Membership, Team, User } from "../../domain/model.js";

/**
 * A keyset page of a collection, in id order (binary, code-unit order):
 * the items whose id is greater than `after` (null: from the first), at most `limit` (>= 1).
 */
export interface IdPage {
  after: string | null;
  limit: number;
}

/** What a put did: `created` when no object had the id, else `updated` (replaced). */
export type PutResult = "created" | "updated";

/**
 * Businesses, teams, users and memberships: the host's own people and
 * spaces. The read half is what every request needs; a host may supply it
 * from its own tables (`mountStorage(store, { identity: hostIdentity })`).
 * A fault of the store answers 503 `storage_unavailable` (the fault clause on `Storage`).
 */
export interface IdentityStore {
  getBusiness(id: string): Promise<Business | null>;
  getTeam(id: string): Promise<Team | null>;
  /** Every team of a business, ordered by id. */
  listBusinessTeams(businessId: string): Promise<Team[]>;
  getUser(id: string): Promise<User | null>;
  /** The user's memberships, ordered by team id. */
  listMemberships(userId: string): Promise<Membership[]>;
  listBusinesses(page: IdPage): Promise<Business[]>;
  listTeams(page: IdPage): Promise<Team[]>;
  listUsers(page: IdPage): Promise<User[]>;
}

/**
 * Changes to identity. Each call is atomic and visible to the very next read
 * (of this process or any other sharing the store). References (a team's
 * business, a membership's user and team) are checked by the caller.
 */
export interface IdentityWrites {
  /** Creates or replaces the business with `business.id`. */
  putBusiness(business: Business): Promise<PutResult>;
  /** false when it did not exist. The caller refuses while teams still name it. */
  deleteBusiness(id: string): Promise<boolean>;
  /** Creates or replaces the team with `team.id`. */
  putTeam(team: Team): Promise<PutResult>;
  /** Deletes the team and every membership in it, in one transaction; false when it did not exist. */
  deleteTeam(id: string): Promise<boolean>;
  /** Creates or replaces the user with `user.id` (memberships are kept). */
  putUser(user: User): Promise<PutResult>;
  /** Deletes the user and its memberships, in one transaction; false when it did not exist. */
  deleteUser(id: string): Promise<boolean>;
  /** Creates or replaces the membership of (`userId`, `teamId`). */
  putMembership(membership: Membership): Promise<PutResult>;
  /** false when there was none. */
  deleteMembership(userId: string, teamId: string): Promise<boolean>;
}
