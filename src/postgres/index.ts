import pg from "../peers/pg.js";
import type { Storage } from "../ports/storage.js";
import { postgresAnalytics } from "./analytics.js";
import { postgresAudit } from "./audit.js";
import { postgresCatalog } from "./catalog.js";
import { watchCatalog } from "./catalog-events.js";
import { createDb, type Db } from "./db.js";
import { postgresCredentials, postgresIdentity } from "./identity.js";
import { migrate } from "./migrations.js";
import { seedSpace } from "./seed.js";
import { sessionReads } from "./session-read.js";
import { postgresTables } from "./tables.js";
import { postgresWebhooks } from "./webhooks.js";

export interface PostgresStorageOptions {
  /** A `postgres://` URL; used when no `pool` is given. */
  connectionString?: string;
  /** A pool the host owns (it is not ended by `close()`). */
  pool?: pg.Pool;
  /** Where every table lives; created if missing. Default `dataport`. */
  schema?: string;
  /** Connections of the pool created from `connectionString`. Default 10. */
  maxConnections?: number;
  /**
   * How long an audit read waits for transactions that hold back events
   * already committed (the xid gate) before returning what is readable. Default 50 ms.
   */
  auditVisibilityWaitMs?: number;
  /** Where errors that must not fail a request are reported. Default console.error. */
  log?: (message: string, error: unknown) => void;
}

export interface PostgresStorage extends Storage {
  /** Escape hatch for tests and operators: the pool and schema-qualified names. */
  readonly db: Db;
}

/**
 * Storage on PostgreSQL through a `pg` pool: many Dataport instances can
 * share one database. Applies the pending migrations before resolving.
 */
export async function createPostgresStorage(options: PostgresStorageOptions = {}): Promise<PostgresStorage> {
  const owned = !options.pool;
  const pool =
    options.pool ??
    new pg.Pool({ connectionString: options.connectionString ?? process.env.DATABASE_URL, max: options.maxConnections ?? 10 });
  // An idle client that loses its connection must not crash the process.
  if (owned) pool.on("error", () => {});
  const schema = options.schema ?? "dataport";
  const log = options.log ?? ((message, error) => console.error(`dataport: ${message}:`, error));
  try {
    await migrate(pool, schema);
  } catch (error) {
    if (owned) await pool.end().catch(() => {});
    throw error;
  }
  const db = createDb(pool, schema);
  const watch = watchCatalog(pool, schema);
  const seen = sessionReads();
  const { settled: deliveriesSettled, ...webhooks } = postgresWebhooks(db, watch);
  const { flushUsage, ...analytics } = postgresAnalytics(db, log);
  let closed = false;
  return {
    ...postgresIdentity(db, seen),
    ...postgresCredentials(db, seen),
    ...postgresCatalog(db, watch),
    ...postgresTables(db),
    ...webhooks,
    ...postgresAudit(db, { visibilityWaitMs: options.auditVisibilityWaitMs }),
    ...analytics,
    async seed(space) {
      try {
        return await seedSpace(db, space);
      } finally {
        watch.changed();
        seen.forget();
      }
    },
    async ping() {
      await pool.query("SELECT 1");
    },
    async close() {
      if (closed) return;
      closed = true;
      // Deliveries already received are answered, and the usage counters written, before the pool goes.
      await deliveriesSettled();
      await flushUsage();
      await watch.close();
      if (owned) await pool.end();
    },
    db,
  };
}

export { MIGRATIONS, migrate } from "./migrations.js";
