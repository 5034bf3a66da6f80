import type { z } from "zod";
import { randomId, sha256Hex } from "../domain/crypto.js";
import type { Business, Membership, Team, User } from "../domain/model.js";
import { isoTime } from "../domain/time.js";
import { ApiError, notFound } from "../base/api-error.js";
import { assertWritable } from "../storage/mount.js";
import {
  type AdminDeps,
  actorFor,
  type ChangeOptions,
  checkId,
  type ListOptions,
  type ListPage,
  listPage,
  type Put,
  putAction,
  recordChange,
  requireRef,
} from "./change.js";
import { businessBody, membershipBody, parseBody, sessionBody, teamBody, userBody } from "./schemas.js";

/** How long an admin-issued session lasts when the request does not say: 30 days. */
export const DEFAULT_SESSION_SECONDS = 30 * 24 * 3600;

export type BusinessInput = z.input<typeof businessBody>;
export type TeamInput = z.input<typeof teamBody>;
export type UserInput = z.input<typeof userBody>;
export type MembershipInput = z.input<typeof membershipBody>;
export type SessionInput = z.input<typeof sessionBody>;

/** A session as the admin API shows it: never the token (only its hash is kept). */
export interface SessionInfo {
  id: string;
  userId: string;
  expiresAt: string | null;
}

/** Businesses, teams, users, memberships and sessions. */
export interface IdentityAdmin {
  putBusiness(id: string, input: BusinessInput, options?: ChangeOptions): Promise<Put<Business>>;
  getBusiness(id: string): Promise<Business>;
  listBusinesses(options?: ListOptions): Promise<ListPage<Business>>;
  /** 409 `conflict` while teams still belong to it. */
  deleteBusiness(id: string, options?: ChangeOptions): Promise<void>;
  /** A plan change applies to the team's next call. */
  putTeam(id: string, input: TeamInput, options?: ChangeOptions): Promise<Put<Team>>;
  getTeam(id: string): Promise<Team>;
  listTeams(options?: ListOptions): Promise<ListPage<Team>>;
  /** Its keys are revoked, its memberships, connections, datasets, tables and dashboards deleted. */
  deleteTeam(id: string, options?: ChangeOptions): Promise<void>;
  putUser(id: string, input: UserInput, options?: ChangeOptions): Promise<Put<User>>;
  getUser(id: string): Promise<User>;
  listUsers(options?: ListOptions): Promise<ListPage<User>>;
  /** Its memberships and sessions go with it; keys it created keep working. */
  deleteUser(id: string, options?: ChangeOptions): Promise<void>;
  putMembership(
    userId: string,
    teamId: string,
    input: MembershipInput,
    options?: ChangeOptions,
  ): Promise<Put<Membership>>;
  getMembership(userId: string, teamId: string): Promise<Membership>;
  listMemberships(userId: string): Promise<Membership[]>;
  deleteMembership(userId: string, teamId: string, options?: ChangeOptions): Promise<void>;
  /**
   * Issue a session token for a user (expiring after `expiresInSeconds`, default 30 days). The plaintext is returned
   * once; only its SHA-256 is kept.
   */
  createSession(input: SessionInput, options?: ChangeOptions): Promise<SessionInfo & { token: string }>;
  getSession(id: string): Promise<SessionInfo>;
  deleteSession(id: string, options?: ChangeOptions): Promise<void>;
}

export function identityAdmin(deps: AdminDeps): IdentityAdmin {
  const { storage, clock } = deps.ports;

  async function teamsOfUser(userId: string): Promise<string[]> {
    return (await storage.identity.listMemberships(userId)).map((m) => m.teamId);
  }

  async function existing<T>(found: Promise<T | null>, what: string): Promise<T> {
    const value = await found;
    if (value === null) throw notFound(what);
    return value;
  }

  return {
    async putBusiness(id, input, options) {
      assertWritable(storage.identity, "putBusiness");
      checkId(id);
      const business: Business = { id, ...parseBody(businessBody, input) };
      const actor = await actorFor(storage, options);
      const created = (await storage.identity.putBusiness(business)) === "created";
      const teams = (await storage.identity.listBusinessTeams(id)).map((t) => t.id);
      await recordChange(deps, {
        teamIds: teams,
        action: putAction("business", created),
        actor,
        target: { type: "business", id },
      });
      return { created, value: business };
    },
    getBusiness: (id) => existing(storage.identity.getBusiness(id), "business"),
    listBusinesses: (options) => listPage(options, (page) => storage.identity.listBusinesses(page)),
    async deleteBusiness(id, options) {
      assertWritable(storage.identity, "deleteBusiness");
      const actor = await actorFor(storage, options);
      await existing(storage.identity.getBusiness(id), "business");
      const teams = await storage.identity.listBusinessTeams(id);
      if (teams.length > 0) {
        throw new ApiError(409, "conflict", `business ${id} still has teams; move or delete them first`, {
          details: { teams: teams.map((t) => t.id) },
        });
      }
      if (!(await storage.identity.deleteBusiness(id))) throw notFound("business");
      await recordChange(deps, { teamIds: [], action: "business.deleted", actor, target: { type: "business", id } });
    },

    async putTeam(id, input, options) {
      assertWritable(storage.identity, "putTeam");
      checkId(id);
      const body = parseBody(teamBody, input);
      if (body.businessId !== null)
        requireRef(await storage.identity.getBusiness(body.businessId), "$.businessId", "business", body.businessId);
      const actor = await actorFor(storage, options);
      const team: Team = { id, ...body };
      const created = (await storage.identity.putTeam(team)) === "created";
      await recordChange(deps, {
        teamIds: [id],
        action: putAction("team", created),
        actor,
        target: { type: "team", id },
        details: { plan: team.plan },
      });
      return { created, value: team };
    },
    getTeam: (id) => existing(storage.identity.getTeam(id), "team"),
    listTeams: (options) => listPage(options, (page) => storage.identity.listTeams(page)),
    async deleteTeam(id, options) {
      assertWritable(storage.identity, "deleteTeam");
      const actor = await actorFor(storage, options);
      await existing(storage.identity.getTeam(id), "team");
      // The team first: from here on its keys and memberships reach nothing; then what it owned.
      if (!(await storage.identity.deleteTeam(id))) throw notFound("team");
      const now = isoTime(clock.now());
      for (const key of await storage.credentials.listApiKeys(id))
        if (key.revokedAt === null) await storage.credentials.revokeApiKey(key.id, now);
      for (const dashboard of await storage.dashboards.listDashboards([id]))
        await storage.dashboards.deleteDashboard(dashboard.id);
      for (const dataset of await storage.catalog.listDatasets({ teamId: id })) {
        if (dataset.type === "input_table") await storage.tables.deleteTable(dataset.id);
        else await storage.catalog.deleteDataset(dataset.id);
      }
      for (const connection of await storage.catalog.listConnections(id))
        await storage.catalog.deleteConnection(connection.id);
      await recordChange(deps, { teamIds: [id], action: "team.deleted", actor, target: { type: "team", id } });
    },

    async putUser(id, input, options) {
      assertWritable(storage.identity, "putUser");
      checkId(id);
      const user: User = { id, ...parseBody(userBody, input) };
      const actor = await actorFor(storage, options);
      const created = (await storage.identity.putUser(user)) === "created";
      await recordChange(deps, {
        teamIds: await teamsOfUser(id),
        action: putAction("user", created),
        actor,
        target: { type: "user", id },
      });
      return { created, value: user };
    },
    getUser: (id) => existing(storage.identity.getUser(id), "user"),
    listUsers: (options) => listPage(options, (page) => storage.identity.listUsers(page)),
    async deleteUser(id, options) {
      assertWritable(storage.identity, "deleteUser");
      const actor = await actorFor(storage, options);
      await existing(storage.identity.getUser(id), "user");
      const teams = await teamsOfUser(id);
      if (!(await storage.identity.deleteUser(id))) throw notFound("user");
      await storage.credentials.deleteUserSessions(id);
      await storage.credentials.markKeysCreatorDeleted(id);
      await recordChange(deps, { teamIds: teams, action: "user.deleted", actor, target: { type: "user", id } });
    },

    async putMembership(userId, teamId, input, options) {
      assertWritable(storage.identity, "putMembership");
      checkId(userId);
      checkId(teamId, "$.teamId");
      await existing(storage.identity.getUser(userId), "user");
      const { role } = parseBody(membershipBody, input);
      requireRef(await storage.identity.getTeam(teamId), "$.teamId", "team", teamId);
      const actor = await actorFor(storage, options);
      const membership: Membership = { userId, teamId, role };
      const created = (await storage.identity.putMembership(membership)) === "created";
      await recordChange(deps, {
        teamIds: [teamId],
        action: putAction("membership", created),
        actor,
        target: { type: "membership", id: `${userId}:${teamId}` },
        details: { userId, role },
      });
      return { created, value: membership };
    },
    async getMembership(userId, teamId) {
      await existing(storage.identity.getUser(userId), "user");
      const found = (await storage.identity.listMemberships(userId)).find((m) => m.teamId === teamId);
      if (!found) throw notFound("membership");
      return found;
    },
    async listMemberships(userId) {
      await existing(storage.identity.getUser(userId), "user");
      return storage.identity.listMemberships(userId);
    },
    async deleteMembership(userId, teamId, options) {
      assertWritable(storage.identity, "deleteMembership");
      const actor = await actorFor(storage, options);
      if (!(await storage.identity.deleteMembership(userId, teamId))) throw notFound("membership");
      await recordChange(deps, {
        teamIds: [teamId],
        action: "membership.deleted",
        actor,
        target: { type: "membership", id: `${userId}:${teamId}` },
        details: { userId },
      });
    },

    async createSession(input, options) {
      assertWritable(storage.credentials, "insertSession");
      const body = parseBody(sessionBody, input);
      requireRef(await storage.identity.getUser(body.userId), "$.userId", "user", body.userId);
      const actor = await actorFor(storage, options);
      const token = randomId("dps_", 40);
      const now = clock.now();
      const session = {
        id: randomId("sess_"),
        tokenHash: sha256Hex(token),
        userId: body.userId,
        expiresAt: new Date(now + (body.expiresInSeconds ?? DEFAULT_SESSION_SECONDS) * 1000).toISOString(),
      };
      await storage.credentials.insertSession(session);
      await recordChange(deps, {
        teamIds: await teamsOfUser(body.userId),
        action: "session.created",
        actor,
        target: { type: "session", id: session.id },
      });
      return { id: session.id, token, userId: session.userId, expiresAt: session.expiresAt };
    },
    async getSession(id) {
      const { tokenHash: _hash, ...info } = await existing(storage.credentials.getSession(id), "session");
      return info;
    },
    async deleteSession(id, options) {
      assertWritable(storage.credentials, "deleteSession");
      const actor = await actorFor(storage, options);
      const session = await existing(storage.credentials.getSession(id), "session");
      if (!(await storage.credentials.deleteSession(id))) throw notFound("session");
      await recordChange(deps, {
        teamIds: await teamsOfUser(session.userId),
        action: "session.deleted",
        actor,
        target: { type: "session", id },
      });
    },
  };
}
