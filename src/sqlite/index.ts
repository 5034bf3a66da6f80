import type * as Database from "./driver.js";
import type { SqliteDriverName } from "./driver.js";
import type { SeedSpace } from "../domain/seed-space.js";
import type { Storage } from "../ports/storage.js";
import { wrapStoreCalls } from "../sql/store-calls.js";
import { appendAuditStatement, sqliteAudit } from "./audit.js";
import { sqliteCatalog } from "./catalog.js";
import { datasetRecords } from "./dataset-records.js";
import { appendRowsStatement, sqliteRows } from "./rows.js";
import { syncDatasetValues } from "./dataset-values.js";
import { syncDatasetIndexes } from "./row-indexes.js";
import { dashboardViewStatement, insertDashboardStatement, sqliteDashboards } from "./dashboards.js";
import { openSqlite, type SqliteStorageOptions, writeTransaction } from "./db.js";
import { recordWrites } from "./records.js";
import { datasetChangeFeeds } from "../storage/change-feeds.js";
import { sqliteChangeFeeds } from "./changes.js";
import { insertApiKeyStatement, insertSessionStatement, sqliteIdentity } from "./identity.js";
import { insertTableStatement, sqliteTables } from "./tables.js";
import { creditUsageStatement, refreshRunStatement, sqliteUsage } from "./usage.js";
import { sqliteWebhooks } from "./webhooks.js";

export type { SqliteStorageOptions } from "./db.js";
export type {
  Database as SqliteDatabase,
  HostDatabase,
  SqliteDriverName,
  Statement as SqliteStatement,
} from "./driver.js";
export { MIGRATIONS, migrate, type Migration } from "./migrations.js";

export interface SqliteStorage extends Storage {
  /** Escape hatch for tests and tools: the writer connection (better-sqlite3's API, whichever binding is under it). */
  readonly db: Database.Database;
  /** The SQLite binding the store runs on (see `SqliteStorageOptions.driver`). */
  readonly driver: SqliteDriverName;
}

/**
 * Durable storage in one SQLite file through better-sqlite3, node:sqlite or
 * bun:sqlite (`driver`, chosen by the runtime when not given): WAL,
 * `synchronous=NORMAL`, versioned migrations applied on open. Several
 * processes may open the same file; SQLite serialises their writes, and a
 * write that finds another process's lock is tried again later (never
 * blocking the event loop) until `busyTimeoutMs`. Reads that may take long
 * run on reader threads (`readerThreads`), ended at `callTimeoutMs`. A
 * fault of the file (busy past the timeout, disk full, read-only, I/O)
 * answers 503 `storage_unavailable`, and `ping` then fails until the store
 * writes again. Every write is visible to the next read of every process on
 * the file: what is remembered is checked against `PRAGMA data_version` and
 * this process's own writes.
 */
export function createSqliteStorage(options: SqliteStorageOptions): SqliteStorage {
  const handle = openSqlite(options);
  const { db } = handle;
  const webhooks = sqliteWebhooks(handle);
  // Audit events and usage counters share one group commit per turn of the event loop.
  const records = recordWrites(db, handle.faults);
  const usage = sqliteUsage(handle, records);
  const load = seedTransaction(db);
  const probe = db.prepare("SELECT 1");
  const { identity, credentials } = sqliteIdentity(handle);
  const { faults } = handle;
  // A write that commits whatever the state of the file: readiness tries it while the store is known not to write.
  const probeRow = db.prepare(
    "INSERT INTO meta (key, value) VALUES ('write_probe', ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
  );
  const probeWrite = writeTransaction(db, (at: string) => probeRow.run(at));
  // Every call's failure as the storage port's fault clause says, whichever statement met it (a read on a
  // closed connection, an I/O error of a read): 503 `storage_unavailable` with `Retry-After`.
  const datasets = datasetRecords(handle);
  return wrapStoreCalls<SqliteStorage>(
    {
      identity,
      credentials: { ...credentials, teamsFrom: identity },
      catalog: sqliteCatalog(handle, datasets),
      rows: { ...sqliteRows(handle, datasets), ...datasetChangeFeeds(sqliteChangeFeeds(handle)) },
      tables: sqliteTables(handle),
      webhooks: {
        getWebhookEndpoint: webhooks.getWebhookEndpoint,
        ingestWebhookRow: webhooks.ingestWebhookRow,
        updateWebhookSettings: webhooks.updateWebhookSettings,
        createWebhookConnection: webhooks.createWebhookConnection,
        recordWebhookDeliveries: webhooks.recordWebhookDeliveries,
        listWebhookDeliveries: webhooks.listWebhookDeliveries,
        getWebhookDelivery: webhooks.getWebhookDelivery,
        webhookDeliveryCounts: webhooks.webhookDeliveryCounts,
      },
      audit: sqliteAudit(handle, records),
      dashboards: sqliteDashboards(handle),
      usage,
      async seed(space) {
        try {
          return await faults.whenFree(() => load(space));
        } finally {
          handle.identityVersion++;
          webhooks.forget();
        }
      },
      async ping() {
        // Runs on the writer connection: it throws once the database is closed.
        probe.get();
        // After a write failed on the file (full, read-only, locked past the timeout): ready once one commits again.
        if (faults.unwritable) {
          await probeWrite(new Date().toISOString());
          faults.cleared();
        }
      },
      async close() {
        // What is queued is committed first, while the connection is open (a host may have closed it itself).
        if (db.open) {
          webhooks.flush();
          records.flush();
        }
        await handle.readers?.close();
        handle.close();
      },
      db,
      driver: handle.driver,
    },
    { timeoutMs: 0, reported: faults.reported },
  );
}

/** The whole space in one IMMEDIATE transaction, so two processes seeding one file load it once. */
function seedTransaction(db: Database.Database): (space: SeedSpace) => "loaded" | "kept" {
  const seeded = db.prepare("SELECT 1 FROM meta WHERE key = 'seeded'");
  const mark = db.prepare("INSERT INTO meta (key, value) VALUES ('seeded', '1')");
  const business = db.prepare("INSERT INTO businesses (id, name) VALUES (?, ?)");
  const team = db.prepare("INSERT INTO teams (id, name, plan, business_id, is_personal) VALUES (?, ?, ?, ?, ?)");
  const user = db.prepare("INSERT INTO users (id, email, name, business_admin) VALUES (?, ?, ?, ?)");
  const membership = db.prepare("INSERT INTO memberships (user_id, team_id, role) VALUES (?, ?, ?)");
  const session = insertSessionStatement(db);
  const apiKey = insertApiKeyStatement(db);
  const connection = db.prepare(
    "INSERT INTO connections (id, team_id, name, type, config, created_at, endpoint_id) VALUES (?, ?, ?, ?, ?, ?, ?)",
  );
  const dataset = db.prepare<unknown[], { seq: number }>(
    `INSERT INTO datasets (id, team_id, name, type, connection_id, source, columns, columns_declared, last_refreshed_at, updated_at,
       first_position, next_position)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0, ?) RETURNING seq`,
  );
  const rows = appendRowsStatement(db);
  const table = insertTableStatement(db);
  const dashboard = insertDashboardStatement(db);
  const view = dashboardViewStatement(db);
  const run = refreshRunStatement(db);
  const credit = creditUsageStatement(db);
  const audit = appendAuditStatement(db);

  const load = db.transaction((space: SeedSpace): "loaded" | "kept" => {
    if (seeded.get()) return "kept";
    for (const b of space.businesses) business.run(b.id, b.name);
    for (const t of space.teams) team.run(t.id, t.name, t.plan, t.businessId, t.isPersonal ? 1 : 0);
    for (const u of space.users) user.run(u.id, u.email, u.name, u.businessAdmin ? 1 : 0);
    for (const m of space.memberships) membership.run(m.userId, m.teamId, m.role);
    for (const s of space.sessions) session(s);
    for (const k of space.apiKeys) apiKey(k);
    for (const c of space.connections) {
      const endpointId = c.type === "webhook" && typeof c.config.endpointId === "string" ? c.config.endpointId : null;
      connection.run(c.id, c.teamId, c.name, c.type, JSON.stringify(c.config), c.createdAt, endpointId);
    }
    for (const d of space.datasets) {
      const { seq } = dataset.get(
        d.id,
        d.teamId,
        d.name,
        d.type,
        d.connectionId,
        d.source,
        JSON.stringify(d.columns),
        d.columnsDeclared === true ? 1 : 0,
        d.lastRefreshedAt,
        d.updatedAt,
        d.rows.length,
      )!;
      rows(seq, 0, d.rows);
      if (d.columnsDeclared === true)
        syncDatasetIndexes(
          db,
          seq,
          d.columns.map((c) => c.name),
        );
      if (d.columnsDeclared === true) syncDatasetValues(db, seq, d.columns);
    }
    for (const t of space.tables) table(t);
    for (const d of space.dashboards) dashboard(d);
    for (const v of space.dashboardViews) view(v);
    for (const r of space.refreshRuns) run(r);
    for (const c of space.creditUsage) credit(c);
    // Fixture events are stored in file order, all at the start of time.
    for (const e of space.auditEvents) audit(e, 0);
    mark.run();
    return "loaded";
  });
  return (space) => load.immediate(space);
}
