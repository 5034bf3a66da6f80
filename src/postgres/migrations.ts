import type { Pool } from "pg";
import { quoteIdent } from "../sql/literals.js";
import { datasetValuesInsertSql, datasetValuesSql } from "./dataset-values-sql.js";
import { bounded, checkout, DEFAULT_BOUNDS } from "./db.js";

export interface Migration {
  version: number;
  name: string;
  /** SQL with `{s}` standing for the quoted schema (`{s_lit}`: the same inside a string literal). */
  sql: string;
}

/**
 * Versioned migrations, applied in order at start. Never edit a released
 * migration; add the next version. Timestamps are kept as the ISO strings
 * the API serves (text), plus epoch-ms or day columns where a query sorts,
 * filters or groups by time. Dataset and table rows are `json` (not
 * `jsonb`): `json` keeps the row's key order, `jsonb` would sort it.
 */
export const MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    name: "initial",
    sql: `
create table {s}.meta (key text primary key, value text not null);

create table {s}.businesses (id text primary key, name text not null);
create table {s}.teams (
  id text primary key, name text not null, plan text not null,
  business_id text, is_personal boolean not null
);
create index teams_business on {s}.teams (business_id, id collate "C");
create table {s}.users (id text primary key, email text not null, name text not null, business_admin boolean not null);
create table {s}.memberships (user_id text not null, team_id text not null, role text not null, primary key (user_id, team_id));
create table {s}.sessions (token_hash text primary key, user_id text not null);
create table {s}.api_keys (
  id text primary key, name text not null, team_id text not null,
  token_hash text not null unique, created_by text not null,
  scopes jsonb not null, allowlist jsonb not null,
  created_at text not null, created_ms bigint not null, revoked_at text
);
create index api_keys_team on {s}.api_keys (team_id, created_ms desc);

create table {s}.connections (
  id text primary key, team_id text not null, name text not null, type text not null,
  config json not null, created_at text not null,
  endpoint_id text unique
);
create index connections_team on {s}.connections (team_id, id collate "C");
create table {s}.datasets (
  id text primary key, team_id text not null, name text not null, type text not null,
  connection_id text, source text, columns json not null, row_count bigint not null,
  last_refreshed_at text, updated_at text not null
);
create index datasets_team on {s}.datasets (team_id);
create index datasets_connection on {s}.datasets (connection_id);
-- Rows of upload, connection and webhook datasets. pos is contiguous within a
-- dataset (appends take max+1, trimming removes the lowest), so an offset is
-- a position: deep pages are an index seek, not a scan.
create table {s}.dataset_rows (
  dataset_id text not null, pos bigint not null, row json not null, dedup_key text,
  primary key (dataset_id, pos)
);
create unique index dataset_rows_dedup on {s}.dataset_rows (dataset_id, dedup_key) where dedup_key is not null;

create table {s}.input_tables (
  id text primary key, team_id text not null, name text not null, columns json not null,
  row_count bigint not null, updated_at text not null
);
create index input_tables_team on {s}.input_tables (team_id);
create table {s}.table_rows (
  table_id text not null, row_id text not null, pos bigint not null, row json not null,
  updated_ms bigint not null,
  primary key (table_id, row_id)
);
create unique index table_rows_pos on {s}.table_rows (table_id, pos);
create table {s}.edit_log (
  seq bigint generated always as identity primary key,
  table_id text not null, row_id text not null, op text not null,
  actor jsonb not null, at text not null, before json, after json
);
create index edit_log_table on {s}.edit_log (table_id, seq);
create table {s}.idempotency_keys (
  scope text not null, key text not null, fingerprint text not null,
  claimed_ms bigint not null, response json,
  primary key (scope, key)
);
create index idempotency_keys_age on {s}.idempotency_keys (claimed_ms);

-- The audit log. xid is the writing transaction; a read only returns events
-- whose xid is below the oldest transaction still running, so an event that
-- commits late can never appear before a position already handed out.
create table {s}.audit_events (
  xid xid8 not null default pg_current_xact_id(),
  seq bigint generated always as identity,
  team_id text not null, category text not null, time_ms bigint,
  stored_at bigint not null, event json not null,
  primary key (xid, seq)
);
create index audit_events_stored on {s}.audit_events (stored_at);

create table {s}.dashboards (
  id text primary key, team_id text not null, name text not null, description text,
  versions json not null, dataset_ids json not null
);
create index dashboards_team on {s}.dashboards (team_id);
create table {s}.dashboard_views (
  seq bigint generated always as identity primary key,
  dashboard_id text not null, at text not null, day text not null,
  visitor_id text not null, user_id text, editor boolean not null
);
create index dashboard_views_day on {s}.dashboard_views (dashboard_id, day);
create table {s}.refresh_runs (
  seq bigint generated always as identity primary key,
  dataset_id text not null, started_at text not null, started_ms bigint not null, day text not null,
  duration_ms double precision not null, rows_processed bigint not null, error text
);
create index refresh_runs_day on {s}.refresh_runs (dataset_id, day);
create table {s}.credit_usage (
  seq bigint generated always as identity primary key,
  team_id text not null, at text not null, day text not null, category text not null,
  credits double precision not null, user_id text
);
create index credit_usage_day on {s}.credit_usage (team_id, day);
create table {s}.api_calls (
  seq bigint generated always as identity primary key,
  at text not null, at_ms bigint not null, day text not null, team_id text, credential_kind text not null,
  credential_id text, credential_name text, method text not null, route text not null, object_id text,
  status integer not null, latency_ms double precision not null
);
create index api_calls_day on {s}.api_calls (team_id, day);
create index api_calls_object on {s}.api_calls (object_id) where object_id is not null;
`,
  },
  {
    version: 2,
    name: "admin writes",
    sql: `
-- Sessions get the id the admin API deletes them by (fixture sessions:
-- sess_ + the first 24 hex digits of the hash) and an optional expiry.
alter table {s}.sessions add column id text, add column expires_at text, add column expires_ms bigint;
update {s}.sessions set id = 'sess_' || left(token_hash, 24);
alter table {s}.sessions alter column id set not null;
create unique index sessions_id on {s}.sessions (id);
create index sessions_user on {s}.sessions (user_id);

-- Audit event ids are unique in the log. Rows stored before this migration
-- may repeat an id: the first in position order keeps it, later copies stay
-- in the feed without one (the id is stored already, by the first).
alter table {s}.audit_events add column event_id text;
update {s}.audit_events a set event_id = f.id
  from (select distinct on (event ->> 'id') event ->> 'id' as id, xid, seq from {s}.audit_events
         order by event ->> 'id', xid, seq) f
 where (a.xid, a.seq) = (f.xid, f.seq);
create unique index audit_events_event_id on {s}.audit_events (event_id);

-- Bumped by every bulk write of a dataset's rows (writeDatasetRows,
-- replaceDatasetRows): a long read checks that its rows are those it counted.
alter table {s}.datasets add column rows_version bigint not null default 0;

-- The admin listings page by id in binary order (id > after, LIMIT): an
-- index in that order makes each page a range scan whatever the database's
-- default collation.
create index businesses_id_c on {s}.businesses (id collate "C");
create index teams_id_c on {s}.teams (id collate "C");
create index users_id_c on {s}.users (id collate "C");
create index connections_id_c on {s}.connections (id collate "C");
create index datasets_id_c on {s}.datasets (id collate "C");
create index input_tables_id_c on {s}.input_tables (id collate "C");
create index dashboards_id_c on {s}.dashboards (id collate "C");
create index memberships_team on {s}.memberships (team_id);
`,
  },
  {
    version: 3,
    name: "row windows and staged bulk writes",
    sql: `
-- Readers see a dataset's rows at the positions [first_pos, next_pos): the
-- count is next_pos - first_pos and offset k is position first_pos + k.
-- Rows outside the window are invisible: below it, rows trimmed by
-- retention or replaced by a bulk write, deleted later in small steps
-- (everything below swept_below is gone); above it, rows a bulk write is
-- staging (its claim in dataset_stagings, its range starting at stage_from).
alter table {s}.datasets add column first_pos bigint not null default 1, add column next_pos bigint not null default 1,
  add column swept_below bigint not null default 1, add column stage_from bigint;
update {s}.datasets d set first_pos = r.lo, next_pos = r.hi + 1, swept_below = r.lo, row_count = r.hi - r.lo + 1
  from (select dataset_id, min(pos) as lo, max(pos) as hi from {s}.dataset_rows group by dataset_id) r
 where r.dataset_id = d.id;
create table {s}.dataset_stagings (
  dataset_id text primary key, owner text not null, from_pos bigint not null, end_pos bigint not null
);
`,
  },
  {
    version: 4,
    name: "catalog notifications",
    sql: `
-- Every change to connections, or to which datasets exist and belong to
-- which connection, notifies the schema's channel: instances remember
-- webhook endpoints until they hear of a change.
create function {s}.notify_catalog_changed() returns trigger language plpgsql as $$
begin
  perform pg_notify('dataport_catalog_' || md5(TG_TABLE_SCHEMA), '');
  return null;
end $$;
create trigger connections_changed after insert or update or delete or truncate on {s}.connections
  for each statement execute function {s}.notify_catalog_changed();
create trigger datasets_changed after insert or delete or truncate or update of id, connection_id on {s}.datasets
  for each statement execute function {s}.notify_catalog_changed();
`,
  },
  {
    version: 5,
    name: "usage counters",
    sql: `
-- The usage log as per-day counters (written in batches), replacing one row
-- per call. key is the group's fields as a JSON array (the columns may be null).
create table {s}.api_usage (
  key text primary key, day text not null, team_id text, method text not null, route text not null,
  credential_kind text not null, credential_id text, credential_name text,
  calls bigint not null, errors bigint not null, server_errors bigint not null, latency_sum double precision not null
);
create index api_usage_day on {s}.api_usage (team_id, day);
create table {s}.dataset_reads (dataset_id text primary key, reads bigint not null, last_at text not null, last_ms bigint not null);
insert into {s}.api_usage
select json_build_array(day, team_id, method, route, credential_kind, credential_id, credential_name)::text,
       day, team_id, method, route, credential_kind, credential_id, credential_name,
       count(*), count(*) filter (where status >= 400), count(*) filter (where status >= 500), sum(latency_ms)
  from {s}.api_calls
 group by day, team_id, method, route, credential_kind, credential_id, credential_name;
insert into {s}.dataset_reads
select object_id, count(*), (array_agg(at order by at_ms desc, seq desc))[1], max(at_ms)
  from {s}.api_calls
 where object_id is not null and method = 'GET' and route in ('/api/v1/datasets/:id/rows', '/api/v1/tables/:id/rows')
   and status between 200 and 299
 group by object_id;
drop table {s}.api_calls;
`,
  },
  {
    version: 6,
    name: "filter index",
    sql: `
-- Exact-match filters: containment over this index narrows a read to the
-- candidate rows before equality is checked. A row whose text holds a
-- \\u0000 or surrogate escape has no jsonb form: it is left out (and no
-- filter matches it) rather than failing its write.
create index dataset_rows_doc on {s}.dataset_rows using gin ((row::jsonb) jsonb_path_ops)
  where row::text !~ '\\\\u(0000|[dD][89abcdefABCDEF])';
`,
  },
  {
    version: 7,
    name: "declared dataset columns, keys of deleted creators",
    sql: `
-- A dataset's columns declared by the host (admin PUT /datasets/{id} with
-- columns): uploads convert to them instead of inferring.
alter table {s}.datasets add column columns_declared boolean not null default false;
-- Set when the user who created the key is deleted: the key keeps working
-- for its team but never again reaches what needed its creator.
alter table {s}.api_keys add column creator_deleted boolean not null default false;
`,
  },
  {
    version: 8,
    name: "unparsable rows",
    sql: `
-- Rows whose text holds a \\u0000 or surrogate escape, which PostgreSQL
-- cannot take apart (->> fails on them): usually none. A read with where or
-- sort looks here first; with none in its window it may use the row indexes
-- of declared columns (made per dataset, see row-indexes.ts), whose
-- condition leaves such rows out.
create index dataset_rows_unparsable on {s}.dataset_rows (dataset_id, pos) where row::text ~ '\\\\u(0000|[dD][89abcdefABCDEF])';
create index table_rows_unparsable on {s}.table_rows (table_id, pos) where row::text ~ '\\\\u(0000|[dD][89abcdefABCDEF])';
`,
  },
  {
    version: 9,
    name: "feed positions",
    sql: `
-- Feeds (the audit log; the change log later): a writer registers under its
-- feed (a sequence, or a part of one), then draws positions from the
-- sequence. Registering is a shared advisory lock held until the
-- transaction ends (a dead backend's goes with it), keyed by the feed and
-- the sequence's value before the draw, a bound below every position the
-- transaction takes; once per transaction and feed. feed_horizon reads the
-- sequence, then the registrations: every position below its answer that
-- will ever commit has committed. Only the feed's own writers hold it back
-- (see src/postgres/feed-horizon.ts).
create function {s}.feed_register(positions regclass, part text default null) returns void
language plpgsql volatile as $$
declare
  key integer := hashtext(positions::oid::text || '/' || coalesce(part, ''));
  registered text := 'dataport.feed_' || (key::bigint & 4294967295);
begin
  if coalesce(current_setting(registered, true), '') = '' then
    perform pg_advisory_xact_lock_shared(key, coalesce(pg_sequence_last_value(positions), 0)::bit(32)::integer);
    perform set_config(registered, 'yes', true);
  end if;
end $$;
-- Register, then draw (a column's default). feed_register's body inline:
-- calling it would cost about 5 µs more per row.
create function {s}.feed_position(positions regclass, part text default null) returns bigint
language plpgsql volatile as $$
declare
  key integer := hashtext(positions::oid::text || '/' || coalesce(part, ''));
  registered text := 'dataport.feed_' || (key::bigint & 4294967295);
begin
  if coalesce(current_setting(registered, true), '') = '' then
    perform pg_advisory_xact_lock_shared(key, coalesce(pg_sequence_last_value(positions), 0)::bit(32)::integer);
    perform set_config(registered, 'yes', true);
  end if;
  return nextval(positions);
end $$;
create function {s}.feed_horizon(positions regclass, part text default null,
  out below bigint, out held boolean, out held_ms bigint)
language plpgsql volatile as $$
declare
  key oid := (hashtext(positions::oid::text || '/' || coalesce(part, ''))::bigint & 4294967295)::oid;
  last bigint;
  lowest bigint;
  since timestamptz;
begin
  -- The sequence first, the registrations after: a writer not registered
  -- yet will draw a position above last.
  last := coalesce(pg_sequence_last_value(positions), 0);
  select min(r.d), min(a.xact_start) into lowest, since
    from (select l.pid, (l.objid::bigint - (last & 4294967295) + 6442450944) % 4294967296 - 2147483648 as d
            from pg_locks l
           where l.locktype = 'advisory' and l.objsubid = 2 and l.classid = key
             and l.database = (select oid from pg_database where datname = current_database())) r
    left join pg_stat_activity a on a.pid = r.pid
   where r.d < 0;
  below := last + 1 + coalesce(lowest, 0);
  held := lowest is not null;
  held_ms := coalesce((extract(epoch from clock_timestamp() - since) * 1000)::bigint, 0);
end $$;

-- The audit log's position is one column drawn as above. Events stored
-- before keep their (xid, seq), numbered in that order, so a cursor of
-- that form still finds its place.
create sequence {s}.audit_positions as bigint;
alter table {s}.audit_events add column position bigint;
update {s}.audit_events a set position = o.n
  from (select xid, seq, row_number() over (order by xid, seq) as n from {s}.audit_events) o
 where (a.xid, a.seq) = (o.xid, o.seq);
select setval('{s_lit}.audit_positions'::regclass, max(position)) from {s}.audit_events having count(*) > 0;
alter sequence {s}.audit_positions owned by {s}.audit_events.position;
alter table {s}.audit_events drop constraint audit_events_pkey,
  alter column xid drop default, alter column xid drop not null,
  alter column seq drop identity, alter column seq drop not null,
  alter column position set default {s}.feed_position('{s_lit}.audit_positions'::regclass),
  alter column position set not null,
  add primary key (position);
create unique index audit_events_xid_seq on {s}.audit_events (xid, seq) where xid is not null;

-- An input-table row's position comes from a sequence, never given again:
-- max + 1 gave a deleted last row's position to the next row, which a read
-- continuing after that position then missed.
create sequence {s}.table_row_positions as bigint owned by {s}.table_rows.pos;
select setval('{s_lit}.table_row_positions'::regclass, max(pos)) from {s}.table_rows having count(*) > 0;
alter table {s}.table_rows alter column pos set default nextval('{s_lit}.table_row_positions'::regclass);
`,
  },
  {
    version: 10,
    name: "the webhook delivery log and its daily counters",
    sql: `
-- What each webhook endpoint received, stored or not (webhook-inbox.md).
-- Bounded per connection by trims (src/postgres/webhook-log.ts); reads apply
-- the bounds exactly. detail: the rest of an entry (headers, kept body…).
create table {s}.webhook_deliveries (
  seq bigint generated always as identity primary key, id text not null, connection_id text not null,
  received_at text not null, received_ms bigint not null,
  outcome text not null, reason text, status integer not null, row_id text, detail json not null
);
create index webhook_deliveries_connection on {s}.webhook_deliveries (connection_id, seq);
create table {s}.webhook_delivery_counts (
  connection_id text not null, day text not null, kind text not null, n bigint not null,
  primary key (connection_id, day, kind)
);
`,
  },
  {
    version: 11,
    name: "a typed copy of declared columns for aggregates, kept by triggers",
    // Generated from the aggregates' bucket SQL, when the migration runs (not at import: modules import one another).
    get sql() {
      return datasetValuesSql();
    },
  },
  {
    version: 12,
    name: "change log",
    sql: `
-- The change feeds of datasets and input tables (src/postgres/changes.ts):
-- positions drawn from one sequence under a registration per feed (a part
-- of the sequence: the dataset or table id), as the audit log's are. Pages
-- are keyset reads on the primary key; retention finds old changes through
-- the BRIN index on stored_at (cheap to keep: changes arrive in time order).
create sequence {s}.change_positions as bigint;
-- A trim names the last row it removed: a delivery statement that cannot see
-- that row (another instance committed it meanwhile) fails here, and the
-- deliveries take the transaction path (see webhooks.ts).
create table {s}.changes (
  feed_id text not null, position bigint not null, op text not null,
  row_id text, row json, stored_at bigint not null,
  primary key (feed_id, position),
  check (op <> 'trim' or row_id is not null)
);
create index changes_stored on {s}.changes using brin (stored_at);
-- Per feed, the highest position retention removed: a cursor below it has missed changes.
create table {s}.change_feeds (feed_id text primary key, trimmed_through bigint not null);
-- Where the window of a webhook dataset began before the last delivery
-- statement moved it: that statement's trim is the rows from here to first_pos.
alter table {s}.datasets add column trim_from bigint;
`,
  },
  {
    version: 13,
    name: "change log notifications",
    sql: `
-- Long-polling readers of the change feeds are woken by a notification on the
-- schema's own channel (md5 of its name, as migration 4's), sent as a
-- statement's changes commit: one per feed the statement recorded, its id the
-- payload, or one with an empty payload (every waiter looks) when it recorded
-- more than 8 feeds or an id too long for a payload. PostgreSQL folds
-- identical notifications of one transaction into one.
--
-- Only while some instance has readers waiting: each such instance keeps a row
-- in change_waiters, its until pushed 30 s ahead every 10 s, and deletes it
-- when its readers are gone. A NOTIFY wakes every listening connection of the
-- database and serialises notifying commits, so a write nobody waits for sends
-- none. Unlogged: a crash empties it, and the instances, whose listening
-- connections the crash ended, register again as they listen again.
create unlogged table {s}.change_waiters (instance_id text primary key, until timestamptz not null);
create function {s}.notify_changes() returns trigger language plpgsql as $$
declare
  feeds text[];
begin
  if not exists (select from {s}.change_waiters where until > now()) then
    return null;
  end if;
  select array_agg(feed_id) into feeds from (select distinct feed_id from new_changes limit 9) f;
  if feeds is null then
    return null;
  elsif cardinality(feeds) > 8 or exists (select from unnest(feeds) f where octet_length(f) > 1000) then
    perform pg_notify('dataport_changes_' || md5(TG_TABLE_SCHEMA), '');
  else
    perform pg_notify('dataport_changes_' || md5(TG_TABLE_SCHEMA), f) from unnest(feeds) f;
  end if;
  return null;
end $$;
create trigger changes_notify after insert on {s}.changes referencing new table as new_changes
  for each statement execute function {s}.notify_changes();
`,
  },
  {
    version: 14,
    name: "the webhook delivery log in chunks",
    sql: `
-- The delivery log as on SQLite (src/postgres/webhook-log.ts): a connection's
-- entries numbered 1, 2, 3… by its row in webhook_delivery_seqs (bumped by
-- the writing statement, whose lock orders the writers of every instance),
-- stored in chunks of consecutive seqs, one row per connection per writing
-- statement. entries: a JSON array of the entries (id, receivedAt, outcome,
-- reason, status, rowId, detail), the first one's seq first_seq.
create table {s}.webhook_delivery_seqs (connection_id text primary key, last_seq bigint not null);
create table {s}.webhook_delivery_chunks (
  connection_id text not null, first_seq bigint not null, last_seq bigint not null,
  first_ms bigint not null, last_ms bigint not null, entries json not null,
  primary key (connection_id, first_seq)
);
-- The entries kept so far, one a chunk, numbered consecutively per connection
-- (reads count the newest entries by seq) up to the connection's highest seq
-- before, which its next seqs continue.
insert into {s}.webhook_delivery_chunks (connection_id, first_seq, last_seq, first_ms, last_ms, entries)
select connection_id, n, n, received_ms, received_ms,
       json_build_array(json_build_object('id', id, 'receivedAt', received_at, 'outcome', outcome, 'reason', reason,
         'status', status, 'rowId', row_id, 'detail', detail))
  from (select d.*, max(seq) over w - count(*) over w + row_number() over (w order by seq) as n
          from {s}.webhook_deliveries d window w as (partition by connection_id)) e;
insert into {s}.webhook_delivery_seqs (connection_id, last_seq)
select connection_id, max(seq) from {s}.webhook_deliveries group by connection_id;
drop table {s}.webhook_deliveries;
`,
  },
  {
    version: 15,
    name: "inserts into dataset_rows copy their typed values themselves",
    // Generated from the copy's SQL when the migration runs, as migration 11's.
    get sql() {
      return datasetValuesInsertSql();
    },
  },
];

/**
 * Create the schema if missing and apply the migrations it lacks, in one
 * transaction under an advisory lock on the schema's name: instances that
 * start together apply each migration exactly once.
 */
export async function migrate(pool: Pool, schemaName: string): Promise<number[]> {
  const s = quoteIdent(schemaName);
  const lease = await checkout(pool);
  const { client } = lease;
  try {
    // Bounded like every transaction of the store: a stalled start must not hold the schema's lock for long.
    await client.query(bounded("BEGIN", { idleMs: DEFAULT_BOUNDS.idleMs }));
    await client.query("select pg_advisory_xact_lock(hashtextextended($1, 0))", [`dataport:migrate:${schemaName}`]);
    await client.query(`create schema if not exists ${s}`);
    await client.query(
      `create table if not exists ${s}.schema_migrations (version integer primary key, name text not null, applied_at timestamptz not null default now())`,
    );
    const done = new Set(
      (await client.query<{ version: number }>(`select version from ${s}.schema_migrations`)).rows.map(
        (r) => r.version,
      ),
    );
    const applied: number[] = [];
    for (const migration of MIGRATIONS) {
      if (done.has(migration.version)) continue;
      await client.query(migration.sql.replaceAll("{s_lit}", s.replaceAll("'", "''")).replaceAll("{s}", s));
      await client.query(`insert into ${s}.schema_migrations (version, name) values ($1, $2)`, [
        migration.version,
        migration.name,
      ]);
      applied.push(migration.version);
    }
    await client.query("COMMIT");
    return applied;
  } catch (error) {
    await client.query("ROLLBACK").catch(() => lease.spoil());
    throw error;
  } finally {
    lease.release();
  }
}
