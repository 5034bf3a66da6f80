import type { Awaitable } from "../../awaitable.js";
import type { ApiKeyRecord, Business, Membership, Team, User } from "../../domain/model.js";

/** Businesses, teams, users, sessions and API keys. */
export interface IdentityStore {
  getBusiness(id: string): Promise<Business | null>;
  getTeam(id: string): Promise<Team | null>;
  /** Every team of a business, ordered by id. */
  listBusinessTeams(businessId: string): Promise<Team[]>;
  getUser(id: string): Promise<User | null>;
  /** The user's memberships, ordered by team id. */
  listMemberships(userId: string): Promise<Membership[]>;
  /** The user id a session token belongs to, looked up by the token's hex SHA-256. */
  findSessionUser(tokenHash: string): Promise<string | null>;
  /** Looked up by the hex SHA-256 of the token; revoked keys are returned too (the caller refuses them). */
  findApiKeyByHash(tokenHash: string): Promise<ApiKeyRecord | null>;
  /**
   * Optional: the key found as `findApiKeyByHash` finds it, with its team
   * (null when the team is gone), in one call — one round trip on a server
   * database, on every request an API key makes. Without it, authentication
   * calls `findApiKeyByHash` and then `getTeam`. May answer synchronously
   * (a plain value instead of a promise) when the store need not wait.
   */
  findApiKeyWithTeam?(tokenHash: string): Awaitable<{ key: ApiKeyRecord; team: Team | null } | null>;
  getApiKey(id: string): Promise<ApiKeyRecord | null>;
  /** Keys of a team, newest first. */
  listApiKeys(teamId: string): Promise<ApiKeyRecord[]>;
  /** MUST fail (throw) when the id or the token hash already exists. */
  insertApiKey(key: ApiKeyRecord): Promise<void>;
  /** Sets revokedAt (ISO) unless already revoked; returns the key as stored, or null when unknown. */
  revokeApiKey(id: string, revokedAt: string): Promise<ApiKeyRecord | null>;
}
