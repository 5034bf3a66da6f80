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
 * Append the insert changes of `count` webhook rows a batch stored one after
 * another, from `firstRowKey` on, in the caller's transaction: ONE change row
 * that names the rows instead of copying them and covers `count` positions
 * of the log (the next ones; its `position` is the last of them). Webhook
 * rows never change in place, and a row retention moved below its dataset's
 * window stays in `dataset_rows` until no change names it
 * (`deleteUnnamedBelow`). A read expands the range, each row at its own
 * position with its own `_id` and `_receivedAt`, so it reads as one change per
 * row: a cursor may stop inside a range.
 */
export type AppendInsertRange = (feedId: string, storedAt: number, firstRowKey: bigint, count: number) => void;

export function appendInsertRangeStatement(db: Database.Database): AppendInsertRange {
  const last = lastChangePositionStatement(db);
  const insert = db.prepare<[number, string, bigint, number, number]>(
    "INSERT INTO changes (position, feed_id, op, row_ref, row_span, stored_at) VALUES (?, ?, 'insert', ?, ?, ?)",
  );
  return (feedId, storedAt, firstRowKey, count) => {
    // Under the write lock: no other process gives positions until this transaction ends.
    insert.run((last.get() ?? 0) + count, feedId, firstRowKey, count, storedAt);
  };
}

/** The highest position the log ever gave (its AUTOINCREMENT counter), trimmed or not. */
export function lastChangePositionStatement(db: Database.Database) {
  return db.prepare<[], number | null>("SELECT seq FROM sqlite_sequence WHERE name = 'changes'").pluck();
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

/** A stored change as a page reads it. */
interface PageRow {
  position: number;
  op: ChangeOp;
  row_id: string | null;
  row: string | null;
  stored_at: number;
  row_ref: string | null;
  row_span: number | null;
}

/** Reads of every feed of the log, and its retention. */
export function sqliteChangeFeeds({ db }: SqliteHandle): ChangeFeedReads & ChangeRetention & { watch: WatchChanges } {
  const trimmed = db.prepare<[string], number>("SELECT trimmed_through FROM change_feeds WHERE feed_id = ?").pluck();
  // A change with a copy, or naming one row (row_ref), or a range of rows (row_ref and row_span: expanded by `spanned`).
  const page = db.prepare<[string, number, number], PageRow>(
    "SELECT c.position, c.op, c.row_id, coalesce(c.row, r.data) AS row, c.stored_at, " +
      // As text: a row key passes 2^53 (rowKey).
      "CAST(c.row_ref AS TEXT) AS row_ref, c.row_span " +
      "FROM changes c LEFT JOIN dataset_rows r ON r.row_key = c.row_ref AND c.row_span IS NULL " +
      "WHERE c.feed_id = ? AND c.position > ? ORDER BY c.position LIMIT +?",
  );
  const spanned = db.prepare<[bigint, bigint, number], { id: string | null; at: string | null; row: string }>(
    "SELECT data ->> '$._id' AS id, data ->> '$._receivedAt' AS at, data AS row FROM dataset_rows " +
      "WHERE row_key >= ? AND row_key < ? ORDER BY row_key LIMIT +?",
  );
  const last = lastChangePositionStatement(db);
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
  /** Up to `limit + 1` changes after the cursor, in position order, as stored changes (ranges expanded). */
  const readPage = db.transaction((feedId: string, after: string | null, limit: number): StoredChange[] | null => {
    const through = trimmed.get(feedId) ?? 0;
    if (after !== null && Number(after) < through) return null;
    const from = after === null ? through : Number(after);
    const changes: StoredChange[] = [];
    // Each stored change yields one change at least: limit + 1 of them are enough.
    for (const r of page.all(feedId, from, limit + 1)) {
      if (r.row_span === null) {
        const record = { op: r.op, rowId: r.row_id, row: parseJsonOrNull<Row>(r.row), storedAt: r.stored_at };
        changes.push({ position: String(r.position), change: changeFromRecord(record) });
      } else {
        // Positions position - span + 1 … position, one per row from row_ref on; those at or before the cursor skipped.
        const firstPosition = r.position - r.row_span + 1;
        const skip = Math.max(0, from + 1 - firstPosition);
        const ref = BigInt(r.row_ref!);
        const rows = spanned.all(ref + BigInt(skip), ref + BigInt(r.row_span), limit + 1 - changes.length);
        rows.forEach((row, i) => {
          const at = row.at === null ? Number.NaN : Date.parse(row.at);
          const record = {
            op: "insert" as const,
            rowId: row.id === null ? null : String(row.id),
            row: parseJsonOrNull<Row>(row.row),
            storedAt: Number.isNaN(at) ? r.stored_at : at,
          };
          changes.push({ position: String(firstPosition + skip + i), change: changeFromRecord(record) });
        });
      }
      if (changes.length > limit) break;
    }
    return changes;
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
      const changes = readPage(feedId, after, limit);
      if (changes === null) return { changes: [], hasMore: false, expired: true };
      return { changes: changes.slice(0, limit), hasMore: changes.length > limit, expired: false };
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
