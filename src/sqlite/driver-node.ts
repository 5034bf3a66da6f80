import type { Database, FunctionOptions, RunResult, Statement } from "./driver.js";
import { closedConnection, firstValue, sqliteCodeOf, transactionOf } from "./driver-shared.js";

/*
 * `node:sqlite` (Node 22.13 and later, Deno) as the store's `Database`. What
 * it lacks is made here: `pluck` (its `setReturnArrays`, or the row's first
 * value before 22.16), `transaction` (BEGIN / SAVEPOINT, as better-sqlite3
 * does it), `pragma`; its errors carry SQLite's code as better-sqlite3's do
 * (`code: "SQLITE_BUSY"`), and a call on a closed connection throws
 * better-sqlite3's TypeError, so faults.ts reads every driver's errors alike.
 */

/** The part of `node:sqlite` used here (its types are not in @types/node 20). */
export interface NodeSqliteModule {
  DatabaseSync: {
    new (path: string, options?: { readOnly?: boolean }): NodeSqliteDatabase;
    prototype: Partial<NodeSqliteDatabase>;
  };
}

export interface NodeSqliteDatabase {
  prepare(source: string): NodeSqliteStatement;
  exec(source: string): void;
  function(name: string, options: FunctionOptions, fn: (...args: never[]) => unknown): void;
  close(): void;
  location(): string | null;
  readonly isOpen?: boolean;
  readonly isTransaction?: boolean;
}

interface NodeSqliteStatement {
  get(...params: unknown[]): unknown;
  all(...params: unknown[]): unknown[];
  run(...params: unknown[]): RunResult;
  iterate(...params: unknown[]): IterableIterator<unknown>;
  setReturnArrays?(on: boolean): void;
}

export function nodeDatabase(raw: NodeSqliteDatabase): Database {
  let closed = false;
  const db: Database = {
    prepare<P extends unknown[] | {}, R>(source: string): P extends unknown[] ? Statement<P, R> : Statement<[P], R> {
      try {
        return new NodeStatement(raw.prepare(source)) as unknown as P extends unknown[]
          ? Statement<P, R>
          : Statement<[P], R>;
      } catch (error) {
        throw translated(error);
      }
    },
    exec(source) {
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
      return !closed && raw.isOpen !== false;
    },
    get inTransaction() {
      // node:sqlite throws on a closed connection; better-sqlite3 answers false.
      return db.open && raw.isTransaction === true;
    },
    close() {
      closed = true;
      try {
        raw.close();
      } catch (error) {
        throw translated(error);
      }
      return db;
    },
  };
  return db;
}

class NodeStatement {
  readonly #raw: NodeSqliteStatement;
  #plucked = false;

  constructor(raw: NodeSqliteStatement) {
    this.#raw = raw;
  }

  get(...params: unknown[]): unknown {
    try {
      const row = this.#raw.get(...params);
      return this.#plucked && row !== undefined ? this.#first(row) : row;
    } catch (error) {
      throw translated(error);
    }
  }

  all(...params: unknown[]): unknown[] {
    try {
      const rows = this.#raw.all(...params);
      return this.#plucked ? rows.map((row) => this.#first(row)) : rows;
    } catch (error) {
      throw translated(error);
    }
  }

  run(...params: unknown[]): RunResult {
    try {
      return this.#raw.run(...params);
    } catch (error) {
      throw translated(error);
    }
  }

  *iterate(...params: unknown[]): IterableIterator<unknown> {
    let rows: IterableIterator<unknown>;
    try {
      rows = this.#raw.iterate(...params);
    } catch (error) {
      throw translated(error);
    }
    const plucked = this.#plucked;
    // Ending the loop early (return) ends the statement's iteration too.
    try {
      for (const row of rows) yield plucked ? this.#first(row) : row;
    } catch (error) {
      throw translated(error);
    }
  }

  pluck(toggle = true): this {
    this.#plucked = toggle;
    this.#raw.setReturnArrays?.(toggle);
    return this;
  }

  #first(row: unknown): unknown {
    return Array.isArray(row) ? row[0] : firstValue(row as Record<string, unknown>);
  }
}

/** node:sqlite's error with SQLite's code name as `code`, or the closed-connection TypeError. */
function translated(error: unknown): unknown {
  const e = error as { code?: unknown; errcode?: unknown; errstr?: unknown; message?: unknown } | null;
  if (e?.code === "ERR_SQLITE_ERROR") {
    const code = sqliteCodeOf(e.errcode, typeof e.errstr === "string" ? e.errstr : e.message);
    if (code !== null)
      Object.defineProperty(error, "code", { value: code, writable: true, configurable: true, enumerable: true });
    return error;
  }
  if (e?.code === "ERR_INVALID_STATE" && typeof e.message === "string" && /not open|finalized/.test(e.message))
    return closedConnection();
  return error;
}
