import { LRUCache } from "lru-cache";
import type { QueryResultRow } from "pg";
import type { ApiKeyRecord, Membership, Plan, Role, Scope, SessionRecord, Team, User } from "../domain/model.js";
import type { CredentialStore, KeyWithTeamLookup } from "../ports/storage/credentials.js";
import type { IdentityStore, IdentityWrites, IdPage } from "../ports/storage/identity.js";
import { type Db, idPageSql, PUT_RESULT, putResult, statement } from "./db.js";
import type { SessionReads } from "./session-read.js";

const TEAM_COLUMNS = "id, name, plan, business_id, is_personal";
const USER_COLUMNS = "id, email, name, business_admin";

export function postgresIdentity(db: Db, seen: SessionReads): IdentityStore & IdentityWrites {
  const { t } = db;
  /** An identity write: what a session lookup read alongside is no longer served. */
  const writing = async <T>(write: Promise<T>): Promise<T> => {
    try {
      return await write;
    } finally {
      seen.forget();
    }
  };
  const page = async <R extends QueryResultRow>(table: string, columns: string, at: IdPage) => {
    const params: unknown[] = [];
    return db.query<R>(`select ${columns} from ${t(table)}${idPageSql(at, params)}`, params);
  };
  return {
    async getBusiness(id) {
      const [row] = await db.query<{ id: string; name: string }>(
        `select id, name from ${t("businesses")} where id = $1`,
        [id],
      );
      return row ? { id: row.id, name: row.name } : null;
    },
    async getTeam(id) {
      const known = seen.team(id);
      if (known !== undefined) return known;
      const [row] = await db.query<TeamRow>(`select ${TEAM_COLUMNS} from ${t("teams")} where id = $1`, [id]);
      return row ? toTeam(row) : null;
    },
    async listBusinessTeams(businessId) {
      const rows = await db.query<TeamRow>(
        `select ${TEAM_COLUMNS} from ${t("teams")} where business_id = $1 order by id collate "C"`,
        [businessId],
      );
      return rows.map(toTeam);
    },
    async getUser(id) {
      const known = seen.user(id);
      if (known !== undefined) return known;
      const [row] = await db.query<UserRow>(`select ${USER_COLUMNS} from ${t("users")} where id = $1`, [id]);
      return row ? toUser(row) : null;
    },
    async listMemberships(userId) {
      const known = seen.memberships(userId);
      if (known !== undefined) return known.map((m) => ({ ...m }));
      const rows = await db.query<{ user_id: string; team_id: string; role: Role }>(
        `select user_id, team_id, role from ${t("memberships")} where user_id = $1 order by team_id collate "C"`,
        [userId],
      );
      return rows.map((r): Membership => ({ userId: r.user_id, teamId: r.team_id, role: r.role }));
    },
    async listBusinesses(at) {
      return (await page<{ id: string; name: string }>("businesses", "id, name", at)).map((r) => ({
        id: r.id,
        name: r.name,
      }));
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
        await writing(
          db.query(
            `insert into ${t("teams")} (id, name, plan, business_id, is_personal) values ($1, $2, $3, $4, $5)
           on conflict (id) do update set name = excluded.name, plan = excluded.plan,
             business_id = excluded.business_id, is_personal = excluded.is_personal
           returning ${PUT_RESULT}`,
            [team.id, team.name, team.plan, team.businessId, team.isPersonal],
          ),
        ),
      );
    },
    async deleteTeam(id) {
      return writing(
        db.transaction(async (client) => {
          const deleted = await client.query(`delete from ${t("teams")} where id = $1`, [id]);
          if (deleted.rowCount === 0) return false;
          await client.query(`delete from ${t("memberships")} where team_id = $1`, [id]);
          return true;
        }),
      );
    },
    async putUser(user) {
      return putResult(
        await writing(
          db.query(
            `insert into ${t("users")} (id, email, name, business_admin) values ($1, $2, $3, $4)
           on conflict (id) do update set email = excluded.email, name = excluded.name, business_admin = excluded.business_admin
           returning ${PUT_RESULT}`,
            [user.id, user.email, user.name, user.businessAdmin],
          ),
        ),
      );
    },
    async deleteUser(id) {
      return writing(
        db.transaction(async (client) => {
          const deleted = await client.query(`delete from ${t("users")} where id = $1`, [id]);
          if (deleted.rowCount === 0) return false;
          await client.query(`delete from ${t("memberships")} where user_id = $1`, [id]);
          return true;
        }),
      );
    },
    async putMembership(membership) {
      return putResult(
        await writing(
          db.query(
            `insert into ${t("memberships")} (user_id, team_id, role) values ($1, $2, $3)
           on conflict (user_id, team_id) do update set role = excluded.role returning ${PUT_RESULT}`,
            [membership.userId, membership.teamId, membership.role],
          ),
        ),
      );
    },
    async deleteMembership(userId, teamId) {
      return (
        (
          await writing(
            db.query(`delete from ${t("memberships")} where user_id = $1 and team_id = $2 returning 1`, [
              userId,
              teamId,
            ]),
          )
        ).length > 0
      );
    },
  };
}

/** Session tokens and API keys, by hash. */
export function postgresCredentials(db: Db, seen: SessionReads): CredentialStore & KeyWithTeamLookup {
  const { t } = db;
  /** A credential write: sessions read alongside a key lookup are no longer served. */
  const forgetting = async <T>(write: Promise<T>): Promise<T> => {
    try {
      return await write;
    } finally {
      seen.forget();
    }
  };
  const keyColumns = "id, name, team_id, token_hash, created_by, scopes, allowlist, created_at, revoked_at";
  const storedKeyColumns = `${keyColumns}, creator_deleted`;
  const sessionColumns = "id, token_hash, user_id, expires_at";
  // The session with this token hash as one JSON array (see `sessionFromArray`): [null, user id, expiry ms,
  // the user, the user's memberships with their teams]. One column: `pg` turns it into values with one
  // JSON.parse, cheaper than a column each.
  const sessionArray = `(select json_build_array(null, s.user_id, s.expires_ms,
      (select json_build_array(u.id, u.email, u.name, u.business_admin) from ${t("users")} u where u.id = s.user_id),
      coalesce((select json_agg(json_build_array(m.team_id, m.role,
                         (select json_build_array(tm.id, tm.name, tm.plan, tm.business_id, tm.is_personal) from ${t("teams")} tm where tm.id = m.team_id))
                       order by m.team_id collate "C")
                  from ${t("memberships")} m where m.user_id = s.user_id), '[]'))
     from ${t("sessions")} s where s.token_hash = $1)`;
  // Every authenticated request runs it (prepared once per connection): the key with this token hash and its
  // team as one JSON array (see `keyFromArray`), or else (coalesce stops at the key) the session with this hash.
  const keyOrSession = statement(
    `select coalesce(
       (select json_build_array(k.id, k.name, k.team_id, k.token_hash, k.created_by, k.scopes, k.allowlist, k.created_at, k.revoked_at,
          k.creator_deleted, (select json_build_array(tm.id, tm.name, tm.plan, tm.business_id, tm.is_personal) from ${t("teams")} tm where tm.id = k.team_id))
          from ${t("api_keys")} k where k.token_hash = $1),
       ${sessionArray})::text as found`,
  );
  const sessionWithUser = statement(`select ${sessionArray} as found`);
  /**
   * Keys as last read, by the exact text the database returned for them:
   * parsed once and frozen, so a key used again costs no parsing, and the
   * handler can remember what it derives from it. Never stale: every lookup
   * still reads the database, and a changed key or team is another text.
   */
  const keys = new LRUCache<string, { key: ApiKeyRecord; team: Team | null }>({ max: KEY_CACHE_SIZE });
  const remember = (tokenHash: string, found: SessionArray) => {
    const [, userId, expiresMs, user, memberships] = found;
    const session = { userId, expiresMs: expiresMs === null ? null : Number(expiresMs) };
    seen.rememberSession(tokenHash, session, {
      user: user === null ? null : { id: user[0], email: user[1], name: user[2], businessAdmin: user[3] },
      memberships: memberships.map(([teamId, role]): Membership => ({ userId, teamId, role })),
      teams: new Map(
        memberships.map(([teamId, , team]) => [teamId, team === null ? null : teamFromArray(team)] as const),
      ),
    });
    return session;
  };
  return {
    async findSessionUser(tokenHash, now) {
      let session = seen.session(tokenHash);
      if (session === undefined) {
        const [row] = await db.query<{ found: SessionArray | null }>(sessionWithUser, [tokenHash]);
        session = row?.found ? remember(tokenHash, row.found) : null;
      }
      // An expiry at or before now is expired; without a clock reading only sessions that never expire pass.
      if (!session) return null;
      if (session.expiresMs !== null && !(Number.isFinite(now) && session.expiresMs > now)) return null;
      return session.userId;
    },
    async getSession(id) {
      const [row] = await db.query<SessionRow>(`select ${sessionColumns} from ${t("sessions")} where id = $1`, [id]);
      return row ? toSession(row) : null;
    },
    async insertSession(session) {
      // The primary key (token_hash) and the unique id make a duplicate fail.
      await forgetting(
        db.query(
          `insert into ${t("sessions")} (${sessionColumns}, expires_ms) values ($1, $2, $3, $4, $5)`,
          sessionParams(session),
        ),
      );
    },
    async deleteSession(id) {
      return (await forgetting(db.query(`delete from ${t("sessions")} where id = $1 returning 1`, [id]))).length > 0;
    },
    async deleteUserSessions(userId) {
      return (await forgetting(db.query(`delete from ${t("sessions")} where user_id = $1 returning 1`, [userId])))
        .length;
    },
    async findApiKeyByHash(tokenHash) {
      const [row] = await db.query<KeyRow>(`select ${storedKeyColumns} from ${t("api_keys")} where token_hash = $1`, [
        tokenHash,
      ]);
      return row ? toApiKey(row) : null;
    },
    async findApiKeyWithTeam(tokenHash) {
      // One round trip: the key and its team, or the session a session lookup would find next.
      const [row] = await db.query<{ found: string | null }>(keyOrSession, [tokenHash]);
      const text = row?.found ?? null;
      if (text === null) {
        seen.rememberNoSession(tokenHash);
        return null;
      }
      // The same stored key as last time: the same (frozen) records, with no parsing (and /me's body is remembered for
      // them).
      const known = keys.get(text);
      if (known) return known;
      const found = JSON.parse(text) as KeyArray | SessionArray;
      if (found[0] === null) {
        remember(tokenHash, found as SessionArray);
        return null;
      }
      const key = frozenKey(found as KeyArray);
      keys.set(text, key);
      return key;
    },
    async getApiKey(id) {
      const [row] = await db.query<KeyRow>(`select ${storedKeyColumns} from ${t("api_keys")} where id = $1`, [id]);
      return row ? toApiKey(row) : null;
    },
    async listApiKeys(teamId) {
      const rows = await db.query<KeyRow>(
        `select ${storedKeyColumns} from ${t("api_keys")} where team_id = $1 order by created_ms desc, created_at collate "C" desc, id collate "C"`,
        [teamId],
      );
      return rows.map(toApiKey);
    },
    async insertApiKey(key) {
      // The primary key and the unique token_hash make a duplicate fail.
      await forgetting(
        db.query(
          `insert into ${t("api_keys")} (${keyColumns}, created_ms) values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
          apiKeyParams(key),
        ),
      );
    },
    async revokeApiKey(id, revokedAt) {
      const [row] = await db.query<KeyRow>(
        `update ${t("api_keys")} set revoked_at = coalesce(revoked_at, $2) where id = $1 returning ${storedKeyColumns}`,
        [id, revokedAt],
      );
      return row ? toApiKey(row) : null;
    },
    async markKeysCreatorDeleted(userId) {
      return (
        await forgetting(
          db.query(
            `update ${t("api_keys")} set creator_deleted = true where created_by = $1 and not creator_deleted returning 1`,
            [userId],
          ),
        )
      ).length;
    },
  };
}

type TeamArray = [id: string, name: string, plan: Plan, businessId: string | null, isPersonal: boolean];
type KeyArray = [
  id: string,
  name: string,
  teamId: string,
  tokenHash: string,
  createdBy: string,
  scopes: Scope[],
  allowlist: ApiKeyRecord["allowlist"],
  createdAt: string,
  revokedAt: string | null,
  creatorDeleted: boolean,
  team: TeamArray | null,
];
type SessionArray = [
  key: null,
  userId: string,
  expiresMs: number | string | null,
  user: [id: string, email: string, name: string, businessAdmin: boolean] | null,
  memberships: Array<[teamId: string, role: Role, team: TeamArray | null]>,
];

function teamFromArray([id, name, plan, businessId, isPersonal]: TeamArray): Team {
  return { id, name, plan, businessId, isPersonal };
}

/**
 * A key and its team from the authentication statement's array, frozen through (the records the memory store hands out
 * are too).
 */
function frozenKey([
  id,
  name,
  teamId,
  tokenHash,
  createdBy,
  scopes,
  allowlist,
  createdAt,
  revokedAt,
  creatorDeleted,
  team,
]: KeyArray): {
  key: ApiKeyRecord;
  team: Team | null;
} {
  const frozenAllowlist = Object.freeze({
    ...allowlist,
    datasets: Object.freeze(allowlist.datasets),
    connections: Object.freeze(allowlist.connections),
    tables: Object.freeze(allowlist.tables),
  }) as ApiKeyRecord["allowlist"];
  return Object.freeze({
    key: Object.freeze({
      id,
      name,
      teamId,
      tokenHash,
      createdBy,
      scopes: Object.freeze(scopes) as Scope[],
      allowlist: frozenAllowlist,
      createdAt,
      revokedAt,
      ...(creatorDeleted && { creatorDeleted }),
    }),
    team: team === null ? null : Object.freeze(teamFromArray(team)),
  });
}

/** Stored keys remembered parsed, at most. */
const KEY_CACHE_SIZE = 1000;

/** Parameters for inserting a session: id, token_hash, user_id, expires_at, expires_ms. */
export function sessionParams(session: SessionRecord): unknown[] {
  return [
    session.id,
    session.tokenHash,
    session.userId,
    session.expiresAt,
    session.expiresAt === null ? null : millis(session.expiresAt),
  ];
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
  creator_deleted: boolean;
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
  const key: ApiKeyRecord = {
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
  if (r.creator_deleted) key.creatorDeleted = true;
  return key;
}
