import type pg from "pg";

/**
 * The host's own tables: its businesses, teams, users, memberships and
 * sign-in sessions. Dataport never creates or migrates them; it reads and
 * writes them through `hostIdentity` (identity.ts).
 *
 * Ids are `collate "C"` so that they compare and sort in binary order, the
 * order Dataport's identity area promises for its listings.
 */
export function hostSchemaSql(schema: string): string {
  const s = quoteIdent(schema);
  return `
    create schema if not exists ${s};
    create table if not exists ${s}.businesses (
      id   text collate "C" primary key,
      name text not null
    );
    create table if not exists ${s}.teams (
      id          text collate "C" primary key,
      name        text not null,
      plan        text not null check (plan in ('free', 'pro', 'team', 'business')),
      business_id text collate "C",
      is_personal boolean not null default false
    );
    create index if not exists teams_business on ${s}.teams (business_id, id);
    create table if not exists ${s}.users (
      id             text collate "C" primary key,
      email          text not null,
      name           text not null,
      business_admin boolean not null default false
    );
    -- Dataport does not require unique emails, so neither do these tables; sign-in refuses an ambiguous one.
    create index if not exists users_email on ${s}.users (lower(email));
    create table if not exists ${s}.memberships (
      user_id text collate "C" not null references ${s}.users (id) on delete cascade,
      team_id text collate "C" not null references ${s}.teams (id) on delete cascade,
      role    text not null check (role in ('owner', 'admin', 'editor', 'viewer')),
      primary key (user_id, team_id)
    );
    create index if not exists memberships_team on ${s}.memberships (team_id);
    -- Sign-in sessions: the SHA-256 of the token only, never the token itself.
    create table if not exists ${s}.sessions (
      token_hash text primary key,
      user_id    text collate "C" not null references ${s}.users (id) on delete cascade,
      expires_at timestamptz not null
    );
  `;
}

/** Creates the host's schema and tables when missing (safe to run on every start and from several processes). */
export async function ensureHostSchema(pool: pg.Pool, schema: string): Promise<void> {
  const client = await pool.connect();
  try {
    // Two processes starting at once would race on `create ... if not exists`: serialise them.
    await client.query("begin");
    await client.query("select pg_advisory_xact_lock(hashtext($1))", [`host-schema:${schema}`]);
    await client.query(hostSchemaSql(schema));
    await client.query("commit");
  } catch (error) {
    await client.query("rollback").catch(() => {});
    throw error;
  } finally {
    client.release();
  }
}

/** A schema name as an SQL identifier; only plain names are accepted. */
export function quoteIdent(name: string): string {
  if (!/^[a-z_][a-z0-9_]*$/i.test(name)) throw new TypeError(`not a plain SQL identifier: ${JSON.stringify(name)}`);
  return `"${name}"`;
}
