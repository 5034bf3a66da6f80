/*
 * The SQLite binding under the store: better-sqlite3, `node:sqlite` (Node ≥
 * 22.13, Deno) or `bun:sqlite`, behind the part of better-sqlite3's API the
 * store uses. better-sqlite3's own connection is this interface as it is;
 * the other two are adapted (driver-node.ts, driver-bun.ts). Which one a
 * store opens, and how: drivers.ts.
 */

/** Which SQLite binding a store runs on. */
export type SqliteDriverName = "better-sqlite3" | "node:sqlite" | "bun:sqlite";

export interface RunResult {
  changes: number;
  lastInsertRowid: number | bigint;
}

/** A prepared statement (better-sqlite3's shape). Reads answer rows as objects, or their first column once plucked. */
export interface Statement<Params extends unknown[] = unknown[], Result = unknown> {
  /** The first row, or undefined when there is none. */
  get(...params: Params): Result | undefined;
  all(...params: Params): Result[];
  run(...params: Params): RunResult;
  /** The rows one at a time; the statement is busy until the iteration ends. */
  iterate(...params: Params): IterableIterator<Result>;
  /** From now on, reads answer each row's first column instead of the row. */
  pluck(toggle?: boolean): this;
}

/** A function as `Database.transaction` makes it: BEGIN (DEFERRED), or the named kind; a savepoint inside another. */
export interface Transaction<F extends TransactionFunction> {
  (...params: ArgumentsOf<F>): ReturnType<F>;
  deferred: (...params: ArgumentsOf<F>) => ReturnType<F>;
  immediate: (...params: ArgumentsOf<F>) => ReturnType<F>;
  exclusive: (...params: ArgumentsOf<F>) => ReturnType<F>;
}

// biome-ignore lint/suspicious/noExplicitAny: better-sqlite3's own constraint, so that its connection is a `Database`.
type TransactionFunction = (...params: any[]) => unknown;
type ArgumentsOf<F extends TransactionFunction> = F extends (...args: infer A) => unknown ? A : never;

export interface FunctionOptions {
  deterministic?: boolean;
  varargs?: boolean;
}

/** A connection (better-sqlite3's shape): statements run synchronously, one at a time. */
export interface Database {
  /** (Typed as better-sqlite3 types it: an object type as `Params` is one parameter of named values.) */
  prepare<Params extends unknown[] | {} = unknown[], Result = unknown>(
    source: string,
  ): Params extends unknown[] ? Statement<Params, Result> : Statement<[Params], Result>;
  exec(source: string): unknown;
  /** `PRAGMA source`: its rows, or with `simple` the first column of the first row. */
  pragma(source: string, options?: { simple?: boolean }): unknown;
  /**
   * A SQL function calling `fn`. What `fn` throws ends the statement calling
   * it and is thrown as it is by the call running the statement (the
   * statement deadline relies on this, see statement-deadline.ts).
   */
  function(name: string, options: FunctionOptions, fn: (...args: never[]) => unknown): unknown;
  transaction<F extends TransactionFunction>(fn: F): Transaction<F>;
  readonly open: boolean;
  readonly inTransaction: boolean;
  close(): unknown;
}

/**
 * A connection a host opened itself, given as `database`: a better-sqlite3
 * `Database`, a `node:sqlite` `DatabaseSync` or a `bun:sqlite` `Database`.
 * Structural, so that none of their packages' types is needed here.
 */
export type HostDatabase = object;
