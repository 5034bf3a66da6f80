import type { ApiKeyRecord, Membership, Plan, Role, Scope, Team, User } from "../domain/model.js";
import type { IdentityStore } from "../ports/storage/identity.js";
import type { Db } from "./db.js";

export function postgresIdentity(db: Db): IdentityStore {
  const { t } = db;
  const keyColumns = "id, name, team_id, token_hash, created_by, scopes, allowlist, created_at, revoked_at";
  return {
    async getBusiness(id) {
      const [row] = await db.query<{ id: string; name: string }>(`select id, name from ${t("businesses")} where id = $1`, [id]);
      return row ? { id: row.id, name: row.name } : null;
    },
    async getTeam(id) {
      const [row] = await db.query<TeamRow>(`select * from ${t("teams")} where id = $1`, [id]);
      return row ? toTeam(row) : null;
    },
    async listBusinessTeams(businessId) {
      const rows = await db.query<TeamRow>(`select * from ${t("teams")} where business_id = $1 order by id collate "C"`, [businessId]);
      return rows.map(toTeam);
    },
    async getUser(id) {
      const [row] = await db.query<UserRow>(`select * from ${t("users")} where id = $1`, [id]);
      return row ? toUser(row) : null;
    },
    async listMemberships(userId) {
      const rows = await db.query<{ user_id: string; team_id: string; role: Role }>(
        `select user_id, team_id, role from ${t("memberships")} where user_id = $1 order by team_id collate "C"`,
        [userId],
      );
      return rows.map((r): Membership => ({ userId: r.user_id, teamId: r.team_id, role: r.role }));
    },
    async findSessionUser(tokenHash) {
      const [row] = await db.query<{ user_id: string }>(`select user_id from ${t("sessions")} where token_hash = $1`, [tokenHash]);
      return row?.user_id ?? null;
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
