import type { Database, Transaction } from "./driver.js";

/*
 * What the adapted drivers (driver-node.ts, driver-bun.ts) share.
 */

/** The error every driver throws for a call on a closed connection (better-sqlite3's own). */
export function closedConnection(): TypeError {
  return new TypeError("The database connection is not open");
}

/** SQLite's primary result codes by number (https://sqlite.org/rescode.html), as better-sqlite3 names them. */
const PRIMARY_CODES: Record<number, string> = {
  1: "SQLITE_ERROR",
  2: "SQLITE_INTERNAL",
  3: "SQLITE_PERM",
  4: "SQLITE_ABORT",
  5: "SQLITE_BUSY",
  6: "SQLITE_LOCKED",
  7: "SQLITE_NOMEM",
  8: "SQLITE_READONLY",
  9: "SQLITE_INTERRUPT",
  10: "SQLITE_IOERR",
  11: "SQLITE_CORRUPT",
  12: "SQLITE_NOTFOUND",
  13: "SQLITE_FULL",
  14: "SQLITE_CANTOPEN",
  15: "SQLITE_PROTOCOL",
  17: "SQLITE_SCHEMA",
  18: "SQLITE_TOOBIG",
  19: "SQLITE_CONSTRAINT",
  20: "SQLITE_MISMATCH",
  21: "SQLITE_MISUSE",
  22: "SQLITE_NOLFS",
  23: "SQLITE_AUTH",
  25: "SQLITE_RANGE",
  26: "SQLITE_NOTADB",
};

/**
 * SQLite's own message of each code (`sqlite3_errstr`), for a binding that
 * gives the message only (Deno's node:sqlite).
 */
const CODES_BY_MESSAGE: [RegExp, string][] = [
  [/^database is locked/, "SQLITE_BUSY"],
  [/^database table is locked/, "SQLITE_LOCKED"],
  [/^attempt to write a readonly database/, "SQLITE_READONLY"],
  [/^disk I\/O error/, "SQLITE_IOERR"],
  [/^database disk image is malformed/, "SQLITE_CORRUPT"],
  [/^database or disk is full/, "SQLITE_FULL"],
  [/^unable to open database file/, "SQLITE_CANTOPEN"],
  [/^locking protocol/, "SQLITE_PROTOCOL"],
  [/^access permission denied/, "SQLITE_PERM"],
  [/^large file support is disabled/, "SQLITE_NOLFS"],
  [/^file is not a database/, "SQLITE_NOTADB"],
  [/constraint failed/, "SQLITE_CONSTRAINT"],
];

/**
 * The code name (`SQLITE_BUSY`) of an error's SQLite result code (extended
 * codes keep their primary code's name), or of its message.
 */
export function sqliteCodeOf(resultCode: unknown, message: unknown): string | null {
  if (typeof resultCode === "number") {
    const name = PRIMARY_CODES[resultCode & 0xff];
    if (name !== undefined) return name;
  }
  if (typeof message !== "string") return null;
  for (const [pattern, code] of CODES_BY_MESSAGE) if (pattern.test(message)) return code;
  return null;
}

/**
 * better-sqlite3's `db.transaction(fn)` over plain SQL: BEGIN (or IMMEDIATE,
 * EXCLUSIVE), `fn`, COMMIT, or ROLLBACK when it throws; inside a transaction
 * already open, a savepoint instead, so that nested calls compose.
 */
export function transactionOf<F extends Parameters<Database["transaction"]>[0]>(db: Database, fn: F): Transaction<F> {
  const kind = (begin: string) =>
    function (this: unknown, ...args: unknown[]): ReturnType<F> {
      if (db.inTransaction) {
        db.exec("SAVEPOINT dataport_nested");
        try {
          const result = fn.apply(this, args) as ReturnType<F>;
          db.exec("RELEASE dataport_nested");
          return result;
        } catch (error) {
          if (db.inTransaction) db.exec("ROLLBACK TO dataport_nested; RELEASE dataport_nested");
          throw error;
        }
      }
      db.exec(begin);
      try {
        const result = fn.apply(this, args) as ReturnType<F>;
        db.exec("COMMIT");
        return result;
      } catch (error) {
        if (db.inTransaction) db.exec("ROLLBACK");
        throw error;
      }
    };
  const deferred = kind("BEGIN");
  return Object.assign(deferred, {
    deferred,
    immediate: kind("BEGIN IMMEDIATE"),
    exclusive: kind("BEGIN EXCLUSIVE"),
  }) as unknown as Transaction<F>;
}

/** The first column's value of a row read as an object (undefined for no row). */
export function firstValue(row: Record<string, unknown> | undefined): unknown {
  if (row === undefined) return undefined;
  for (const key in row) return row[key];
  return undefined;
}
