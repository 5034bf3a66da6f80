import type { Membership } from "../../domain/model.js";
import type { IdentityStore, IdentityWrites, PutResult } from "../../ports/storage/identity.js";
import { compare, pageById } from "./order.js";
import { frozenCopy, type MemoryState } from "./state.js";

/**
 * Businesses, teams, users and memberships. Records are stored as frozen
 * deep copies and handed out as they are: callers cannot change the store
 * through them. A put stores a copy of what it was given.
 */
export function memoryIdentity(state: MemoryState): IdentityStore & IdentityWrites {
  return {
    async getBusiness(id) {
      return orNull(state.businesses.get(id));
    },
    async getTeam(id) {
      return orNull(state.teams.get(id));
    },
    async listBusinessTeams(businessId) {
      return [...state.teams.values()].filter((t) => t.businessId === businessId).sort((a, b) => compare(a.id, b.id));
    },
    async getUser(id) {
      return orNull(state.users.get(id));
    },
    async listMemberships(userId) {
      return [...(state.memberships.get(userId) ?? [])].sort((a, b) => compare(a.teamId, b.teamId));
    },
    async listBusinesses(page) {
      return pageById(state.businesses.values(), page);
    },
    async listTeams(page) {
      return pageById(state.teams.values(), page);
    },
    async listUsers(page) {
      return pageById(state.users.values(), page);
    },

    async putBusiness(business) {
      return put(state.businesses, business);
    },
    async deleteBusiness(id) {
      return state.businesses.delete(id);
    },
    async putTeam(team) {
      return put(state.teams, team);
    },
    async deleteTeam(id) {
      if (!state.teams.has(id)) return false;
      state.teams.delete(id);
      for (const [userId, list] of state.memberships) {
        if (list.some((m) => m.teamId === id))
          setMemberships(
            state,
            userId,
            list.filter((m) => m.teamId !== id),
          );
      }
      return true;
    },
    async putUser(user) {
      return put(state.users, user);
    },
    async deleteUser(id) {
      if (!state.users.has(id)) return false;
      state.users.delete(id);
      state.memberships.delete(id);
      return true;
    },
    async putMembership(membership) {
      const list = state.memberships.get(membership.userId) ?? [];
      const others = list.filter((m) => m.teamId !== membership.teamId);
      setMemberships(state, membership.userId, [...others, membership]);
      return others.length < list.length ? "updated" : "created";
    },
    async deleteMembership(userId, teamId) {
      const list = state.memberships.get(userId) ?? [];
      const others = list.filter((m) => m.teamId !== teamId);
      if (others.length === list.length) return false;
      setMemberships(state, userId, others);
      return true;
    },
  };
}

/** Store a frozen copy under the record's id. */
function put<T extends { id: string }>(map: Map<string, T>, record: T): PutResult {
  const result = map.has(record.id) ? "updated" : "created";
  map.set(record.id, frozenCopy(record));
  return result;
}

/** A user's memberships are one frozen list, replaced whole (none left: no entry). */
function setMemberships(state: MemoryState, userId: string, list: Membership[]): void {
  if (list.length === 0) state.memberships.delete(userId);
  else state.memberships.set(userId, frozenCopy(list));
}

function orNull<T>(value: T | undefined): T | null {
  return value ?? null;
}
