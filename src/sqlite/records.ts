import type * as Database from "./driver.js";
import { type GroupCommit, groupCommit } from "../sql/group-commit.js";
import { writeTransaction } from "./db.js";
import type { StoreFaults } from "./faults.js";

/** Writes queued before a group is committed at once, whatever the turn (bounds the queue under a flood). */
const GROUP_LIMIT = 10_000;

/**
 * The records requests leave behind (audit events, usage counters) on the
 * group commit every SQL store shares (sql/group-commit.ts): writes queued
 * in the same turn of the event loop run in one IMMEDIATE transaction (one
 * WAL commit) at the end of that turn, and each promise settles only after
 * that commit — the same shape as webhook ingest. `flush()` commits what is
 * queued before a read that must see it.
 *
 * Durability is SQLite's under WAL with `synchronous=NORMAL`: once a promise
 * has resolved, the write survives kill -9 of the process (an OS crash or
 * power loss may roll back the last commits). When one write fails the
 * group (a duplicate audit event id), each is committed again alone, so it
 * fails only its own promise. When another process holds the write lock the
 * group waits for it whole (`writeTransaction`), then commits or fails
 * together; a fault of the file (closed, disk full, I/O) fails the group
 * with 503.
 */
export type RecordWrites = GroupCommit<() => void, void>;

export function recordWrites(db: Database.Database, faults: StoreFaults): RecordWrites {
  const run = writeTransaction(db, (writes: readonly (() => void)[]) => {
    for (const write of writes) write();
  });
  const committed = (writes: readonly (() => void)[]) => writes.map(() => undefined);
  return groupCommit<() => void, void>({
    limit: GROUP_LIMIT,
    reported: faults.reported,
    commit(writes) {
      const done = run(writes);
      return done instanceof Promise ? done.then(() => committed(writes)) : committed(writes);
    },
  });
}
