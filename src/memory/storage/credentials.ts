import type { CredentialStore, KeyWithTeamLookup } from "../../ports/storage/credentials.js";
import { compare } from "./order.js";
import { frozenCopy, type MemoryState } from "./state.js";

/**
 * Sessions and API keys, found by the SHA-256 of their token through an
 * index by hash. Like identity records, they are frozen copies handed out
 * as they are.
 */
export function memoryCredentials(state: MemoryState): CredentialStore & KeyWithTeamLookup {
  return {
    async findSessionUser(tokenHash, now) {
      const id = state.sessionIdsByHash.get(tokenHash);
      const session = id === undefined ? undefined : state.sessions.get(id);
      if (!session) return null;
      if (session.expiresAt !== null && Date.parse(session.expiresAt) <= now) return null;
      return session.userId;
    },
    async getSession(id) {
      return state.sessions.get(id) ?? null;
    },
    async insertSession(session) {
      if (state.sessions.has(session.id)) throw new Error(`session ${session.id} already exists`);
      if (state.sessionIdsByHash.has(session.tokenHash)) throw new Error("session token already exists");
      state.sessions.set(session.id, frozenCopy(session));
      state.sessionIdsByHash.set(session.tokenHash, session.id);
    },
    async deleteSession(id) {
      const session = state.sessions.get(id);
      if (!session) return false;
      state.sessions.delete(id);
      state.sessionIdsByHash.delete(session.tokenHash);
      return true;
    },
    async deleteUserSessions(userId) {
      const doomed = [...state.sessions.values()].filter((s) => s.userId === userId);
      for (const session of doomed) {
        state.sessions.delete(session.id);
        state.sessionIdsByHash.delete(session.tokenHash);
      }
      return doomed.length;
    },

    async findApiKeyByHash(tokenHash) {
      const id = state.apiKeyIdsByHash.get(tokenHash);
      return (id === undefined ? undefined : state.apiKeys.get(id)) ?? null;
    },
    async findApiKeyWithTeam(tokenHash) {
      const id = state.apiKeyIdsByHash.get(tokenHash);
      const key = id === undefined ? undefined : state.apiKeys.get(id);
      return key ? { key, team: state.teams.get(key.teamId) ?? null } : null;
    },
    async getApiKey(id) {
      return state.apiKeys.get(id) ?? null;
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
    async markKeysCreatorDeleted(userId) {
      const keys = [...state.apiKeys.values()].filter((k) => k.createdBy === userId && k.creatorDeleted !== true);
      for (const key of keys) state.apiKeys.set(key.id, frozenCopy({ ...key, creatorDeleted: true }));
      return keys.length;
    },
  };
}
