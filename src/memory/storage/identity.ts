import type { IdentityStore } from "../../ports/storage/identity.js";
import { frozenCopy, type MemoryState } from "./state.js";

/**
 * Identity records are stored as frozen deep copies and handed out as they
 * are: callers cannot change the store through them, and the hot
 * authentication path does not pay for a clone per lookup.
 */
export function memoryIdentity(state: MemoryState): IdentityStore {
  return {
    async getBusiness(id) {
      return orNull(state.businesses.get(id));
    },
    async getTeam(id) {
      return orNull(state.teams.get(id));
    },
    async listBusinessTeams(businessId) {
      return [...state.teams.values()]
        .filter((t) => t.businessId === businessId)
        .sort((a, b) => compare(a.id, b.id));
    },
    async getUser(id) {
      return orNull(state.users.get(id));
    },
    async listMemberships(userId) {
      return [...(state.memberships.get(userId) ?? [])].sort((a, b) => compare(a.teamId, b.teamId));
    },
    async findSessionUser(tokenHash) {
      return state.sessions.get(tokenHash) ?? null;
    },
    async findApiKeyByHash(tokenHash) {
      const id = state.apiKeyIdsByHash.get(tokenHash);
      return id === undefined ? null : orNull(state.apiKeys.get(id));
    },
    // Synchronous: authentication continues without a microtask hop.
    findApiKeyWithTeam(tokenHash) {
      const id = state.apiKeyIdsByHash.get(tokenHash);
      const key = id === undefined ? undefined : state.apiKeys.get(id);
      return key ? { key, team: orNull(state.teams.get(key.teamId)) } : null;
    },
    async getApiKey(id) {
      return orNull(state.apiKeys.get(id));
    },
    async listApiKeys(teamId) {
      return [...state.apiKeys.values()]
        .filter((k) => k.teamId === teamId)
        .sort((a, b) => compare(b.createdAt, a.createdAt) || compare(a.id, b.id));
    },
    async insertApiKey(key) {
      if (state.apiKeys.has(key.id)) throw new Error(`api key ${key.id} already exists`);
      if (state.apiKeyIdsByHash.has(key.tokenHash)) throw new Error("api key token already exists");
      state.apiKeys.set(key.id, frozenCopy(key));
      state.apiKeyIdsByHash.set(key.tokenHash, key.id);
    },
    async revokeApiKey(id, revokedAt) {
      const key = state.apiKeys.get(id);
      if (!key) return null;
      if (key.revokedAt !== null) return key;
      const revoked = frozenCopy({ ...key, revokedAt });
      state.apiKeys.set(id, revoked);
      return revoked;
    },
  };
}

function orNull<T>(value: T | undefined): T | null {
  return value ?? null;
}

export function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
