import type { ApiKeyRecord, Business, Membership, Plan, Role, Team, User } from "../domain/model.js";
import type { IdentityStore } from "../ports/storage/identity.js";
import { parseJson, type SqliteHandle } from "./db.js";

interface TeamRow {
  id: string;
  name: string;
  plan: string;
  business_id: string | null;
  is_personal: number;
}
interface UserRow {
  id: string;
  email: string;
  name: string;
  business_admin: number;
}
interface KeyRow {
  id: string;
  name: string;
  team_id: string;
  token_hash: string;
  created_by: string;
  scopes: string;
  allowlist: string;
  created_at: string;
  revoked_at: string | null;
}

export function sqliteIdentity({ db }: SqliteHandle): IdentityStore {
  const business = db.prepare<[string], Business>("SELECT id, name FROM businesses WHERE id = ?");
  const team = db.prepare<[string], TeamRow>("SELECT * FROM teams WHERE id = ?");
  const businessTeams = db.prepare<[string], TeamRow>("SELECT * FROM teams WHERE business_id = ? ORDER BY id");
  const user = db.prepare<[string], UserRow>("SELECT * FROM users WHERE id = ?");
  const memberships = db.prepare<[string], { user_id: string; team_id: string; role: string }>(
    "SELECT * FROM memberships WHERE user_id = ? ORDER BY team_id",
  );
  const session = db.prepare<[string], { user_id: string }>("SELECT user_id FROM sessions WHERE token_hash = ?");
  const keyByHash = db.prepare<[string], KeyRow>("SELECT * FROM api_keys WHERE token_hash = ?");
  const keyById = db.prepare<[string], KeyRow>("SELECT * FROM api_keys WHERE id = ?");
  const teamKeys = db.prepare<[string], KeyRow>("SELECT * FROM api_keys WHERE team_id = ? ORDER BY created_at DESC, id");
  const insertKey = insertApiKeyStatement(db);
  const revoke = db.prepare<[string, string]>("UPDATE api_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL");

  return {
    async getBusiness(id) {
      return business.get(id) ?? null;
    },
    async getTeam(id) {
      const row = team.get(id);
      return row ? toTeam(row) : null;
    },
    async listBusinessTeams(businessId) {
      return businessTeams.all(businessId).map(toTeam);
    },
    async getUser(id) {
      const row = user.get(id);
      return row ? toUser(row) : null;
    },
    async listMemberships(userId) {
      return memberships.all(userId).map((m): Membership => ({ userId: m.user_id, teamId: m.team_id, role: m.role as Role }));
    },
    async findSessionUser(tokenHash) {
      return session.get(tokenHash)?.user_id ?? null;
    },
    async findApiKeyByHash(tokenHash) {
      const row = keyByHash.get(tokenHash);
      return row ? toKey(row) : null;
    },
    // Synchronous: authentication continues without a microtask hop.
    findApiKeyWithTeam(tokenHash) {
      const row = keyByHash.get(tokenHash);
      if (!row) return null;
      const teamRow = team.get(row.team_id);
      return { key: toKey(row), team: teamRow ? toTeam(teamRow) : null };
    },
    async getApiKey(id) {
      const row = keyById.get(id);
      return row ? toKey(row) : null;
    },
    async listApiKeys(teamId) {
      return teamKeys.all(teamId).map(toKey);
    },
    async insertApiKey(key) {
      // The primary key and the UNIQUE token hash make a duplicate throw.
      insertKey(key);
    },
    async revokeApiKey(id, revokedAt) {
      revoke.run(revokedAt, id);
      const row = keyById.get(id);
      return row ? toKey(row) : null;
    },
  };
}

export function insertApiKeyStatement(db: SqliteHandle["db"]): (key: ApiKeyRecord) => void {
  const stmt = db.prepare(
    `INSERT INTO api_keys (id, team_id, token_hash, name, created_by, scopes, allowlist, created_at, revoked_at)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
  );
  return (key) => {
    stmt.run(
      key.id,
      key.teamId,
      key.tokenHash,
      key.name,
      key.createdBy,
      JSON.stringify(key.scopes),
      JSON.stringify(key.allowlist),
      key.createdAt,
      key.revokedAt,
    );
  };
}

function toTeam(row: TeamRow): Team {
  return { id: row.id, name: row.name, plan: row.plan as Plan, businessId: row.business_id, isPersonal: row.is_personal === 1 };
}

function toUser(row: UserRow): User {
  return { id: row.id, email: row.email, name: row.name, businessAdmin: row.business_admin === 1 };
}

function toKey(row: KeyRow): ApiKeyRecord {
  return {
    id: row.id,
    name: row.name,
    teamId: row.team_id,
    tokenHash: row.token_hash,
    createdBy: row.created_by,
    scopes: parseJson(row.scopes),
    allowlist: parseJson(row.allowlist),
    createdAt: row.created_at,
    revokedAt: row.revoked_at,
  };
}
