import type { ApiKeyRecord, SessionRecord, Team } from "../../domain/model.js";
import type { IdentityStore } from "./identity.js";

/**
 * Session tokens and API keys: stored as SHA-256 hashes of the plaintext only.
 * A fault of the store answers 503 `storage_unavailable` (the fault clause on `Storage`).
 */
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
 * Optional, on a store that holds identity too: one call instead of two for
 * what every API-key request needs. The core uses it only while the
 * storage's identity area is `teamsFrom` (the area whose teams it reads):
 * with a host's identity (or credentials) area mounted, authentication
 * calls `findApiKeyByHash` and then `identity.getTeam` instead, with
 * nothing to remove by hand.
 */
export interface KeyWithTeamLookup {
  /** The key found as `findApiKeyByHash` finds it, with its team from `teamsFrom` (null when the team is gone). */
  findApiKeyWithTeam?(tokenHash: string): Promise<{ key: ApiKeyRecord; team: Team | null } | null>;
  /** The identity area `findApiKeyWithTeam` reads teams from: the same store's. */
  readonly teamsFrom?: IdentityStore;
}
