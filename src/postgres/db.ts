import { createHash } from "node:crypto";
import type { Pool, PoolClient, QueryResultRow } from "pg";
import { ApiError, storageUnavailable } from "../base/api-error.js";
import { quoteIdent } from "../sql/literals.js";
import type { IdPage, PutResult } from "../ports/storage/identity.js";

/**
 * What every area module gets: the pool, the schema-qualified name of each
 * table, and helpers for one-shot queries and transactions.
 */
export interface Db {
  pool: Pool;
  /** The quoted schema, e.g. `"dataport"`. */
  schema: string;
  /** A schema-qualified table name: `t("teams")` → `"dataport".teams`. */
  t(table: string): string;
  /**
   * One statement on a pooled connection. A read (a statement starting with
   * `select`) that fails because its connection was lost is tried again on
   * another connection (up to three tries in all: a failover ends every
   * pooled connection); a write is never repeated (it may have committed).
   */
  query<R extends QueryResultRow = QueryResultRow>(sql: string | Statement, params?: readonly unknown[]): Promise<R[]>;
  /**
   * Runs `work` in one transaction (READ COMMITTED), committing on success
   * and rolling back on a throw. The transaction is bounded (`bounds`): its
   * connection may stay silent in it at most `idleMs` (PostgreSQL then ends
   * the session, and the transaction with it); with `waitForLocks: false`
   * a lock it waits for longer than `lockMs` fails it (SQLSTATE 55P03, a
   * 503 to the request).
   */
  transaction<T>(work: (client: PoolClient) => Promise<T>, options?: { waitForLocks?: boolean }): Promise<T>;
  /** The bounds of the store's transactions. */
  readonly bounds: TransactionBounds;
  /** The store's log (the `log` option), for work that no request waits for. */
  log(message: string, error?: unknown): void;
}

/** How long a transaction of the store may wait, in ms. */
export interface TransactionBounds {
  /** `idle_in_transaction_session_timeout` of every transaction: how long its connection may stay silent in it. */
  idleMs: number;
  /** `lock_timeout` of a transaction that must not queue behind another's locks (a table row write). */
  lockMs: number;
}

/** The bounds unless the store's options say otherwise. */
export const DEFAULT_BOUNDS: TransactionBounds = { idleMs: 5_000, lockMs: 2_000 };

export function createDb(
  pool: Pool,
  schemaName: string,
  log: Db["log"] = (message, error) => console.error(`dataport: ${message}:`, error),
  bounds: TransactionBounds = DEFAULT_BOUNDS,
): Db {
  const schema = quoteIdent(schemaName);
  const begin = bounded("BEGIN", { idleMs: bounds.idleMs });
  const beginWrite = bounded("BEGIN", bounds);
  return {
    pool,
    schema,
    log,
    bounds,
    t: (table) => `${schema}.${table}`,
    async query<R extends QueryResultRow>(sql: string | Statement, params: readonly unknown[] = []) {
      // pg copies a config object before adding the values to it, so a shared Statement goes as it is.
      for (let attempt = 1; ; attempt++) {
        try {
          return (await pool.query<R>(sql, params as unknown[])).rows;
        } catch (error) {
          // pool.query hands a broken connection back as broken, so the next try gets another one
          // (after a failover the pool's other idle connections may be gone as well: a few tries).
          if (attempt >= READ_ATTEMPTS || !isConnectionLost(error) || !isRead(sql)) throw error;
        }
      }
    },
    async transaction(work, options) {
      const lease = await begun(pool, options?.waitForLocks === false ? beginWrite : begin);
      const { client } = lease;
      try {
        const result = await work(client);
        await client.query("COMMIT");
        return result;
      } catch (error) {
        await client.query("ROLLBACK").catch(() => lease.spoil());
        throw error;
      } finally {
        lease.release();
      }
    },
  };
}

/**
 * `begin` (a BEGIN statement) with the transaction's bounds set for it
 * alone (SET LOCAL), as one simple query: one round trip, and a host's pool
 * gets the bounds as well as the store's own. A bound of 0 is left unset
 * (the session's setting applies).
 */
export function bounded(begin: string, bounds: { idleMs: number; lockMs?: number }): string {
  let sql = begin;
  if (bounds.idleMs > 0) sql += `; set local idle_in_transaction_session_timeout = ${Math.ceil(bounds.idleMs)}`;
  if (bounds.lockMs !== undefined && bounds.lockMs > 0) sql += `; set local lock_timeout = ${Math.ceil(bounds.lockMs)}`;
  return sql;
}

/** A connection checked out of the pool, safe to lose while it is held. */
export interface Lease {
  readonly client: PoolClient;
  /** The connection failed or is in an unknown state: close it instead of pooling it. */
  spoil(): void;
  /** Back to the pool (or closed, when it failed or was spoiled); once. */
  release(): void;
}

/**
 * Every client `pool` creates from now on keeps an `error` listener from the
 * moment the pool hands it out the first time until it is destroyed (until
 * then the pool's own idle listener covers it). `pg` emits `error` on a
 * client whose connection is lost (a terminated backend, a failover), and
 * an `error` without a listener crashes the process. A pool's own listener
 * covers a client only while it is idle, and a lease's only once its
 * holder has it: a client released to a waiting `connect()` can receive
 * the backend's FATAL in the same socket read, before the waiter runs.
 * The event needs no handling here: the client is no longer queryable, so
 * the statement on it fails and the pool closes it when it is released.
 * Once per pool (a host may pass one pool to several stores).
 */
export function guardClients(pool: Pool): void {
  if (guarded.has(pool)) return;
  guarded.add(pool);
  pool.on("connect", (client) => {
    client.on("error", ignoreClientError);
  });
}

const guarded = new WeakSet<Pool>();

/** The statement in flight (if any) fails with its own error; the pool drops the client on release. */
function ignoreClientError(): void {}

/**
 * `pool.connect()` with an `error` listener for as long as the client is
 * checked out, attached in the pool's callback, in the same turn as the
 * pool hands the client over (a promise would resume a turn later, and an
 * `error` in between would find no listener on a client that a host's pool
 * created before `guardClients`). The event only marks the lease: the
 * query in flight fails on its own, and the connection is closed on
 * release instead of going back to the pool.
 */
export function checkout(pool: Pool): Promise<Lease> {
  return new Promise((resolve, reject) => {
    pool.connect((error, client) => {
      if (error || !client) {
        reject(error ?? new Error("the pool gave no client"));
        return;
      }
      resolve(leaseOf(client));
    });
  });
}

function leaseOf(client: PoolClient): Lease {
  let failure: Error | null = null;
  const onError = (error: Error) => {
    failure ??= error;
  };
  client.on("error", onError);
  let released = false;
  return {
    client,
    spoil() {
      failure ??= new Error("the connection is in an unknown state");
    },
    release() {
      if (released) return;
      released = true;
      client.off("error", onError);
      client.release(failure ?? undefined);
    },
  };
}

/**
 * A connection with `begin` (a BEGIN statement) run on it. A pooled
 * connection found lost at BEGIN (after a failover the idle ones are) is
 * closed and another taken: nothing ran on it yet, so this is always safe.
 */
export async function begun(pool: Pool, begin: string): Promise<Lease> {
  for (let attempt = 1; ; attempt++) {
    const lease = await checkout(pool);
    try {
      await lease.client.query(begin);
      return lease;
    } catch (error) {
      lease.spoil();
      lease.release();
      if (attempt >= READ_ATTEMPTS || !isConnectionLost(error)) throw error;
    }
  }
}

/** How often a read meeting a lost connection is tried in all. */
const READ_ATTEMPTS = 3;

/** Whether `sql` only reads (so repeating it after a lost connection changes nothing). */
function isRead(sql: string | Statement): boolean {
  const text = typeof sql === "string" ? sql : sql.text;
  return /^\s*select\b/i.test(text);
}

/**
 * SQLSTATE classes and codes that say the database could not do the work
 * now, not that the work was wrong: connection exceptions (08), operator
 * intervention (57P01 terminated by an administrator or a failover, 57P02
 * crash shutdown, 57P03 cannot connect now), insufficient resources (53),
 * serialization failure and deadlock (40001, 40P01; retrying succeeds),
 * a lock not had within `lock_timeout` (55P03: another transaction holds
 * it, maybe a stalled one another instance began), a statement cancelled
 * (57014: the `statement_timeout` set at the store call's deadline fired
 * first, or an operator cancelled it).
 */
const UNAVAILABLE_STATES = /^(08|53|57P0[1-3]|57014$|40001$|40P01$|55P03$)/;

/** Node's socket errors for a database that is down or unreachable. */
const SOCKET_ERRORS = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "ETIMEDOUT",
  "EPIPE",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "EAI_AGAIN",
  "ENOTFOUND",
]);

/** pg's own messages for a connection that is gone or could not be had in time. */
const LOST_MESSAGES = [
  "Connection terminated",
  "connection timeout",
  "timeout exceeded when trying to connect",
  "is not queryable",
  "Query read timeout",
  "connection given up",
  "Cannot use a pool after calling end",
];

/**
 * The connection a statement ran on was lost (or none could be had): the
 * statement's outcome is unknown, the database may be fine. A session the
 * server ended for idling in a transaction (25P03) counts: it is gone.
 */
export function isConnectionLost(error: unknown): boolean {
  if (!(error instanceof Error)) return false;
  const code = (error as { code?: unknown }).code;
  if (typeof code === "string" && (SOCKET_ERRORS.has(code) || /^(08|57P0[1-3]|25P03$)/.test(code))) return true;
  return LOST_MESSAGES.some((m) => error.message.includes(m));
}

/**
 * Whether `error` means the database is unavailable for now (a retry later may succeed), as opposed to a wrong
 * statement or a bug.
 */
export function isUnavailable(error: unknown): boolean {
  if (isConnectionLost(error)) return true;
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === "string" && UNAVAILABLE_STATES.test(code);
}

/**
 * `error` as the store reports it (the storage port's fault clause): 503
 * `storage_unavailable` with `Retry-After` when the database is unavailable,
 * naming no host, user or query (the cause stays on the error for the log);
 * else as it is.
 */
export function storeFault(error: unknown): unknown {
  return isUnavailable(error) && !(error instanceof ApiError) ? storageUnavailable(undefined, { cause: error }) : error;
}

/**
 * A statement of a hot path (every request or delivery runs it), parsed and
 * planned once per pooled connection instead of at every call: `pg` prepares
 * a named statement on first use on each connection. Named by a hash of its
 * text, so the same text shares a name and different texts (other schemas)
 * never do. Only for fixed texts: each one stays prepared for the
 * connection's life.
 */
export interface Statement {
  readonly name: string;
  readonly text: string;
}

export function statement(text: string): Statement {
  return { name: `dataport_${createHash("sha256").update(text).digest("hex").slice(0, 32)}`, text };
}

/**
 * A JSON text for a `json`/`jsonb` parameter. `pg` would turn a JS array into
 * a PostgreSQL array literal, so every JSON value is stringified here.
 */
export function json(value: unknown): string {
  return JSON.stringify(value ?? null);
}

/** int8/numeric columns arrive as strings; counts fit in a double. */
export function num(value: unknown): number {
  return value === null || value === undefined ? 0 : Number(value);
}

/**
 * The tail of an admin listing: ids after `page.after` in binary order, at
 * most `page.limit` (an index on `id collate "C"` makes it a range scan).
 * Appends its parameters to `params`.
 */
export function idPageSql(page: IdPage, params: unknown[]): string {
  const after = page.after === null ? "" : ` where id collate "C" > $${params.push(page.after)}`;
  return `${after} order by id collate "C" limit $${params.push(Math.max(1, Math.floor(page.limit)))}`;
}

/**
 * `returning ${PUT_RESULT}` on an upsert says whether it inserted: a row an
 * `on conflict do update` replaced carries the updating transaction in xmax,
 * a freshly inserted one carries none.
 */
export const PUT_RESULT = "(xmax = 0) as created";

export function putResult(rows: ReadonlyArray<{ created: boolean }>): PutResult {
  return rows[0]?.created ? "created" : "updated";
}

/** An error as its name, code and message, without the objects a driver hangs on it. */
export function briefly(error: Error): Error {
  const brief = new Error(error.message);
  brief.name = error.name;
  const { code } = error as { code?: unknown };
  if (typeof code === "string") (brief as Error & { code?: string }).code = code;
  return brief;
}
