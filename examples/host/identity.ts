import type pg from "pg";
import type { Business, IdentityStore, IdentityWrites, IdPage, Membership, PutResult, Team, User } from "dataport";
import { quoteIdent } from "./schema.js";

/**
 * Dataport's identity area (businesses, teams, users, memberships) read from
 * and written to the host's own tables. Every call is one statement (or one
 * transaction), so a change made here or straight in SQL is what Dataport
 * sees on its very next request: it keeps no copy.
 *
 * Mount it with `mountStorage(dataportStore, { identity: hostIdentity(pool, "host_app") })`.
 * Leave out the writes to keep the area read-only (Dataport's admin API then answers 405).
 */
export function hostIdentity(pool: pg.Pool, schema: string): IdentityStore & IdentityWrites {
  const s = quoteIdent(schema);
  const rows = async <R extends pg.QueryResultRow>(sql: string, params: unknown[]): Promise<R[]> =>
    (await pool.query<R>(sql, params)).rows;

  return {
    // Reads. Ids are `collate "C"` (schema.ts), so `order by id` is the binary order Dataport expects.
    async getBusiness(id) {
      const [row] = await rows<Business>(`select id, name from ${s}.businesses where id = $1`, [id]);
      return row ?? null;
    },
    async getTeam(id) {
      const [row] = await rows<TeamRow>(`select * from ${s}.teams where id = $1`, [id]);
      return row ? toTeam(row) : null;
    },
    async listBusinessTeams(businessId) {
      return (await rows<TeamRow>(`select * from ${s}.teams where business_id = $1 order by id`, [businessId])).map(
        toTeam,
      );
    },
    async getUser(id) {
      const [row] = await rows<UserRow>(`select * from ${s}.users where id = $1`, [id]);
      return row ? toUser(row) : null;
    },
    async listMemberships(userId) {
      const found = await rows<MembershipRow>(`select * from ${s}.memberships where user_id = $1 order by team_id`, [
        userId,
      ]);
      return found.map((r): Membership => ({ userId: r.user_id, teamId: r.team_id, role: r.role }));
    },
    async listBusinesses(page) {
      return rows<Business>(`select id, name from ${s}.businesses ${afterId(page)}`, pageParams(page));
    },
    async listTeams(page) {
      return (await rows<TeamRow>(`select * from ${s}.teams ${afterId(page)}`, pageParams(page))).map(toTeam);
    },
    async listUsers(page) {
      return (await rows<UserRow>(`select * from ${s}.users ${afterId(page)}`, pageParams(page))).map(toUser);
    },

    // Writes: upserts that report whether the row is new. Dataport checks references before calling them.
    async putBusiness(b) {
      return upsert(
        `insert into ${s}.businesses (id, name) values ($1, $2)
        on conflict (id) do update set name = excluded.name`,
        [b.id, b.name],
      );
    },
    async deleteBusiness(id) {
      return deleted(`delete from ${s}.businesses where id = $1`, [id]);
    },
    async putTeam(t) {
      return upsert(
        `insert into ${s}.teams (id, name, plan, business_id, is_personal) values ($1, $2, $3, $4, $5)
         on conflict (id) do update set name = excluded.name, plan = excluded.plan,
           business_id = excluded.business_id, is_personal = excluded.is_personal`,
        [t.id, t.name, t.plan, t.businessId, t.isPersonal],
      );
    },
    async deleteTeam(id) {
      // Its memberships go with it (`on delete cascade`), in the same statement.
      return deleted(`delete from ${s}.teams where id = $1`, [id]);
    },
    async putUser(u) {
      return upsert(
        `insert into ${s}.users (id, email, name, business_admin) values ($1, $2, $3, $4)
         on conflict (id) do update set email = excluded.email, name = excluded.name, business_admin = excluded.business_admin`,
        [u.id, u.email, u.name, u.businessAdmin],
      );
    },
    async deleteUser(id) {
      // Memberships and sign-in sessions cascade.
      return deleted(`delete from ${s}.users where id = $1`, [id]);
    },
    async putMembership(m) {
      return upsert(
        `insert into ${s}.memberships (user_id, team_id, role) values ($1, $2, $3)
         on conflict (user_id, team_id) do update set role = excluded.role`,
        [m.userId, m.teamId, m.role],
      );
    },
    async deleteMembership(userId, teamId) {
      return deleted(`delete from ${s}.memberships where user_id = $1 and team_id = $2`, [userId, teamId]);
    },
  };

  /** `xmax = 0` holds for a row this statement inserted, not for one it updated. */
  async function upsert(sql: string, params: unknown[]): Promise<PutResult> {
    const [row] = await rows<{ created: boolean }>(`${sql} returning (xmax = 0) as created`, params);
    return row?.created ? "created" : "updated";
  }

  async function deleted(sql: string, params: unknown[]): Promise<boolean> {
    return ((await pool.query(sql, params)).rowCount ?? 0) > 0;
  }
}

/** A keyset page: ids after `page.after` (binary order), at most `page.limit`. */
function afterId(page: IdPage): string {
  return page.after === null ? "order by id limit $1" : "where id > $2 order by id limit $1";
}
function pageParams(page: IdPage): unknown[] {
  return page.after === null ? [page.limit] : [page.limit, page.after];
}

interface TeamRow {
  id: string;
  name: string;
  plan: Team["plan"];
  business_id: string | null;
  is_personal: boolean;
}
interface UserRow {
  id: string;
  email: string;
  name: string;
  business_admin: boolean;
}
interface MembershipRow {
  user_id: string;
  team_id: string;
  role: Membership["role"];
}

function toTeam(r: TeamRow): Team {
  return { id: r.id, name: r.name, plan: r.plan, businessId: r.business_id, isPersonal: r.is_personal };
}
function toUser(r: UserRow): User {
  return { id: r.id, email: r.email, name: r.name, businessAdmin: r.business_admin };
}
