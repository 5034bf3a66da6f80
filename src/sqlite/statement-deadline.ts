import type * as Database from "./driver.js";

/**
 * The first term of the WHERE of every statement of this store that may
 * visit many rows (a scan for a sort or a condition without an index, a
 * count): SQLite calls it once per row it visits, so the statement can be
 * ended while it runs (see `statementDeadline`). A statement that visits
 * rows without calling it (a sorter's last merge, a huge OFFSET) cannot be
 * ended this way.
 */
export const DEADLINE_CHECK = "dataport_deadline()";

/** Rows visited between two looks at the clock: about 0.05 ms of a JSON scan. */
const CHECK_EVERY = 128;

export interface StatementDeadline {
  /**
   * `work()`, during which a statement of this connection that calls
   * `DEADLINE_CHECK` throws `expired()` once `performance.now()` passes `at`
   * (ms; Infinity: never). The throw ends the statement at once (SQLite
   * stops its step and the driver re-throws the error), so the work is
   * interrupted, not left running.
   */
  within<T>(at: number, expired: () => Error, work: () => T): T;
}

const registered = new WeakMap<Database.Database, StatementDeadline>();

/** The deadline of a connection that `statementDeadline` was registered on. */
export function deadlineOf(db: Database.Database): StatementDeadline {
  const found = registered.get(db);
  if (!found) throw new Error("dataport: the connection has no statement deadline registered");
  return found;
}

/**
 * Every driver (better-sqlite3, node:sqlite, bun:sqlite) runs a statement
 * to its end and offers no `sqlite3_interrupt` (nor a progress handler), and `worker.terminate()`
 * does not stop a thread inside a native step: a JS function that the
 * statement calls per row is the one place where it can be ended. This
 * registers it on `db`: outside `within` it only counts.
 */
export function statementDeadline(db: Database.Database): StatementDeadline {
  let at = Number.POSITIVE_INFINITY;
  let expired: (() => Error) | null = null;
  let visited = 0;
  db.function("dataport_deadline", { varargs: false, deterministic: false }, () => {
    if (++visited % CHECK_EVERY === 0 && expired !== null && performance.now() > at) throw expired();
    return 1;
  });
  const deadline: StatementDeadline = {
    within(until, reason, work) {
      const outer = { at, expired };
      at = until;
      expired = reason;
      try {
        return work();
      } finally {
        at = outer.at;
        expired = outer.expired;
      }
    },
  };
  registered.set(db, deadline);
  return deadline;
}
