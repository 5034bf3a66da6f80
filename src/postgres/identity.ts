import type { QueryResultRow } from "pg";
import type { ApiKeyRecord, Membership, Plan, Role, Scope, SessionRecord, Team, User } from "../domain/model.js";
import type { CredentialStore, IdentityStore, IdentityWrites, IdPage, KeyWithTeamLookup } from "../ports/storage/identity.js";
import { type Db, idPageSql, PUT_RESULT, putResult } from "./db.js";

const TEAM_COLUMNS = "id, name, plan, business_id, is_personal";
const USER_COLUMNS = "id, email, name, business_admin";

export function postgresIdentity(db: Db): IdentityStore & IdentityWrites {
  const { t } = db;
  const page = async <R extends QueryResultRow>(table: string, columns: string, at: IdPage) => {
    const params: unknown[] = [];
    return db.query<R>(`select ${columns} from ${t(table)}${idPageSql(at, params)}`, params);
  };
  return {
    async getBusiness(id) {
      const [row] = await db.query<{ id: string; name: string }>(`select id, name from ${t("businesses")} where id = $1`, [id]);
      return row ? { id: row.id, name: row.name } : null;
    },
    async getTeam(id) {
      const [row] = await db.query<TeamRow>(`select ${TEAM_COLUMNS} from ${t("teams")} where id = $1`, [id]);
      return row ? toTeam(row) : null;
    },
    async listBusinessTeams(businessId) {
      const rows = await db.query<TeamRow>(`select ${TEAM_COLUMNS} from ${t("teams")} where business_id = $1 order by id collate "C"`, [businessId]);
      return rows.map(toTeam);
    },
    async getUser(id) {
      const [row] = await db.query<UserRow>(`select ${USER_COLUMNS} from ${t("users")} where id = $1`, [id]);
      return row ? toUser(row) : null;
    },
    async listMemberships(userId) {
      const rows = await db.query<{ user_id: string; team_id: string; role: Role }>(
        `select user_id, team_id, role from ${t("memberships")} where user_id = $1 order by team_id collate "C"`,
        [userId],
      );
      return rows.map((r): Membership => ({ userId: r.user_id, teamId: r.team_id, role: r.role }));
    },
    async listBusinesses(at) {
      return (await page<{ id: string; name: string }>("businesses", "id, name", at)).map((r) => ({ id: r.id, name: r.name }));
    },
    async listTeams(at) {
      return (await page<TeamRow>("teams", TEAM_COLUMNS, at)).map(toTeam);
    },
    async listUsers(at) {
      return (await page<UserRow>("users", USER_COLUMNS, at)).map(toUser);
    },

    async putBusiness(business) {
      return putResult(
        await db.query(
          `insert into ${t("businesses")} (id, name) values ($1, $2)
           on conflict (id) do update set name = excluded.name returning ${PUT_RESULT}`,
          [business.id, business.name],
        ),
      );
    },
    async deleteBusiness(id) {
      return (await db.query(`delete from ${t("businesses")} where id = $1 returning 1`, [id])).length > 0;
    },
    async putTeam(team) {
      return putResult(
        await db.query(
          `insert into ${t("teams")} (id, name, plan, business_id, is_personal) values ($1, $2, $3, $4, $5)
           on conflict (id) do update set name = excluded.name, plan = excluded.plan,
             business_id = excluded.business_id, is_personal = excluded.is_personal
           returning ${PUT_RESULT}`,
          [team.id, team.name, team.plan, team.businessId, team.isPersonal],
        ),
      );
    },
    async deleteTeam(id) {
      return db.transaction(async (client) => {
        const deleted = await client.query(`delete from ${t("teams")} where id = $1`, [id]);
        if (deleted.rowCount === 0) return false;
        await client.query(`delete from ${t("memberships")} where team_id = $1`, [id]);
        return true;
      });
    },
    async putUser(user) {
      return putResult(
        await db.query(
          `insert into ${t("users")} (id, email, name, business_admin) values ($1, $2, $3, $4)
           on conflict (id) do update set email = excluded.email, name = excluded.name, business_admin = excluded.business_admin
           returning ${PUT_RESULT}`,
          [user.id, user.email, user.name, user.businessAdmin],
        ),
      );
    },
    async deleteUser(id) {
      return db.transaction(async (client) => {
        const deleted = await client.query(`delete from ${t("users")} where id = $1`, [id]);
        if (deleted.rowCount === 0) return false;
        await client.query(`delete from ${t("memberships")} where user_id = $1`, [id]);
        return true;
      });
    },
    async putMembership(membership) {
      return putResult(
        await db.query(
          `insert into ${t("memberships")} (user_id, team_id, role) values ($1, $2, $3)
           on conflict (user_id, team_id) do update set role = excluded.role returning ${PUT_RESULT}`,
          [membership.userId, membership.teamId, membership.role],
        ),
      );
    },
    async deleteMembership(userId, teamId) {
      return (await db.query(`delete from ${t("memberships")} where user_id = $1 and team_id = $2 returning 1`, [userId, teamId])).length > 0;
    },
  };
}

/** Session tokens and API keys, by hash. */
export function postgresCredentials(db: Db): CredentialStore & KeyWithTeamLookup {
  const { t } = db;
  const keyColumns = "id, name, team_id, token_hash, created_by, scopes, allowlist, created_at, revoked_at";
  const sessionColumns = "id, token_hash, user_id, expires_at";
  return {
    async findSessionUser(tokenHash, now) {
      // An expiry at or before now is expired; without a clock reading only sessions that never expire pass.
      const [row] = await db.query<{ user_id: string }>(
        `select user_id from ${t("sessions")} where token_hash = $1 and (expires_ms is null or expires_ms > $2::bigint)`,
        [tokenHash, Number.isFinite(now) ? Math.floor(now) : null],
      );
      return row?.user_id ?? null;
    },
    async getSession(id) {
      const [row] = await db.query<SessionRow>(`select ${sessionColumns} from ${t("sessions")} where id = $1`, [id]);
      return row ? toSession(row) : null;
    },
    async insertSession(session) {
      // The primary key (token_hash) and the unique id make a duplicate fail.
      await db.query(`insert into ${t("sessions")} (${sessionColumns}, expires_ms) values ($1, $2, $3, $4, $5)`, sessionParams(session));
    },
    async deleteSession(id) {
      return (await db.query(`delete from ${t("sessions")} where id = $1 returning 1`, [id])).length > 0;
    },
    async deleteUserSessions(userId) {
      return (await db.query(`delete from ${t("sessions")} where user_id = $1 returning 1`, [userId])).length;
    },
    async findApiKeyByHash(tokenHash) {
      const [row] = await db.query<KeyRow>(`select ${keyColumns} from ${t("api_keys")} where token_hash = $1`, [tokenHash]);
      return row ? toApiKey(row) : null;
    },
    async findApiKeyWithTeam(tokenHash) {
      // One round trip: the key's columns and its team as one JSON value.
      const [row] = await db.query<KeyRow & { team: TeamRow | null }>(
        `select ${keyColumns.split(", ").map((c) => `k.${c}`).join(", ")}, row_to_json(tm) as team
         from ${t("api_keys")} k left join ${t("teams")} tm on tm.id = k.team_id where k.token_hash = $1`,
        [tokenHash],
      );
      return row ? { key: toApiKey(row), team: row.team ? toTeam(row.team) : null } : null;
    },
    async getApiKey(id) {
      const [row] = await db.query<KeyRow>(`select ${keyColumns} from ${t("api_keys")} where id = $1`, [id]);
      return row ? toApiKey(row) : null;
    },
    async listApiKeys(teamId) {
      const rows = await db.query<KeyRow>(
        `select ${keyColumns} from ${t("api_keys")} where team_id = $1 order by created_ms desc, created_at collate "C" desc, id collate "C"`,
        [teamId],
      );
      return rows.map(toApiKey);
    },
    async insertApiKey(key) {
      // The primary key and the unique token_hash make a duplicate fail.
      await db.query(`insert into ${t("api_keys")} (${keyColumns}, created_ms) values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`, apiKeyParams(key));
    },
    async revokeApiKey(id, revokedAt) {
      const [row] = await db.query<KeyRow>(
        `update ${t("api_keys")} set revoked_at = coalesce(revoked_at, $2) where id = $1 returning ${keyColumns}`,
        [id, revokedAt],
      );
      return row ? toApiKey(row) : null;
    },
  };
}

/** Parameters for inserting a session: id, token_hash, user_id, expires_at, expires_ms. */
export function sessionParams(session: SessionRecord): unknown[] {
  return [session.id, session.tokenHash, session.userId, session.expiresAt, session.expiresAt === null ? null : millis(session.expiresAt)];
}

/** Parameters for inserting a key, in the column order of `insertApiKey`. */
export function apiKeyParams(key: ApiKeyRecord): unknown[] {
  return [
    key.id,
    key.name,
    key.teamId,
    key.tokenHash,
    key.createdBy,
    JSON.stringify(key.scopes),
    JSON.stringify(key.allowlist),
    key.createdAt,
    key.revokedAt,
    millis(key.createdAt),
  ];
}

/** Epoch ms of an ISO instant (0 when unparseable, so sorting still works). */
export function millis(iso: string): number {
  const ms = Date.parse(iso);
  return Number.isFinite(ms) ? ms : 0;
}

interface TeamRow {
  id: string;
  name: string;
  plan: Plan;
  business_id: string | null;
  is_personal: boolean;
}
interface UserRow {
  id: string;
  email: string;
  name: string;
  business_admin: boolean;
}
interface SessionRow {
  id: string;
  token_hash: string;
  user_id: string;
  expires_at: string | null;
}
interface KeyRow {
  id: string;
  name: string;
  team_id: string;
  token_hash: string;
  created_by: string;
  scopes: Scope[];
  allowlist: ApiKeyRecord["allowlist"];
  created_at: string;
  revoked_at: string | null;
}

function toTeam(r: TeamRow): Team {
  return { id: r.id, name: r.name, plan: r.plan, businessId: r.business_id, isPersonal: r.is_personal };
}

function toUser(r: UserRow): User {
  return { id: r.id, email: r.email, name: r.name, businessAdmin: r.business_admin };
}

function toSession(r: SessionRow): SessionRecord {
  return { id: r.id, tokenHash: r.token_hash, userId: r.user_id, expiresAt: r.expires_at };
}

function toApiKey(r: KeyRow): ApiKeyRecord {
  return {
    id: r.id,
    name: r.name,
    teamId: r.team_id,
    tokenHash: r.token_hash,
    createdBy: r.created_by,
    scopes: r.scopes,
    allowlist: r.allowlist,
    createdAt: r.created_at,
    revokedAt: r.revoked_at,
  };
}
