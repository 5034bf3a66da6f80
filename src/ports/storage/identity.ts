import type { ApiKeyRecord, Business, Membership, SessionRecord, Team, User } from "../../domain/model.js";

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
 * from its own tables (see `mountStorage`).
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

/** Session tokens and API keys: stored as SHA-256 hashes of the plaintext only. */
export interface CredentialStore {
  /**
   * The user id of the session whose token has this hex SHA-256, or null
   * when there is none or it has expired (`expiresAt` at or before `now`,
   * epoch ms).
   */
  findSessionUser(tokenHash: string, now: number): Promise<string | null>;
  /** A session by id (expired ones too), or null. */
  getSession(id: string): Promise<SessionRecord | null>;
  /** MUST fail (throw) when the id or the token hash already exists. */
  insertSession(session: SessionRecord): Promise<void>;
  /** false when there was none. */
  deleteSession(id: string): Promise<boolean>;
  /** Deletes every session of the user; returns how many. */
  deleteUserSessions(userId: string): Promise<number>;
  /** Looked up by the hex SHA-256 of the token; revoked keys are returned too (the caller refuses them). */
  findApiKeyByHash(tokenHash: string): Promise<ApiKeyRecord | null>;
  getApiKey(id: string): Promise<ApiKeyRecord | null>;
  /** Keys of a team, newest first (`createdAt` descending, then id). */
  listApiKeys(teamId: string): Promise<ApiKeyRecord[]>;
  /** MUST fail (throw) when the id or the token hash already exists. */
  insertApiKey(key: ApiKeyRecord): Promise<void>;
  /** Sets revokedAt (ISO) unless already revoked; returns the key as stored, or null when unknown. */
  revokeApiKey(id: string, revokedAt: string): Promise<ApiKeyRecord | null>;
  /**
   * Marks every key `userId` created as `creatorDeleted` (the user was
   * deleted; a user created later with the same id is someone else). Keys
   * created afterwards by a new user of that id are not marked. Returns how
   * many keys were marked now.
   */
  markKeysCreatorDeleted(userId: string): Promise<number>;
}

/**
 * Optional, on a store that holds both identity and credentials: the key
 * found as `findApiKeyByHash` finds it, with its team (null when the team
 * is gone), in one call. Without it, authentication calls
 * `findApiKeyByHash` and then `getTeam`.
 */
export interface KeyWithTeamLookup {
  findApiKeyWithTeam?(tokenHash: string): Promise<{ key: ApiKeyRecord; team: Team | null } | null>;
}
