import type * as Database from "./driver.js";
import { type Change, changeFromRecord, changeRecord, type ChangeOp } from "../domain/changes.js";
import type { Row } from "../domain/model.js";
import type { ChangeFeedReads, ChangeRetention, StoredChange, WatchChanges } from "../ports/storage/changes.js";
import { pollingWatch } from "../storage/change-feeds.js";
import { parseJsonOrNull, type SqliteHandle, writeTransaction } from "./db.js";

/** How often a watched log looks for changes committed by any process on the file, in ms. */
const WATCH_INTERVAL_MS = 200;

/** Positions one retention call removes at most, so it stays one short transaction. */
const TRIM_MAX_POSITIONS = 50_000;

/**
 * Append one change of `feedId` (a dataset or table id) at the next position
 * of the change log, in the caller's transaction: its write and its change
 * commit together. Positions are the AUTOINCREMENT key of `changes`: SQLite
 * has one writer at a time and assigns it inside the writing transaction,
 * so changes become readable in position order (the audit log's rule).
 */
export type AppendChange = (feedId: string, storedAt: number, change: Change) => void;

export function appendChangeStatement(db: Database.Database): AppendChange {
  const insert = db.prepare<[string, ChangeOp, string | null, string | null, number]>(
    "INSERT INTO changes (feed_id, op, row_id, row, stored_at) VALUES (?, ?, ?, ?, ?)",
  );
  return (feedId, storedAt, change) => {
    const record = changeRecord(change, storedAt);
    insert.run(feedId, record.op, record.rowId, record.row === null ? null : JSON.stringify(record.row), storedAt);
  };
}

/** Remove a table's or dataset's changes with it (in the caller's transaction). */
export function forgetFeedStatement(db: Database.Database): (feedId: string) => void {
  const remove = db.prepare<[string]>("DELETE FROM changes WHERE feed_id = ?");
  const mark = db.prepare<[string]>("DELETE FROM change_feeds WHERE feed_id = ?");
  return (feedId) => {
    remove.run(feedId);
    mark.run(feedId);
  };
}

/** Reads of every feed of the log, and its retention. */
export function sqliteChangeFeeds({ db }: SqliteHandle): ChangeFeedReads & ChangeRetention & { watch: WatchChanges } {
  const trimmed = db.prepare<[string], number>("SELECT trimmed_through FROM change_feeds WHERE feed_id = ?").pluck();
  const page = db.prepare<
    [string, number, number],
    { position: number; op: ChangeOp; row_id: string | null; row: string | null; stored_at: number }
  >(
    "SELECT position, op, row_id, row, stored_at FROM changes WHERE feed_id = ? AND position > ? ORDER BY position " +
      "LIMIT +?",
  );
  // The AUTOINCREMENT counter: the highest position ever given, trimmed or not.
  const last = db.prepare<[], number | null>("SELECT seq FROM sqlite_sequence WHERE name = 'changes'").pluck();
  // Retention removes a prefix of positions: up to the first change stored at or after the cutoff.
  const firstYoung = db
    .prepare<[number], number | null>("SELECT position FROM changes WHERE stored_at >= ? ORDER BY position LIMIT 1")
    .pluck();
  const lowest = db.prepare<[], number | null>("SELECT min(position) FROM changes").pluck();
  const mark = db.prepare<[number, number]>(
    `INSERT INTO change_feeds (feed_id, trimmed_through)
     SELECT feed_id, max(position) FROM changes WHERE position >= ? AND position <= ? GROUP BY feed_id
     ON CONFLICT (feed_id) DO UPDATE SET trimmed_through = max(trimmed_through, excluded.trimmed_through)`,
  );
  const remove = db.prepare<[number, number]>("DELETE FROM changes WHERE position >= ? AND position <= ?");
  const trim = writeTransaction(db, (storedBefore: number) => {
    const from = lowest.get();
    if (from === null || from === undefined) return;
    const young = firstYoung.get(storedBefore);
    const through = Math.min(
      young === null || young === undefined ? Number.MAX_SAFE_INTEGER : young - 1,
      from + TRIM_MAX_POSITIONS - 1,
    );
    if (through < from) return;
    mark.run(from, through);
    remove.run(from, through);
  });
  const readPage = db.transaction((feedId: string, after: string | null, limit: number) => {
    const through = trimmed.get(feedId) ?? 0;
    if (after !== null && Number(after) < through) return null;
    return page.all(feedId, after === null ? through : Number(after), limit + 1);
  });
  return {
    // The store's own signal: the AUTOINCREMENT counter, which every process's commit of a change moves.
    watch: pollingWatch(
      async () => String(last.get() ?? 0),
      WATCH_INTERVAL_MS,
      () => db.open,
      (message, error) => console.error(`dataport: ${message}:`, error),
    ),
    async read(feedId, { after, limit }) {
      // One snapshot for the retention mark and the page: a trim by another process cannot fall between them.
      const rows = readPage(feedId, after, limit);
      if (rows === null) return { changes: [], hasMore: false, expired: true };
      const changes = rows.slice(0, limit).map((r): StoredChange => ({
        position: String(r.position),
        change: changeFromRecord({
          op: r.op,
          rowId: r.row_id,
          row: parseJsonOrNull<Row>(r.row),
          storedAt: r.stored_at,
        }),
      }));
      return { changes, hasMore: rows.length > limit, expired: false };
    },
    async head() {
      return String(last.get() ?? 0);
    },
    async trimChanges(storedBefore) {
      await trim(storedBefore);
    },
  };
}
