import { postgresAggregates } from "./aggregate.js";
import type { Socket } from "node:net";
import pg from "../peers/pg.js";
import type { Storage } from "../ports/storage.js";
import { wrapStoreCalls } from "../sql/store-calls.js";
import { postgresAudit } from "./audit.js";
import { changesChannel, postgresChangeLog } from "./changes.js";
import { datasetChangeFeeds, headBeforePage } from "../storage/change-feeds.js";
import { postgresCatalog } from "./catalog.js";
import { type OpenReads, postgresRows } from "./rows.js";
import { catalogChannel, listenerName, watchCatalog } from "./catalog-events.js";
import { schemaListener } from "./listener.js";
import { briefly, createDb, type Db, DEFAULT_BOUNDS, guardClients, storeFault } from "./db.js";
import { postgresDashboards } from "./dashboards.js";
import { postgresCredentials, postgresIdentity } from "./identity.js";
import { ensureDatasetValues } from "./dataset-values.js";
import { migrate } from "./migrations.js";
import { seedSpace } from "./seed.js";
import { sessionReads } from "./session-read.js";
import { postgresTables } from "./tables.js";
import { postgresUsage } from "./usage.js";
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
   * How long getting a connection may take (connecting, or waiting for a
   * free one) before the call fails with 503 `storage_unavailable`, in ms,
   * for the pool created from `connectionString`. Default 2000.
   */
  connectTimeoutMs?: number;
  /**
   * How long a connection of the pool created from `connectionString` may
   * wait for an answer with nothing moving on it (a stalled network, a
   * frozen server) before it is given up: its statement fails as a lost
   * connection and the pool connects anew. A backstop behind `callTimeoutMs`
   * that frees the pool slot; long enough for the largest bulk statements.
   * Default 60,000.
   */
  statementTimeoutMs?: number;
  /**
   * How long one call of the store may take before it fails with 503
   * `storage_unavailable`, in ms (default 10,000; 0: no limit), so a
   * database that stalls (a frozen server, a network that drops packets)
   * costs a request at most this long. A streamed bulk row write is bounded
   * per statement (`statementTimeoutMs`), not as a whole.
   */
  callTimeoutMs?: number;
  /**
   * How long a transaction of the store may stay open while its connection
   * is silent (a stalled network, a frozen process), in ms: PostgreSQL then
   * ends the session, so its locks and its Idempotency-Keys are freed
   * (`idle_in_transaction_session_timeout`, set for each transaction of the
   * store, on a host's pool too). Long reads streaming to a slow reader are
   * bounded at 35 s instead. Default 5000; 0 leaves the session's setting.
   */
  idleTransactionTimeoutMs?: number;
  /**
   * How long a table row write (and the Idempotency-Key it is made under)
   * waits for a lock another transaction holds before failing with 503
   * `storage_unavailable` and `Retry-After` (`lock_timeout`, for each such
   * transaction), in ms, so writes do not queue behind another instance's
   * stalled transaction. A request waiting for its own Idempotency-Key held
   * by a request still writing gets 409 `idempotency_key_in_use` instead.
   * Default 2000; 0 leaves the session's setting.
   */
  lockTimeoutMs?: number;
  /**
   * How long a webhook delivery waits for the change feed to confirm that a
   * remembered endpoint is still current, in ms. Past it the endpoint is
   * read from the database instead (and the listening connection, which
   * did not answer, is replaced). Default 500.
   */
  freshnessTimeoutMs?: number;
  /**
   * How long an audit read waits for appends still open (the feed's horizon,
   * `feed-horizon.ts`) that hold back events already committed before
   * returning what is readable. Default 50 ms.
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
  for (const name of ["idleTransactionTimeoutMs", "lockTimeoutMs"] as const) {
    const value = options[name];
    if (value !== undefined && !(typeof value === "number" && value >= 0 && Number.isFinite(value))) {
      throw new TypeError(`createPostgresStorage: ${name} must be a finite number of milliseconds, 0 or more`);
    }
  }
  const owned = !options.pool;
  const pool =
    options.pool ??
    new pg.Pool({
      connectionString: options.connectionString ?? process.env.DATABASE_URL,
      max: options.maxConnections ?? 10,
      connectionTimeoutMillis: options.connectTimeoutMs ?? 2000,
      keepAlive: true,
      keepAliveInitialDelayMillis: 10_000,
    });
  const schema = options.schema ?? "dataport";
  const log = options.log ?? ((message, error) => console.error(`dataport: ${message}:`, error));
  if (owned) giveUpStalledConnections(pool, options.statementTimeoutMs ?? 60_000);
  // A client that loses its connection (a failover, a terminated backend) must not crash the process,
  // whether idle, checked out, or on its way from one to the other: the pool drops it and connects anew
  // on demand. A host's pool gets the listeners too. Logged as its code and message only: pg's error
  // carries its client (and the connection settings).
  guardClients(pool);
  pool.on("error", (error) =>
    log("an idle PostgreSQL connection was lost; the pool connects anew on demand", briefly(error)),
  );
  try {
    await migrate(pool, schema);
  } catch (error) {
    if (owned) await pool.end().catch(() => {});
    throw error;
  }
  const db = createDb(pool, schema, log, {
    idleMs: options.idleTransactionTimeoutMs ?? DEFAULT_BOUNDS.idleMs,
    lockMs: options.lockTimeoutMs ?? DEFAULT_BOUNDS.lockMs,
  });
  await ensureDatasetValues(db);
  // One listening connection for the catalog's notifications and the change feeds' wake-ups.
  const listener = schemaListener(pool, listenerName(schema), [catalogChannel(schema), changesChannel(schema)]);
  const watch = watchCatalog(listener, schema, { syncTimeoutMs: options.freshnessTimeoutMs ?? 500 });
  const seen = sessionReads();
  const reads: OpenReads = new Set();
  const changes = postgresChangeLog(db, {
    visibilityWaitMs: options.auditVisibilityWaitMs,
    notifications: { listener, channel: changesChannel(schema) },
  });
  const { settled: deliveriesSettled, ...webhooks } = postgresWebhooks(db, watch, changes);
  const { flushUsage, ...usage } = postgresUsage(db, log);
  let closed = false;
  const identity = postgresIdentity(db, seen);
  // Every call bounded by callTimeoutMs, and a database that is unavailable (a lost connection, a failover,
  // no connection within connectTimeoutMs) answered as the storage port's fault clause says, whichever
  // statement met it: 503 `storage_unavailable` with `Retry-After`.
  const timeoutMs = options.callTimeoutMs ?? 10_000;
  // An aggregate past the call deadline is cancelled by PostgreSQL too, not left running.
  const aggregates = postgresAggregates(db, timeoutMs);
  return wrapStoreCalls<PostgresStorage>(
    {
      identity,
      credentials: { ...postgresCredentials(db, seen), teamsFrom: identity },
      catalog: postgresCatalog(db, watch),
      rows: headBeforePage({ ...postgresRows(db, reads, aggregates), ...datasetChangeFeeds(changes) }),
      tables: { ...postgresTables(db, changes), aggregateTableRows: aggregates.aggregateTableRows },
      webhooks,
      audit: postgresAudit(db, { visibilityWaitMs: options.auditVisibilityWaitMs }),
      dashboards: postgresDashboards(db),
      usage,
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
        await Promise.all([...reads].map((read) => read.end(false)));
        // This instance's readers no longer wait: writers stop notifying for them.
        await changes.close();
        await listener.close();
        if (owned) await pool.end();
      },
      db,
    },
    { timeoutMs, reported: storeFault, subject: "the database" },
  );
}

/**
 * A pooled connection over which nothing has moved for `timeoutMs` while it
 * is open is given up (its socket closed, so the statement on it fails as a
 * lost connection and the pool replaces it): a stalled network or a frozen
 * server must not hold a pool slot forever. Idle connections are closed by
 * the pool long before (after 10 s), so only a connection waiting for an
 * answer gets this old. A timer per socket, refreshed by Node as data
 * moves, instead of one per statement.
 */
function giveUpStalledConnections(pool: pg.Pool, timeoutMs: number): void {
  if (!(timeoutMs > 0) || !Number.isFinite(timeoutMs)) return;
  pool.on("connect", (client) => {
    const socket = (client as unknown as { connection?: { stream?: Socket } }).connection?.stream;
    socket?.setTimeout(timeoutMs, () =>
      socket.destroy(new Error(`no answer from PostgreSQL for ${timeoutMs} ms; connection given up`)),
    );
  });
}

export { MIGRATIONS, migrate } from "./migrations.js";
