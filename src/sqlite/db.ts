import { resolve } from "node:path";
import { LRUCache } from "lru-cache";
import type * as Database from "./driver.js";
import type { HostDatabase, SqliteDriverName } from "./driver.js";
import { adoptDatabase, checkedDriver, chooseDriver, driverFromEnvironment, openDatabase } from "./drivers.js";
import { isBusy, storeFaults, type StoreFaults } from "./faults.js";
import { migrate } from "./migrations.js";
import { readerPool, type ReaderPool } from "./reader-pool.js";
import { registerRowQueryFunctions } from "./row-query-dialect.js";
import { deadlineOf, type StatementDeadline, statementDeadline } from "./statement-deadline.js";

export interface SqliteStorageOptions {
  /**
   * A database file (created when missing, with its directory's WAL files beside it) or `:memory:`. Needed unless
   * `database` is given.
   */
  path?: string;
  /**
   * The SQLite binding: `"better-sqlite3"`, `"node:sqlite"` (Node 22.13 and
   * later, Deno) or `"bun:sqlite"` (Bun). Default: bun:sqlite on Bun,
   * node:sqlite on Deno; on Node better-sqlite3 when it is installed and
   * loads, else node:sqlite where Node has it, else an error saying what to
   * install. Without this option the environment variable
   * DATAPORT_SQLITE_DRIVER may name one (an operator's choice, e.g. for
   * `npx dataport --db FILE`). Reader threads open their connections with
   * the same binding.
   */
  driver?: SqliteDriverName;
  /**
   * A connection the host opened: a better-sqlite3 `Database`, a
   * `node:sqlite` `DatabaseSync` or a `bun:sqlite` `Database` (its binding
   * is recognised; `path` and `driver` are then not given). The store
   * configures it (WAL, foreign keys, no busy wait, its SQL functions),
   * migrates its schema and uses it as its writer connection; reader
   * threads open the same file with the same binding. It is the store's
   * from then on: the store's `close()` closes it.
   */
  database?: HostDatabase;
  /**
   * How long a write waits for another process's write lock before it fails
   * with 503 `storage_unavailable`, in ms. Default 5000. The wait never
   * blocks the event loop: the write is tried again with a backoff.
   */
  busyTimeoutMs?: number;
  /**
   * Worker threads that run the reads which may take long (a sort or a
   * condition no row index serves, a count, a large read with conditions)
   * off the event loop, each with a read-only connection of its own to the
   * file. Started when first needed. Default 2; 0 runs every read on the
   * event loop. A `:memory:` database has none (a thread cannot open it).
   */
  readerThreads?: number;
  /**
   * How long a read may run before it is ended (interrupted, not left
   * running) and fails with 503 `storage_unavailable` and `Retry-After`, in
   * ms. Default 10,000; 0: no limit.
   */
  callTimeoutMs?: number;
  /**
   * How long a read with conditions, filters or a sort may run on the event
   * loop (when it looks short: a row index serves it, or its dataset is
   * small) before it is ended there and run again on a reader thread, in ms.
   * Default 10. 0 sends every such read to a reader thread.
   */
  loopBudgetMs?: number;
  /** Where the store reports what an operator should know (it cannot write, it writes again). Default console.error. */
  log?: (message: string, error: unknown) => void;
  /**
   * Memory for pages read again while their dataset is unchanged: a page of
   * up to 1,000 rows in stored order is kept as its rows' JSON texts, at most
   * this many bytes in all (counted as UTF-16, the least recently read
   * forgotten first). 0 keeps none. Default 8 MiB.
   */
  pageMemoryBytes?: number;
}

/**
 * The open database shared by every area module: one writer connection
 * (every driver is synchronous, so a statement or a `db.transaction` runs
 * to completion before any other request's code), plus read-only
 * connections lent out to long streamed reads so they see one snapshot and
 * never hold the writer busy.
 */
export interface SqliteHandle {
  db: Database.Database;
  /** The binding the connections are opened with. */
  driver: SqliteDriverName;
  /** Ends the writer connection's statements that run past a deadline (see statement-deadline.ts). */
  deadline: StatementDeadline;
  /** The reader threads, or null (`:memory:`, or `readerThreads: 0`): long reads then run on the event loop. */
  readers: ReaderPool | null;
  /** `callTimeoutMs`, checked (Infinity: no limit). */
  callTimeoutMs: number;
  /** `loopBudgetMs`, checked. */
  loopBudgetMs: number;
  /** `busyTimeoutMs`, checked. */
  busyTimeoutMs: number;
  /** SQLite faults as the API reports them, retries on another process's lock, and whether the store can write. */
  faults: StoreFaults;
  /** A read-only connection on the same file (snapshot isolation under WAL), or null for `:memory:`. */
  borrowReader(): Database.Database | null;
  returnReader(reader: Database.Database): void;
  /**
   * Counts this process's writes to connections and datasets. Caches of
   * them compare it, and `PRAGMA data_version` for other processes' commits
   * (which does not change on this connection's own writes).
   */
  catalogVersion: number;
  /**
   * Counts this process's writes to teams and API keys (the credential lookups' memo compares it, as `catalogVersion`).
   */
  identityVersion: number;
  /**
   * Counts this connection's writes to datasets and input tables (the
   * dataset records' memo compares it). Temporary triggers count them, so
   * no write path (ingest, bulk writes, trims, table writes, admin) can
   * forget to: every statement inserting, updating or deleting one moves it.
   */
  datasetsVersion: number;
  /**
   * Counts datasets this connection creates (also by temporary trigger). A
   * deleted dataset's seq can come back with a new dataset, and with it the
   * row keys of its positions: what is remembered by row key compares this.
   */
  datasetsMade: number;
  /** `pageMemoryBytes`, checked. */
  pageMemoryBytes: number;
  close(): void;
}

const IDLE_READERS = 4;
const DEFAULT_PAGE_MEMORY = 8 * 1024 * 1024;

export function openSqlite(options: SqliteStorageOptions): SqliteHandle {
  // Without a path better-sqlite3 opens a private database in memory: a host whose path setting
  // is missing would lose everything at exit, and each read-only connection would see its own.
  if (typeof options?.path !== "string" && options?.database === undefined) {
    throw new TypeError(
      `createSqliteStorage needs { path }: a database file, or ":memory:" (got ${options === undefined ? "no options" : `path ${typeof options?.path}`})`,
    );
  }
  if (options.database !== undefined && (options.path !== undefined || options.driver !== undefined)) {
    throw new TypeError(
      "createSqliteStorage: give either database (a connection the host opened) or path and driver, not both",
    );
  }
  const busyTimeoutMs = options.busyTimeoutMs ?? 5000;
  if (typeof busyTimeoutMs !== "number" || !(busyTimeoutMs >= 0) || busyTimeoutMs === Infinity) {
    throw new TypeError("createSqliteStorage: busyTimeoutMs must be a finite number of milliseconds, 0 or more");
  }
  const pageMemoryBytes = options.pageMemoryBytes ?? DEFAULT_PAGE_MEMORY;
  if (!Number.isSafeInteger(pageMemoryBytes) || pageMemoryBytes < 0) {
    throw new TypeError("createSqliteStorage: pageMemoryBytes must be a whole number of bytes, 0 or more");
  }
  const readerThreads = options.readerThreads ?? 2;
  if (!Number.isSafeInteger(readerThreads) || readerThreads < 0) {
    throw new TypeError("createSqliteStorage: readerThreads must be a whole number, 0 or more");
  }
  const callTimeoutMs = options.callTimeoutMs ?? 10_000;
  if (typeof callTimeoutMs !== "number" || !(callTimeoutMs >= 0)) {
    throw new TypeError("createSqliteStorage: callTimeoutMs must be a number of milliseconds, 0 or more");
  }
  const loopBudgetMs = options.loopBudgetMs ?? 10;
  if (typeof loopBudgetMs !== "number" || !(loopBudgetMs >= 0)) {
    throw new TypeError("createSqliteStorage: loopBudgetMs must be a number of milliseconds, 0 or more");
  }
  const hosted = options.database === undefined ? null : adoptDatabase(options.database);
  const named = options.driver ?? driverFromEnvironment();
  const driver = hosted?.driver ?? (named === undefined ? chooseDriver() : checkedDriver(named));
  const given = hosted?.path ?? options.path!;
  const memory = given === ":memory:" || given === "";
  const path = memory ? given : resolve(given);
  const db = hosted?.db ?? openDatabase(driver, path);
  // Opening waits for another process's lock like any start-up (migrations, the journal mode);
  // from then on the writer never blocks: a write that finds the lock taken is tried again later.
  configure(db, busyTimeoutMs);
  if (!memory) {
    db.pragma("journal_mode = WAL");
  }
  // NORMAL under WAL: a commit survives a crash of the process (kill -9);
  // only an OS crash or power loss may roll back the last commits.
  db.pragma("synchronous = NORMAL");
  db.pragma("foreign_keys = ON");
  migrate(db);
  db.pragma("busy_timeout = 0");
  const readers =
    memory || readerThreads === 0
      ? null
      : readerPool({
          path,
          driver,
          size: readerThreads,
          timeoutMs: callTimeoutMs === 0 ? Number.POSITIVE_INFINITY : callTimeoutMs,
          busyTimeoutMs,
        });

  const idle: Database.Database[] = [];
  const lent = new Set<Database.Database>();
  const handle: SqliteHandle = {
    db,
    driver,
    deadline: deadlineOf(db),
    readers,
    callTimeoutMs: callTimeoutMs === 0 ? Number.POSITIVE_INFINITY : callTimeoutMs,
    loopBudgetMs,
    busyTimeoutMs,
    faults: storeFaults({
      busyTimeoutMs,
      log:
        options.log ?? ((message, error) => console.error(`dataport: ${message}`, ...(error === null ? [] : [error]))),
    }),
    catalogVersion: 0,
    identityVersion: 0,
    datasetsVersion: 0,
    datasetsMade: 0,
    pageMemoryBytes,
    borrowReader() {
      if (memory) return null;
      // On the event loop: no busy wait (a WAL reader is not blocked by writers).
      const reader = idle.pop() ?? openReader(driver, path, 0);
      lent.add(reader);
      return reader;
    },
    returnReader(reader) {
      lent.delete(reader);
      if (!reader.open) return;
      if (idle.length < IDLE_READERS && db.open) idle.push(reader);
      else reader.close();
    },
    close() {
      void readers?.close();
      for (const reader of [...idle, ...lent]) reader.close();
      idle.length = 0;
      lent.clear();
      if (db.open) db.close();
    },
  };
  faultsByConnection.set(db, handle.faults);
  countDatasetWrites(handle);
  return handle;
}

/**
 * Temporary (this connection's own, never stored in the file) triggers on
 * datasets and input tables that move `datasetsVersion` once per row a
 * statement inserts, updates or deletes, and `datasetsMade` once per dataset
 * inserted. Another process's writes are seen through `PRAGMA data_version`
 * instead.
 */
function countDatasetWrites(handle: SqliteHandle): void {
  const { db } = handle;
  db.function("dataport_datasets_written", { varargs: false }, () => {
    handle.datasetsVersion++;
    return null;
  });
  db.function("dataport_dataset_made", { varargs: false }, () => {
    handle.datasetsMade++;
    return null;
  });
  for (const table of ["datasets", "input_tables"]) {
    for (const event of ["INSERT", "UPDATE", "DELETE"]) {
      db.exec(`CREATE TEMP TRIGGER IF NOT EXISTS dataport_${table}_${event.toLowerCase()} AFTER ${event} ON main.${table}
        BEGIN SELECT dataport_datasets_written(); END`);
    }
  }
  db.exec(`CREATE TEMP TRIGGER IF NOT EXISTS dataport_datasets_made AFTER INSERT ON main.datasets
    BEGIN SELECT dataport_dataset_made(); END`);
}

/** A read-only connection to the file, with the functions reads call. */
export function openReader(driver: SqliteDriverName, path: string, busyTimeoutMs: number): Database.Database {
  const reader = openDatabase(driver, path, { readonly: true, fileMustExist: true });
  configure(reader, busyTimeoutMs);
  return reader;
}

function configure(db: Database.Database, busyTimeoutMs: number): void {
  db.pragma(`busy_timeout = ${Math.max(0, Math.floor(busyTimeoutMs))}`);
  registerRowQueryFunctions(db);
  statementDeadline(db);
}

/**
 * JSON text from the database back to a value; objects come back as plain JSON objects (keys like `__proto__` are own
 * data).
 */
export function parseJson<T>(text: string): T {
  return JSON.parse(text) as T;
}

export function parseJsonOrNull<T>(text: string | null): T | null {
  return text === null ? null : (JSON.parse(text) as T);
}

/** The faults of each store, by its writer connection (see `writeTransaction`). */
const faultsByConnection = new WeakMap<Database.Database, StoreFaults>();

/**
 * A write transaction that takes SQLite's write lock at BEGIN (IMMEDIATE),
 * so it never fails on a read-to-write lock upgrade. On the store's writer
 * connection (which never waits for a lock, see `openSqlite`), one that
 * finds another process holding the lock answers a promise instead of a
 * value: it is tried again with a backoff, between other requests, for up
 * to `busyTimeoutMs`, then rejects with 503 (see faults.ts). A file that
 * cannot be written (disk full, read-only, I/O) throws 503 at once. A
 * caller returns or awaits what it answers.
 */
export function writeTransaction<A extends unknown[], R>(
  db: Database.Database,
  fn: (...args: A) => R,
): (...args: A) => R | Promise<R> {
  const run = immediateTransaction(db, fn);
  return (...args) => {
    try {
      return run(...args);
    } catch (error) {
      const faults = faultsByConnection.get(db);
      if (!faults) throw error;
      if (!isBusy(error)) throw faults.reported(error);
      return faults.whenFree(() => run(...args), true);
    }
  };
}

/**
 * The IMMEDIATE transaction without `writeTransaction`'s retry: it throws
 * SQLITE_BUSY at once, for a caller that waits for the lock in its own way
 * (a group commit keeps its group together).
 */
export function immediateTransaction<A extends unknown[], R>(
  db: Database.Database,
  fn: (...args: A) => R,
): (...args: A) => R {
  return db.transaction(fn).immediate as unknown as (...args: A) => R;
}

/** Positions per dataset in the row key: 2^43 (8.8 trillion appends, over 13 years at 20,000 rows/s). */
const ROW_KEY_SPAN = 2n ** 43n;
/**
 * Datasets per file the row key can tell apart: 2^20 (dataset_seq below it), so every key fits SQLite's signed 64-bit
 * rowid.
 */
const MAX_DATASET_SEQ = 2 ** 20;

/**
 * The rowid of a dataset row: `dataset_seq * 2^43 + position` (migration 2),
 * so one dataset's rows are one contiguous key range. A BigInt: keys pass
 * 2^53, past which JS numbers lose integers.
 */
export function rowKey(seq: number, position: number): bigint {
  if (seq >= MAX_DATASET_SEQ || seq < 0) throw new Error(`dataset sequence ${seq} is beyond what row keys can hold`);
  // -1 is allowed: "after position -1" is the exclusive lower bound of a range starting at 0.
  if (position < -1 || position >= 2 ** 43) throw new Error(`dataset ${seq} has used every row position`);
  return BigInt(seq) * ROW_KEY_SPAN + BigInt(position);
}

/** Let other requests run between the short transactions of a long piece of work (cleanups, staging). */
export function nextTurn(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

export interface RememberedReads<V extends object> {
  /**
   * The cache, emptied first when anything can have changed it. `dataVersion`:
   * a `PRAGMA data_version` the caller has just read on this connection (see
   * `dataVersionOf`), so that several memos checked together cost one read.
   */
  current(dataVersion?: number): LRUCache<string, V>;
}

/** `PRAGMA data_version` of this connection: it moves when another connection (another process) commits to the file. */
export function dataVersionOf(db: Database.Database): () => number {
  const statement = db.prepare<[], number>("PRAGMA data_version").pluck();
  return () => statement.get()!;
}

/**
 * Values read from the file, remembered for as long as nothing can have
 * changed them: `current()` gives the cache, emptied first when another
 * connection (another process on the file) has committed (`PRAGMA
 * data_version`, which does not move on this connection's own commits) or
 * `ownVersion` (a counter of this store's own writes to what is remembered)
 * has moved. Both checks are a counter read.
 */
export function rememberedReads<V extends object>(
  db: Database.Database,
  ownVersion: () => number,
  /** At most this many values, or values up to this total size (a value larger than `maxEntrySize` is not kept). */
  bound: number | { maxSize: number; maxEntrySize: number; sizeOf(value: V): number },
): RememberedReads<V> {
  const dataVersion = dataVersionOf(db);
  const cache = new LRUCache<string, V>(
    typeof bound === "number"
      ? { max: bound }
      : { maxSize: bound.maxSize, maxEntrySize: bound.maxEntrySize, sizeCalculation: bound.sizeOf },
  );
  let seen = { data: -1, own: -1 };
  return {
    current(data = dataVersion()) {
      const own = ownVersion();
      if (data !== seen.data || own !== seen.own) {
        cache.clear();
        seen = { data, own };
      }
      return cache;
    },
  };
}

/** `value` and everything in it frozen: a remembered value every caller shares. */
export function deepFreeze<T>(value: T): T {
  if (value !== null && typeof value === "object" && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const inner of Object.values(value)) deepFreeze(inner);
  }
  return value;
}

/*
 * A bound LIMIT is written `LIMIT +?` in every statement of this store. The
 * SQLite that better-sqlite3 bundles (3.53) reads a bare `LIMIT ?`'s bound
 * value while planning a statement with a range and an ORDER BY, so every
 * new binding expires the plan and the next step compiles the SQL again
 * (measured: a 100-row page 19.8 µs with `?`, 15.8 µs with `+?`, about 5 %
 * of a rows request under load). The unary plus is the same integer to
 * SQLite, but not a bare parameter, so the plan stays.
 * test/sqlite/statements.test.ts keeps the store's SQL to it.
 */

/** Prepared statements per connection, by SQL text (reads whose SQL is built per request). */
const preparedByConnection = new WeakMap<Database.Database, LRUCache<string, Database.Statement<unknown[], unknown>>>();

/**
 * `db.prepare(text)`, kept for the next request whose SQL has the same text
 * (a read's SQL depends on its shape — conditions, sort — and binds its
 * values), at most 256 texts per connection. For `get` and `all` only: a
 * statement being iterated is busy until its iteration ends.
 */
export function prepared<Result = unknown>(db: Database.Database, text: string): Database.Statement<unknown[], Result> {
  let cache = preparedByConnection.get(db);
  if (!cache) {
    cache = new LRUCache({ max: 256 });
    preparedByConnection.set(db, cache);
  }
  let statement = cache.get(text);
  if (!statement) {
    statement = db.prepare<unknown[], unknown>(text);
    cache.set(text, statement);
  }
  return statement as Database.Statement<unknown[], Result>;
}
