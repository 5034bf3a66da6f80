import type Database from "better-sqlite3";
import { writeTransaction } from "./db.js";

/** Writes queued before a group is committed at once, whatever the turn (bounds the queue under a flood). */
const GROUP_LIMIT = 10_000;

/**
 * Group commit for the records requests leave behind (audit events, usage
 * counters): writes queued in the same turn of the event loop run in one
 * IMMEDIATE transaction (one WAL commit) at the end of that turn, and each
 * promise settles only after that commit — the same shape as webhook ingest.
 *
 * Durability is SQLite's under WAL with `synchronous=NORMAL`: once a promise
 * has resolved, the write survives kill -9 of the process (an OS crash or
 * power loss may roll back the last commits). If the group's transaction
 * fails, each write is retried in a transaction of its own, so one failing
 * write (a duplicate audit event id) fails only its own promise; any other
 * failure (busy past the timeout, closed, I/O) fails the group.
 */
export interface GroupCommit {
  /** Queue `write` for this turn's group; resolves once it is committed, rejects with its own error. */
  add(write: () => void): Promise<void>;
  /** Commit what is queued now (before a read that must see it, and at close). */
  flush(): void;
}

interface Pending {
  write: () => void;
  resolve: () => void;
  reject: (error: unknown) => void;
}

export function groupCommit(db: Database.Database): GroupCommit {
  const runAll = writeTransaction(db, (writes: readonly Pending[]) => {
    for (const p of writes) p.write();
  });
  const runOne = writeTransaction(db, (write: () => void) => write());
  let queue: Pending[] = [];
  let scheduled = false;

  const flush = () => {
    scheduled = false;
    const group = queue;
    queue = [];
    if (group.length === 0) return;
    try {
      runAll(group);
    } catch (error) {
      if (!isConstraint(error)) {
        // Busy, closed, I/O: the same for each write alone.
        for (const p of group) p.reject(error);
        return;
      }
      for (const p of group) {
        try {
          runOne(p.write);
        } catch (error) {
          p.reject(error);
          continue;
        }
        p.resolve();
      }
      return;
    }
    for (const p of group) p.resolve();
  };

  return {
    add(write) {
      if (queue.length >= GROUP_LIMIT) flush();
      return new Promise<void>((resolve, reject) => {
        queue.push({ write, resolve, reject });
        if (!scheduled) {
          scheduled = true;
          setImmediate(flush);
        }
      });
    },
    flush,
  };
}

function isConstraint(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === "string" && code.startsWith("SQLITE_CONSTRAINT");
}
