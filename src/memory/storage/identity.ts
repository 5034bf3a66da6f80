import type { IdentityStore } from "../../ports/storage/identity.js";
import { cloneJson, type MemoryState } from "./state.js";

export function memoryIdentity(state: MemoryState): IdentityStore {
  return {
    async getBusiness(id) {
      return cloneOrNull(state.businesses.get(id));
    },
    async getTeam(id) {
      return cloneOrNull(state.teams.get(id));
    },
    async listBusinessTeams(businessId) {
      return [...state.teams.values()]
        .filter((t) => t.businessId === businessId)
        .sort((a, b) => compare(a.id, b.id))
        .map(cloneJson);
    },
    async getUser(id) {
      return cloneOrNull(state.users.get(id));
    },
    async listMemberships(userId) {
      return [...(state.memberships.get(userId) ?? [])].sort((a, b) => compare(a.teamId, b.teamId)).map(cloneJson);
    },
    async findSessionUser(tokenHash) {
      return state.sessions.get(tokenHash) ?? null;
    },
    async findApiKeyByHash(tokenHash) {
      const id = state.apiKeyIdsByHash.get(tokenHash);
      return id === undefined ? null : cloneOrNull(state.apiKeys.get(id));
    },
    async getApiKey(id) {
      return cloneOrNull(state.apiKeys.get(id));
    },
    async listApiKeys(teamId) {
      return [...state.apiKeys.values()]
        .filter((k) => k.teamId === teamId)
        .sort((a, b) => compare(b.createdAt, a.createdAt) || compare(a.id, b.id))
        .map(cloneJson);
    },
    async insertApiKey(key) {
      if (state.apiKeys.has(key.id)) throw new Error(`api key ${key.id} already exists`);
      if (state.apiKeyIdsByHash.has(key.tokenHash)) throw new Error("api key token already exists");
      state.apiKeys.set(key.id, cloneJson(key));
      state.apiKeyIdsByHash.set(key.tokenHash, key.id);
    },
    async revokeApiKey(id, revokedAt) {
      const key = state.apiKeys.get(id);
      if (!key) return null;
      if (key.revokedAt === null) key.revokedAt = revokedAt;
      return cloneJson(key);
    },
  };
}

function cloneOrNull<T>(value: T | undefined): T | null {
  return value === undefined ? null : cloneJson(value);
}

export function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
