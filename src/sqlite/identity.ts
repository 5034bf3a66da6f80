import type * as Database from "./driver.js";
import type { ApiKeyRecord, Business, Membership, Plan, Role, SessionRecord, Team, User } from "../domain/model.js";
import type { StorageAreas } from "../ports/storage.js";
import type { IdentityWrites, IdPage, PutResult } from "../ports/storage/identity.js";
import { deepFreeze, parseJson, rememberedReads, type SqliteHandle, writeTransaction } from "./db.js";
import { reportsOwnFaults } from "../sql/store-calls.js";

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
  creator_deleted: number;
}
interface SessionRow {
  id: string;
  token_hash: string;
  user_id: string;
  expires_at: string | null;
}

/**
 * Every read is a query on the writer connection, which sees every commit
 * (this process's or another's on the same file), so a write is visible to
 * the very next read everywhere. The one exception, the lookup every API
 * request makes (a key and its team by token hash), is remembered, and
 * forgotten as soon as `PRAGMA data_version` shows another connection's
 * commit or this store writes teams or keys (`identityVersion`): the same
 * visibility, without two queries and a JSON parse per request.
 */
export function sqliteIdentity(handle: SqliteHandle): Pick<StorageAreas, "identity" | "credentials"> {
  const { db } = handle;
  const business = db.prepare<[string], Business>("SELECT id, name FROM businesses WHERE id = ?");
  const team = db.prepare<[string], TeamRow>("SELECT * FROM teams WHERE id = ?");
  const businessTeams = db.prepare<[string], TeamRow>("SELECT * FROM teams WHERE business_id = ? ORDER BY id");
  const user = db.prepare<[string], UserRow>("SELECT * FROM users WHERE id = ?");
  const memberships = db.prepare<[string], { user_id: string; team_id: string; role: string }>(
    "SELECT * FROM memberships WHERE user_id = ? ORDER BY team_id",
  );
  const session = db.prepare<[string, number], { user_id: string }>(
    "SELECT user_id FROM sessions WHERE token_hash = ? AND (expires_ms IS NULL OR expires_ms > ?)",
  );
  const sessionById = db.prepare<[string], SessionRow>(
    "SELECT id, token_hash, user_id, expires_at FROM sessions WHERE id = ?",
  );
  // Single statements too are write transactions here: one that meets another process's lock waits for it (see
  // writeTransaction).
  const insertSession = writeTransaction(db, insertSessionStatement(db));
  const deleteSession = statementWrite(db, db.prepare<[string]>("DELETE FROM sessions WHERE id = ?"));
  const deleteUserSessions = statementWrite(db, db.prepare<[string]>("DELETE FROM sessions WHERE user_id = ?"));
  const businessPage = idPageQuery<Business>(db, "SELECT id, name FROM businesses");
  const teamPage = idPageQuery<TeamRow>(db, "SELECT * FROM teams");
  const userPage = idPageQuery<UserRow>(db, "SELECT * FROM users");
  const writes = identityWrites(handle);
  const keyByHash = db.prepare<[string], KeyRow>("SELECT * FROM api_keys WHERE token_hash = ?");
  const keyById = db.prepare<[string], KeyRow>("SELECT * FROM api_keys WHERE id = ?");
  const teamKeys = db.prepare<[string], KeyRow>(
    "SELECT * FROM api_keys WHERE team_id = ? ORDER BY created_at DESC, id",
  );
  const insertKey = writeTransaction(db, insertApiKeyStatement(db));
  const revoke = statementWrite(
    db,
    db.prepare<[string, string]>("UPDATE api_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL"),
  );
  const markCreatorDeleted = statementWrite(
    db,
    db.prepare<[string]>("UPDATE api_keys SET creator_deleted = 1 WHERE created_by = ? AND creator_deleted = 0"),
  );
  // Misses are not remembered (a flood of unknown tokens fills nothing); values are frozen: every caller shares them.
  const keysByHash = rememberedReads<{ key: ApiKeyRecord; team: Team | null }>(
    db,
    () => handle.identityVersion,
    REMEMBERED,
  );

  return {
    identity: {
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
        return memberships
          .all(userId)
          .map((m): Membership => ({ userId: m.user_id, teamId: m.team_id, role: m.role as Role }));
      },
      async listBusinesses(page) {
        return businessPage(page);
      },
      async listTeams(page) {
        return teamPage(page).map(toTeam);
      },
      async listUsers(page) {
        return userPage(page).map(toUser);
      },
      ...writes,
    },
    credentials: {
      async findSessionUser(tokenHash, now) {
        return session.get(tokenHash, now)?.user_id ?? null;
      },
      async getSession(id) {
        const row = sessionById.get(id);
        return row ? { id: row.id, tokenHash: row.token_hash, userId: row.user_id, expiresAt: row.expires_at } : null;
      },
      async insertSession(record) {
        // The token hash (primary key) and the UNIQUE id make a duplicate throw.
        await insertSession(record);
      },
      async deleteSession(id) {
        return (await deleteSession(id)) > 0;
      },
      async deleteUserSessions(userId) {
        return deleteUserSessions(userId);
      },
      async findApiKeyByHash(tokenHash) {
        const row = keyByHash.get(tokenHash);
        return row ? toKey(row) : null;
      },
      // The lookup of every request: it reports its own faults (no wrapper's promise on the way).
      findApiKeyWithTeam: reportsOwnFaults(async (tokenHash: string) => {
        try {
          const remembered = keysByHash.current();
          const known = remembered.get(tokenHash);
          if (known) return known;
          const row = keyByHash.get(tokenHash);
          if (!row) return null;
          const teamRow = team.get(row.team_id);
          const found = deepFreeze({ key: toKey(row), team: teamRow ? toTeam(teamRow) : null });
          remembered.set(tokenHash, found);
          return found;
        } catch (error) {
          throw handle.faults.reported(error);
        }
      }),
      async getApiKey(id) {
        const row = keyById.get(id);
        return row ? toKey(row) : null;
      },
      async listApiKeys(teamId) {
        return teamKeys.all(teamId).map(toKey);
      },
      async insertApiKey(key) {
        // The primary key and the UNIQUE token hash make a duplicate throw (and nothing changed).
        await identityChanged(handle, insertKey(key));
      },
      async revokeApiKey(id, revokedAt) {
        await identityChanged(handle, revoke(revokedAt, id));
        const row = keyById.get(id);
        return row ? toKey(row) : null;
      },
      async markKeysCreatorDeleted(userId) {
        return identityChanged(handle, markCreatorDeleted(userId));
      },
    },
  };
}

/** Lookups remembered per connection: at most this many, the least recently used forgotten first. */
const REMEMBERED = 10_000;

/**
 * Counts a write of teams or keys that has been made in `identityVersion`
 * (the key lookups' memo compares it) and passes its result on; a write
 * still waiting for the lock is counted once it is over. A write that throws
 * changed nothing (each is one transaction).
 */
function identityChanged<R>(handle: SqliteHandle, result: R | Promise<R>): R | Promise<R> {
  if (result instanceof Promise) return result.finally(() => handle.identityVersion++);
  handle.identityVersion++;
  return result;
}

/** One statement as a write transaction (see `writeTransaction`), answering how many rows it changed. */
function statementWrite<A extends unknown[]>(
  db: SqliteHandle["db"],
  statement: Database.Statement<A>,
): (...args: A) => number | Promise<number> {
  return writeTransaction(db, (...args: A) => statement.run(...args).changes);
}

/**
 * The identity writes, each one IMMEDIATE transaction (a put reads whether the id existed in it); each counts in
 * `identityVersion`.
 */
function identityWrites(handle: SqliteHandle): IdentityWrites {
  const { db } = handle;
  const put = <T>(exists: string, upsert: string, values: (item: T) => unknown[]) => {
    const found = db.prepare(exists);
    const write = db.prepare(upsert);
    return writeTransaction(db, (key: unknown[], item: T): PutResult => {
      const created = found.get(...key) === undefined;
      write.run(...values(item));
      return created ? "created" : "updated";
    });
  };
  const putBusiness = put<Business>(
    "SELECT 1 FROM businesses WHERE id = ?",
    "INSERT INTO businesses (id, name) VALUES (?, ?) ON CONFLICT (id) DO UPDATE SET name = excluded.name",
    (b) => [b.id, b.name],
  );
  const putTeam = put<Team>(
    "SELECT 1 FROM teams WHERE id = ?",
    `INSERT INTO teams (id, name, plan, business_id, is_personal) VALUES (?, ?, ?, ?, ?)
     ON CONFLICT (id) DO UPDATE SET name = excluded.name, plan = excluded.plan, business_id = excluded.business_id, is_personal = excluded.is_personal`,
    (t) => [t.id, t.name, t.plan, t.businessId, t.isPersonal ? 1 : 0],
  );
  const putUser = put<User>(
    "SELECT 1 FROM users WHERE id = ?",
    `INSERT INTO users (id, email, name, business_admin) VALUES (?, ?, ?, ?)
     ON CONFLICT (id) DO UPDATE SET email = excluded.email, name = excluded.name, business_admin = excluded.business_admin`,
    (u) => [u.id, u.email, u.name, u.businessAdmin ? 1 : 0],
  );
  const putMembership = put<Membership>(
    "SELECT 1 FROM memberships WHERE user_id = ? AND team_id = ?",
    "INSERT INTO memberships (user_id, team_id, role) VALUES (?, ?, ?) ON CONFLICT (user_id, team_id) DO UPDATE " +
      "SET role = excluded.role",
    (m) => [m.userId, m.teamId, m.role],
  );
  const removeBusiness = statementWrite(db, db.prepare<[string]>("DELETE FROM businesses WHERE id = ?"));
  const removeTeam = db.prepare<[string]>("DELETE FROM teams WHERE id = ?");
  const removeTeamMemberships = db.prepare<[string]>("DELETE FROM memberships WHERE team_id = ?");
  const removeUser = db.prepare<[string]>("DELETE FROM users WHERE id = ?");
  const removeUserMemberships = db.prepare<[string]>("DELETE FROM memberships WHERE user_id = ?");
  const removeMembership = statementWrite(
    db,
    db.prepare<[string, string]>("DELETE FROM memberships WHERE user_id = ? AND team_id = ?"),
  );
  const deleteTeam = writeTransaction(db, (id: string): boolean => {
    if (removeTeam.run(id).changes === 0) return false;
    removeTeamMemberships.run(id);
    return true;
  });
  const deleteUser = writeTransaction(db, (id: string): boolean => {
    if (removeUser.run(id).changes === 0) return false;
    removeUserMemberships.run(id);
    return true;
  });
  const changed = <R>(result: R | Promise<R>): R | Promise<R> => identityChanged(handle, result);
  return {
    async putBusiness(business) {
      return changed(putBusiness([business.id], business));
    },
    async deleteBusiness(id) {
      return (await changed(removeBusiness(id))) > 0;
    },
    async putTeam(team) {
      return changed(putTeam([team.id], team));
    },
    async deleteTeam(id) {
      return changed(deleteTeam(id));
    },
    async putUser(user) {
      return changed(putUser([user.id], user));
    },
    async deleteUser(id) {
      return changed(deleteUser(id));
    },
    async putMembership(membership) {
      return changed(putMembership([membership.userId, membership.teamId], membership));
    },
    async deleteMembership(userId, teamId) {
      return (await changed(removeMembership(userId, teamId))) > 0;
    },
  };
}

/**
 * A keyset page by id: `id > after` in SQLite's BINARY collation (byte order
 * of UTF-8, which is code-point order: it differs from UTF-16 code-unit order
 * only between U+E000–U+FFFF and characters beyond U+FFFF), at most `limit`.
 */
export function idPageQuery<R>(db: SqliteHandle["db"], select: string): (page: IdPage) => R[] {
  const first = db.prepare<[number], R>(`${select} ORDER BY id LIMIT +?`);
  const after = db.prepare<[string, number], R>(`${select} WHERE id > ? ORDER BY id LIMIT +?`);
  return ({ after: from, limit }) => {
    const n = Math.max(0, Math.floor(limit));
    return from === null ? first.all(n) : after.all(from, n);
  };
}

/** Insert a session; a record whose expiresAt is not a timestamp is refused (it would otherwise never expire). */
export function insertSessionStatement(db: SqliteHandle["db"]): (session: SessionRecord) => void {
  const stmt = db.prepare(
    "INSERT INTO sessions (token_hash, id, user_id, expires_at, expires_ms) VALUES (?, ?, ?, ?, ?)",
  );
  return (s) => {
    const expiresMs = s.expiresAt === null ? null : Date.parse(s.expiresAt);
    if (Number.isNaN(expiresMs)) throw new Error(`session ${s.id}: expiresAt is not an ISO 8601 timestamp`);
    stmt.run(s.tokenHash, s.id, s.userId, s.expiresAt, expiresMs);
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
  return {
    id: row.id,
    name: row.name,
    plan: row.plan as Plan,
    businessId: row.business_id,
    isPersonal: row.is_personal === 1,
  };
}

function toUser(row: UserRow): User {
  return { id: row.id, email: row.email, name: row.name, businessAdmin: row.business_admin === 1 };
}

function toKey(row: KeyRow): ApiKeyRecord {
  const key: ApiKeyRecord = {
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
  if (row.creator_deleted === 1) key.creatorDeleted = true;
  return key;
}
