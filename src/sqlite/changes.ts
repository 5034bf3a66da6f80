import type * as Database from "./driver.js";
import { type Change, changeFromRecord, changeRecord, type ChangeOp } from "../domain/changes.js";
import type { Row } from "../domain/model.js";
import type { ChangeFeedReads, ChangeRetention, StoredChange, WatchChanges } from "../ports/storage/changes.js";
import { pollingWatch } from "../storage/change-feeds.js";
import { nextTurn, parseJsonOrNull, type SqliteHandle, writeTransaction } from "./db.js";

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

/**
 * Append the insert change of a webhook row stored at `rowKey` in the
 * caller's transaction, naming the row instead of copying it: webhook rows
 * never change in place, and a row retention moved below its dataset's
 * window stays in `dataset_rows` until no change names it (`deleteUnnamedBelow`).
 * A read joins the row back.
 */
export type AppendInsertByRef = (feedId: string, storedAt: number, rowId: string, rowKey: bigint) => void;

export function appendInsertByRefStatement(db: Database.Database): AppendInsertByRef {
  const insert = db.prepare<[string, string, bigint, number]>(
    "INSERT INTO changes (feed_id, op, row_id, row_ref, stored_at) VALUES (?, 'insert', ?, ?, ?)",
  );
  return (feedId, storedAt, rowId, rowKey) => {
    insert.run(feedId, rowId, rowKey, storedAt);
  };
}

/**
 * SQL of the lowest `row_key` a change of the dataset `feedSql` (its id)
 * still names, or the highest key when none does: rows below a dataset's
 * window are deleted only below it (retention and a bulk write's sweep).
 */
export function firstNamedRowSql(feedSql: string): string {
  return `coalesce((SELECT min(row_ref) FROM changes WHERE feed_id = ${feedSql} AND row_ref IS NOT NULL), 9223372036854775807)`;
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
    "SELECT c.position, c.op, c.row_id, coalesce(c.row, r.data) AS row, c.stored_at FROM changes c " +
      "LEFT JOIN dataset_rows r ON r.row_key = c.row_ref WHERE c.feed_id = ? AND c.position > ? ORDER BY c.position " +
      "LIMIT +?",
  );
  // The AUTOINCREMENT counter: the highest position ever given, trimmed or not.
  const last = db.prepare<[], number | null>("SELECT seq FROM sqlite_sequence WHERE name = 'changes'").pluck();
  // Retention removes a prefix of positions: up to the first change stored at or after the cutoff (looked for among
  // the next TRIM_MAX_POSITIONS only, so a call reads no more than it may remove).
  const firstYoung = db
    .prepare<[number, number, number], number | null>(
      "SELECT position FROM changes WHERE position >= ? AND position < ? AND stored_at >= ? ORDER BY position LIMIT 1",
    )
    .pluck();
  const feedsIn = db
    .prepare<[number, number], string>("SELECT DISTINCT feed_id FROM changes WHERE position >= ? AND position <= ?")
    .pluck();
  // Webhook rows below their dataset's window that no change names any more (see appendInsertByRefStatement).
  const unnamedBelow = db.prepare<[string, string, string]>(
    `DELETE FROM dataset_rows WHERE row_key >= (SELECT seq * 8796093022208 FROM datasets WHERE id = ?)
       AND row_key < min((SELECT seq * 8796093022208 + first_position FROM datasets WHERE id = ?), ${firstNamedRowSql("?")})`,
  );
  const deleteUnnamedBelow = (feedId: string) => unnamedBelow.run(feedId, feedId, feedId);
  const lowest = db.prepare<[], number | null>("SELECT min(position) FROM changes").pluck();
  const mark = db.prepare<[number, number]>(
    `INSERT INTO change_feeds (feed_id, trimmed_through)
     SELECT feed_id, max(position) FROM changes WHERE position >= ? AND position <= ? GROUP BY feed_id
     ON CONFLICT (feed_id) DO UPDATE SET trimmed_through = max(trimmed_through, excluded.trimmed_through)`,
  );
  const remove = db.prepare<[number, number]>("DELETE FROM changes WHERE position >= ? AND position <= ?");
  /** One short transaction of retention; true when it removed all it may (call again). */
  const trim = writeTransaction(db, (storedBefore: number): boolean => {
    const from = lowest.get();
    if (from === null || from === undefined) return false;
    const young = firstYoung.get(from, from + TRIM_MAX_POSITIONS, storedBefore);
    const through = young === null || young === undefined ? from + TRIM_MAX_POSITIONS - 1 : young - 1;
    if (through < from) return false;
    const feeds = feedsIn.all(from, through);
    mark.run(from, through);
    remove.run(from, through);
    for (const feedId of feeds) deleteUnnamedBelow(feedId);
    return young === null || young === undefined;
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
      // Short transactions one after another, other requests between them, until nothing older is left.
      while (await trim(storedBefore)) await nextTurn();
    },
  };
}
