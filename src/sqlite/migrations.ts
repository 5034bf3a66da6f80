import { DATASET_VALUES_SQL } from "./dataset-values-sql.js";
import type { Database } from "./driver.js";

/**
 * One step of the schema. Steps are applied in order, each in its own
 * transaction, and recorded in `schema_migrations`; a step once shipped is
 * never edited — a change is a new step appended to the list.
 */
export interface Migration {
  version: number;
  name: string;
  sql: string;
}

export const MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    name: "initial schema",
    sql: `
      CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;

      -- identity
      CREATE TABLE businesses (id TEXT PRIMARY KEY, name TEXT NOT NULL) WITHOUT ROWID;
      CREATE TABLE teams (
        id TEXT PRIMARY KEY, name TEXT NOT NULL, plan TEXT NOT NULL,
        business_id TEXT, is_personal INTEGER NOT NULL
      ) WITHOUT ROWID;
      CREATE INDEX teams_by_business ON teams (business_id, id);
      CREATE TABLE users (id TEXT PRIMARY KEY, email TEXT NOT NULL, name TEXT NOT NULL, business_admin INTEGER NOT NULL) WITHOUT ROWID;
      CREATE TABLE memberships (
        user_id TEXT NOT NULL, team_id TEXT NOT NULL, role TEXT NOT NULL,
        PRIMARY KEY (user_id, team_id)
      ) WITHOUT ROWID;
      CREATE TABLE sessions (token_hash TEXT PRIMARY KEY, user_id TEXT NOT NULL) WITHOUT ROWID;
      CREATE TABLE api_keys (
        id TEXT PRIMARY KEY, team_id TEXT NOT NULL, token_hash TEXT NOT NULL UNIQUE,
        name TEXT NOT NULL, created_by TEXT NOT NULL, scopes TEXT NOT NULL, allowlist TEXT NOT NULL,
        created_at TEXT NOT NULL, revoked_at TEXT
      );
      CREATE INDEX api_keys_by_team ON api_keys (team_id, created_at DESC, id);

      -- catalog: a dataset's rows occupy the dense positions [first_position, next_position),
      -- so the row at offset k (no filters) is the row at first_position + k: a keyed read.
      CREATE TABLE connections (
        id TEXT PRIMARY KEY, team_id TEXT NOT NULL, name TEXT NOT NULL, type TEXT NOT NULL,
        config TEXT NOT NULL, created_at TEXT NOT NULL,
        endpoint_id TEXT UNIQUE
      );
      CREATE INDEX connections_by_team ON connections (team_id, id);
      CREATE TABLE datasets (
        seq INTEGER PRIMARY KEY,
        id TEXT NOT NULL UNIQUE, team_id TEXT NOT NULL, name TEXT NOT NULL, type TEXT NOT NULL,
        connection_id TEXT, source TEXT, columns TEXT NOT NULL,
        last_refreshed_at TEXT, updated_at TEXT NOT NULL,
        first_position INTEGER NOT NULL DEFAULT 0, next_position INTEGER NOT NULL DEFAULT 0
      );
      CREATE INDEX datasets_by_team ON datasets (team_id, name, id);
      CREATE INDEX datasets_by_connection ON datasets (connection_id);
      CREATE TABLE dataset_rows (
        dataset_seq INTEGER NOT NULL, position INTEGER NOT NULL,
        dedup_key TEXT, data TEXT NOT NULL,
        PRIMARY KEY (dataset_seq, position)
      );
      CREATE UNIQUE INDEX dataset_rows_dedup ON dataset_rows (dataset_seq, dedup_key) WHERE dedup_key IS NOT NULL;

      -- input tables
      CREATE TABLE input_tables (
        id TEXT PRIMARY KEY, team_id TEXT NOT NULL, name TEXT NOT NULL, columns TEXT NOT NULL,
        row_count INTEGER NOT NULL, updated_at TEXT NOT NULL
      );
      CREATE INDEX input_tables_by_team ON input_tables (team_id, name, id);
      CREATE TABLE table_rows (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        table_id TEXT NOT NULL, row_id TEXT NOT NULL, data TEXT NOT NULL,
        UNIQUE (table_id, row_id)
      );
      CREATE INDEX table_rows_in_order ON table_rows (table_id, seq);
      CREATE TABLE edit_log (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        table_id TEXT NOT NULL, row_id TEXT NOT NULL, op TEXT NOT NULL, actor TEXT NOT NULL,
        at TEXT NOT NULL, before TEXT, after TEXT
      );
      CREATE INDEX edit_log_by_table ON edit_log (table_id, seq);
      CREATE TABLE idempotency_keys (
        scope TEXT NOT NULL, key TEXT NOT NULL, fingerprint TEXT NOT NULL,
        claimed_at INTEGER NOT NULL, response TEXT,
        PRIMARY KEY (scope, key)
      ) WITHOUT ROWID;
      CREATE INDEX idempotency_keys_by_age ON idempotency_keys (claimed_at);

      -- audit: AUTOINCREMENT so a trimmed position is never handed out again
      CREATE TABLE audit_events (
        position INTEGER PRIMARY KEY AUTOINCREMENT,
        team_id TEXT NOT NULL, category TEXT NOT NULL, time_ms INTEGER NOT NULL,
        stored_at INTEGER NOT NULL, target_id TEXT, event TEXT NOT NULL
      );
      CREATE INDEX audit_events_by_stored_at ON audit_events (stored_at, position);

      -- analytics
      CREATE TABLE dashboards (
        id TEXT PRIMARY KEY, team_id TEXT NOT NULL, name TEXT NOT NULL, description TEXT,
        versions TEXT NOT NULL, dataset_ids TEXT NOT NULL
      );
      CREATE INDEX dashboards_by_team ON dashboards (team_id, id);
      CREATE TABLE dashboard_datasets (
        dashboard_id TEXT NOT NULL, dataset_id TEXT NOT NULL, PRIMARY KEY (dataset_id, dashboard_id)
      ) WITHOUT ROWID;
      CREATE TABLE dashboard_views (
        seq INTEGER PRIMARY KEY, dashboard_id TEXT NOT NULL, day TEXT NOT NULL, at TEXT NOT NULL,
        visitor_id TEXT NOT NULL, user_id TEXT, editor INTEGER NOT NULL
      );
      CREATE INDEX dashboard_views_by_day ON dashboard_views (dashboard_id, day, user_id, visitor_id) WHERE editor = 0;
      CREATE TABLE refresh_runs (
        seq INTEGER PRIMARY KEY, dataset_id TEXT NOT NULL, day TEXT NOT NULL, started_at TEXT NOT NULL,
        started_ms INTEGER NOT NULL, duration_ms INTEGER NOT NULL, rows_processed INTEGER NOT NULL, error TEXT
      );
      CREATE INDEX refresh_runs_by_day ON refresh_runs (dataset_id, day, started_ms);
      CREATE TABLE credit_usage (
        seq INTEGER PRIMARY KEY, team_id TEXT NOT NULL, day TEXT NOT NULL, at TEXT NOT NULL,
        category TEXT NOT NULL, credits REAL NOT NULL, user_id TEXT
      );
      CREATE INDEX credit_usage_by_day ON credit_usage (team_id, day);
      -- the API usage log as per-day counters (what api-usage and dataset-usage report)
      CREATE TABLE api_usage (
        key TEXT PRIMARY KEY, day TEXT NOT NULL, team_id TEXT,
        method TEXT NOT NULL, route TEXT NOT NULL, credential_kind TEXT NOT NULL,
        credential_id TEXT, credential_name TEXT,
        calls INTEGER NOT NULL, errors INTEGER NOT NULL, server_errors INTEGER NOT NULL, latency_sum REAL NOT NULL
      );
      CREATE INDEX api_usage_by_day ON api_usage (team_id, day);
      CREATE TABLE dataset_reads (
        dataset_id TEXT PRIMARY KEY, reads INTEGER NOT NULL, last_at TEXT NOT NULL, last_ms INTEGER NOT NULL
      ) WITHOUT ROWID;
    `,
  },
  {
    version: 2,
    name: "dataset rows keyed by one integer",
    // The row's key is its rowid: dataset_seq * 2^43 + position (rowKey in
    // db.ts). One B-tree per row instead of two (the table plus the
    // index a composite primary key adds), so an append or a trim writes half
    // the pages; ranges of one dataset are ranges of row_key.
    sql: `
      CREATE TABLE dataset_rows_by_key (
        row_key INTEGER PRIMARY KEY,
        dataset_seq INTEGER NOT NULL, position INTEGER NOT NULL,
        dedup_key TEXT, data TEXT NOT NULL
      );
      INSERT INTO dataset_rows_by_key (row_key, dataset_seq, position, dedup_key, data)
        SELECT dataset_seq * 8796093022208 + position, dataset_seq, position, dedup_key, data FROM dataset_rows ORDER BY dataset_seq, position;
      DROP TABLE dataset_rows;
      ALTER TABLE dataset_rows_by_key RENAME TO dataset_rows;
      CREATE UNIQUE INDEX dataset_rows_dedup ON dataset_rows (dataset_seq, dedup_key) WHERE dedup_key IS NOT NULL;
    `,
  },
  {
    version: 3,
    name: "admin writes: session ids and expiry, unique audit event ids, staged bulk row writes",
    sql: `
      -- Sessions get an id (what the admin API deletes by) and an expiry. Still keyed by the token
      -- hash (the lookup of every session request is one B-tree search). Existing sessions get the
      -- fixture's id form, sess_ + the first 24 hex digits of the hash, and never expire.
      CREATE TABLE sessions_v3 (
        token_hash TEXT PRIMARY KEY, id TEXT NOT NULL UNIQUE, user_id TEXT NOT NULL,
        expires_at TEXT, expires_ms INTEGER
      ) WITHOUT ROWID;
      INSERT INTO sessions_v3 (token_hash, id, user_id, expires_at, expires_ms)
        SELECT token_hash, 'sess_' || substr(token_hash, 1, 24), user_id, NULL, NULL FROM sessions;
      DROP TABLE sessions;
      ALTER TABLE sessions_v3 RENAME TO sessions;
      CREATE INDEX sessions_by_user ON sessions (user_id);

      -- deleteTeam removes the team's memberships; deleteDashboard its views and dataset links.
      CREATE INDEX memberships_by_team ON memberships (team_id);
      CREATE INDEX dashboard_views_by_dashboard ON dashboard_views (dashboard_id);
      CREATE INDEX dashboard_datasets_by_dashboard ON dashboard_datasets (dashboard_id);

      -- Audit event ids are unique in the log. Ids were not checked before: of events already
      -- stored with one id, the first (lowest position) holds it; later copies stay readable
      -- with a NULL event_id.
      ALTER TABLE audit_events ADD COLUMN event_id TEXT;
      UPDATE audit_events SET event_id = event ->> '$.id'
        WHERE position IN (SELECT min(position) FROM audit_events GROUP BY event ->> '$.id');
      CREATE UNIQUE INDEX audit_events_by_event_id ON audit_events (event_id);

      -- Streamed bulk row writes stage rows at positions from next_position on, which readers
      -- never see, and publish them by moving the window. A dataset has at most one staging at a
      -- time across processes: its claim row (owner token, the staged range, a heartbeat for
      -- taking over a dead process's claim). stage_from mirrors from_position on the dataset row
      -- so a webhook delivery, which reads that row anyway, knows where the staged rows begin.
      ALTER TABLE datasets ADD COLUMN stage_from INTEGER;
      CREATE TABLE dataset_stagings (
        dataset_seq INTEGER PRIMARY KEY, owner TEXT NOT NULL,
        from_position INTEGER NOT NULL, end_position INTEGER NOT NULL, heartbeat_ms INTEGER NOT NULL
      );
    `,
  },
  {
    version: 4,
    name: "datasets remember whether their columns were declared",
    sql: `ALTER TABLE datasets ADD COLUMN columns_declared INTEGER NOT NULL DEFAULT 0;`,
  },
  {
    version: 5,
    name: "keys remember that their creator was deleted",
    sql: `ALTER TABLE api_keys ADD COLUMN creator_deleted INTEGER NOT NULL DEFAULT 0;`,
  },
  {
    version: 6,
    name: "the webhook delivery log and its daily counters",
    sql: `
      CREATE TABLE webhook_deliveries (
        connection_id TEXT NOT NULL, first_seq INTEGER NOT NULL, last_seq INTEGER NOT NULL,
        first_ms INTEGER NOT NULL, last_ms INTEGER NOT NULL, entries TEXT NOT NULL,
        PRIMARY KEY (connection_id, first_seq)
      ) WITHOUT ROWID;
      CREATE TABLE webhook_delivery_counts (
        connection_id TEXT NOT NULL, day TEXT NOT NULL, kind TEXT NOT NULL, n INTEGER NOT NULL,
        PRIMARY KEY (connection_id, day, kind)
      ) WITHOUT ROWID;
    `,
  },
  {
    version: 7,
    name: "a typed copy of declared columns for aggregates, kept by triggers",
    // Declared datasets get their copy at start (ensureDatasetValues): one read of their rows.
    sql: DATASET_VALUES_SQL,
  },
  {
    version: 8,
    name: "change log",
    sql: `
      -- The change feeds of datasets and input tables (src/sqlite/changes.ts): one log, positions
      -- given in the writing transaction (never again, even after retention removed them).
      CREATE TABLE changes (
        position INTEGER PRIMARY KEY AUTOINCREMENT, feed_id TEXT NOT NULL, op TEXT NOT NULL,
        row_id TEXT, row TEXT, stored_at INTEGER NOT NULL
      );
      CREATE INDEX changes_by_feed ON changes (feed_id, position);
      -- Per feed, the highest position retention removed: a cursor below it has missed changes.
      CREATE TABLE change_feeds (feed_id TEXT PRIMARY KEY, trimmed_through INTEGER NOT NULL) WITHOUT ROWID;
    `,
  },
  {
    version: 9,
    name: "webhook inserts in the change log name their row",
    sql: `
      -- A webhook delivery's insert change names its row (dataset_rows.row_key) instead of holding a
      -- copy: webhook rows never change in place, and a row retention moved below its dataset's window
      -- stays until no change names it (src/sqlite/changes.ts). Older changes keep their copies.
      ALTER TABLE changes ADD COLUMN row_ref INTEGER;
      CREATE INDEX changes_by_row_ref ON changes (feed_id, row_ref) WHERE row_ref IS NOT NULL;
    `,
  },
  {
    version: 10,
    name: "a batch's webhook inserts are one change row",
    sql: `
      -- The inserts of the rows a group commit stored in one dataset, at consecutive positions and row keys,
      -- are one change row: row_ref the first row, row_span how many, position the last of the positions
      -- it covers (src/sqlite/changes.ts expands it). NULL: one change (a copy, or the one row row_ref names).
      ALTER TABLE changes ADD COLUMN row_span INTEGER;
    `,
  },
];

/** Bring the database up to the newest version; returns the versions applied now. */
export function migrate(db: Database, migrations: readonly Migration[] = MIGRATIONS): number[] {
  db.exec(
    "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at " +
      "TEXT NOT NULL)",
  );
  const applied = new Set(
    db
      .prepare<[], { version: number }>("SELECT version FROM schema_migrations")
      .all()
      .map((r) => r.version),
  );
  const record = db.prepare("INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)");
  const done: number[] = [];
  for (const migration of [...migrations].sort((a, b) => a.version - b.version)) {
    if (applied.has(migration.version)) continue;
    // IMMEDIATE: two processes starting on one file cannot both apply a step.
    db.transaction(() => {
      const again = db.prepare("SELECT 1 FROM schema_migrations WHERE version = ?").get(migration.version);
      if (again) return;
      db.exec(migration.sql);
      // Migration bookkeeping is not request data: wall-clock time is fine here.
      record.run(migration.version, migration.name, new Date().toISOString());
      done.push(migration.version);
    }).immediate();
  }
  return done;
}
