import type Database from "better-sqlite3";
import { immediateTransaction } from "./db.js";
import { isBusy, type StoreFaults } from "./faults.js";

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
 * write (a duplicate audit event id) fails only its own promise. When
 * another process holds the write lock the group waits for it whole (see
 * faults.ts), then commits or fails together; any other failure (closed,
 * disk full, I/O) fails the group with 503.
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

export function groupCommit(db: Database.Database, faults: StoreFaults): GroupCommit {
  const runAll = immediateTransaction(db, (writes: readonly Pending[]) => {
    for (const p of writes) p.write();
  });
  const runOne = immediateTransaction(db, (write: () => void) => write());
  let queue: Pending[] = [];
  let scheduled = false;

  /** The group in one transaction, each write alone when one of them breaks a constraint. Throws only what failed them all (nothing settled). */
  const commit = (group: readonly Pending[]) => {
    try {
      runAll(group);
    } catch (error) {
      if (!isConstraint(error)) throw error;
      for (const p of group) {
        try {
          runOne(p.write);
        } catch (error) {
          p.reject(faults.reported(error));
          continue;
        }
        p.resolve();
      }
      return;
    }
    for (const p of group) p.resolve();
  };

  const flush = () => {
    scheduled = false;
    const group = queue;
    queue = [];
    if (group.length === 0) return;
    try {
      commit(group);
    } catch (error) {
      if (isBusy(error)) {
        // Another process holds the write lock: the group waits for it, between other requests.
        faults.whenFree(() => commit(group), true).catch((failed: unknown) => {
          for (const p of group) p.reject(failed);
        });
        return;
      }
      // Closed, disk full, I/O: the same for each write alone.
      const reported = faults.reported(error);
      for (const p of group) p.reject(reported);
    }
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
