import type { Database, FunctionOptions, RunResult, Statement } from "./driver.js";
import { closedConnection, firstValue, sqliteCodeOf, transactionOf } from "./driver-shared.js";

/*
 * `bun:sqlite` as the store's `Database`. Its API is better-sqlite3's in
 * most of what the store uses; what differs is made here: `get` answers
 * null for no row (undefined here), `pluck` reads `values()`, `pragma` and
 * `open` are missing, and a call on a closed connection throws
 * better-sqlite3's TypeError. Connections are opened `strict` (named
 * parameters bound without their prefix, as better-sqlite3 binds them).
 */

/** The part of `bun:sqlite` used here (Bun's types are not installed). */
export interface BunSqliteModule {
  Database: new (
    path: string,
    options?: { readonly?: boolean; create?: boolean; readwrite?: boolean; strict?: boolean },
  ) => BunSqliteDatabase;
}

export interface BunSqliteDatabase {
  prepare(source: string): BunSqliteStatement;
  exec(source: string): unknown;
  function(name: string, options: FunctionOptions, fn: (...args: never[]) => unknown): void;
  close(throwOnError?: boolean): void;
  readonly inTransaction: boolean;
  readonly filename: string;
}

interface BunSqliteStatement {
  get(...params: unknown[]): unknown;
  all(...params: unknown[]): unknown[];
  values(...params: unknown[]): unknown[][];
  run(...params: unknown[]): RunResult;
  iterate(...params: unknown[]): IterableIterator<unknown>;
}

export function bunDatabase(raw: BunSqliteDatabase): Database {
  // A closed connection's statements fail at once, as better-sqlite3's do.
  const state = { closed: false };
  const db: Database = {
    prepare<P extends unknown[] | {}, R>(source: string): P extends unknown[] ? Statement<P, R> : Statement<[P], R> {
      if (state.closed) throw closedConnection();
      try {
        return new BunStatement(raw.prepare(source), state) as unknown as P extends unknown[]
          ? Statement<P, R>
          : Statement<[P], R>;
      } catch (error) {
        throw translated(error);
      }
    },
    exec(source) {
      if (state.closed) throw closedConnection();
      try {
        raw.exec(source);
      } catch (error) {
        throw translated(error);
      }
      return db;
    },
    pragma(source, options) {
      const rows = db.prepare<[], Record<string, unknown>>(`PRAGMA ${source}`).all();
      return options?.simple ? firstValue(rows[0]) : rows;
    },
    function(name, options, fn) {
      raw.function(name, { deterministic: options.deterministic === true, varargs: options.varargs === true }, fn);
      return db;
    },
    transaction(fn) {
      return transactionOf(db, fn);
    },
    get open() {
      return !state.closed;
    },
    get inTransaction() {
      return !state.closed && raw.inTransaction;
    },
    close() {
      state.closed = true;
      // close(true) closes the file now (its statements are finalized);
      // close() would wait for their garbage collection.
      raw.close(true);
      return db;
    },
  };
  return db;
}

class BunStatement {
  readonly #raw: BunSqliteStatement;
  readonly #connection: { readonly closed: boolean };
  #plucked = false;

  constructor(raw: BunSqliteStatement, connection: { readonly closed: boolean }) {
    this.#raw = raw;
    this.#connection = connection;
  }

  get(...params: unknown[]): unknown {
    if (this.#connection.closed) throw closedConnection();
    try {
      if (this.#plucked) return this.#raw.values(...params)[0]?.[0];
      return this.#raw.get(...params) ?? undefined;
    } catch (error) {
      throw translated(error);
    }
  }

  all(...params: unknown[]): unknown[] {
    if (this.#connection.closed) throw closedConnection();
    try {
      return this.#plucked ? this.#raw.values(...params).map((row) => row[0]) : this.#raw.all(...params);
    } catch (error) {
      throw translated(error);
    }
  }

  run(...params: unknown[]): RunResult {
    if (this.#connection.closed) throw closedConnection();
    try {
      return this.#raw.run(...params);
    } catch (error) {
      throw translated(error);
    }
  }

  *iterate(...params: unknown[]): IterableIterator<unknown> {
    if (this.#connection.closed) throw closedConnection();
    let rows: IterableIterator<unknown>;
    try {
      rows = this.#raw.iterate(...params);
    } catch (error) {
      throw translated(error);
    }
    const plucked = this.#plucked;
    try {
      for (const row of rows) yield plucked ? firstValue(row as Record<string, unknown>) : row;
    } catch (error) {
      throw translated(error);
    }
  }

  pluck(toggle = true): this {
    this.#plucked = toggle;
    return this;
  }
}

/** bun:sqlite's error with a SQLite code name as `code`, or the closed-connection TypeError. */
function translated(error: unknown): unknown {
  const e = error as { name?: unknown; code?: unknown; errno?: unknown; message?: unknown } | null;
  if (typeof e?.message === "string" && /closed database|Database has closed/.test(e.message))
    return closedConnection();
  if (e?.name === "SQLiteError" && typeof e.code !== "string") {
    const code = sqliteCodeOf(e.errno, e.message);
    if (code !== null)
      Object.defineProperty(error, "code", { value: code, writable: true, configurable: true, enumerable: true });
  }
  return error;
}
