import { randomUUID } from "node:crypto";
import type * as Database from "./driver.js";
import { type ApiError, storageUnavailable } from "../base/api-error.js";
import type { Column, Row } from "../domain/model.js";
import { nextTurn, rowKey, type SqliteHandle, writeTransaction } from "./db.js";
import { firstNamedRowSql } from "./changes.js";
import { rowBatches } from "../storage/row-batches.js";

/**
 * Streamed bulk row writes (`writeDatasetRows`, and `replaceDatasetRows`
 * through the same path).
 *
 * Readers see a dataset's rows at the positions [first_position,
 * next_position). A bulk write stages its rows, STAGE_BATCH per transaction,
 * at positions from next_position on, which no reader looks at, and makes
 * them visible in ONE final transaction that moves the window (replace:
 * the window becomes the staged range; append: it grows over it). The old
 * rows of a replace are then below first_position, invisible, and deleted
 * in small transactions afterwards (a webhook delivery treats a dedup key
 * held only by such a row as forgotten). If anything fails before the final
 * transaction, the staged rows are deleted and nothing was ever visible.
 *
 * One staging per dataset at a time: bulk writes of one process queue per
 * dataset; across processes, the claim row in `dataset_stagings` is taken in
 * an IMMEDIATE transaction, so one process stages and the other waits. A
 * claim whose heartbeat is older than LEASE_MS belongs to a dead process and
 * is taken over (its staged rows deleted); so is at once a claim of this
 * process whose write failed and could not delete its rows (a full disk).
 * A write waits for another process's claim for up to `callTimeoutMs`, then
 * fails with 503 `storage_unavailable`.
 *
 * Each transaction that finds another process's write lock taken is tried
 * again with a backoff, for up to `busyTimeoutMs` (see faults.ts): the event
 * loop never waits for the lock.
 *
 * Webhook deliveries append at next_position too. When a delivery reaches
 * the staged range (`stage_from`), it moves the staged rows up out of its way
 * (`stagingMover`); the staging writer reads its range from the claim row in
 * every batch, and an append that finds its rows no longer right after the
 * window moves them down in the final transaction.
 */

/** Rows written per staging transaction: a few ms of SQLite's write lock, so deliveries and other writes interleave. */
const STAGE_BATCH = 1000;
/** The most rows a staging transaction takes, when each row costs little (see `nextBatchSize`). */
const STAGE_BATCH_MAX = 10_000;
/** How long a staging transaction may hold the writer (and the event loop): batches grow or shrink toward it. */
const STAGE_TARGET_MS = 40;
/** Rows deleted per cleanup transaction. */
const DELETE_BATCH = 10_000;
/**
 * A claim not refreshed for this long belongs to a process that died. Wall-clock time: storage bookkeeping, not request
 * data.
 */
const LEASE_MS = 30_000;
const HEARTBEAT_MS = 5_000;
/** Free positions a webhook delivery leaves itself when it moves a staging out of its way. */
const INGEST_HEADROOM = 4096;
const MAX_POSITION = 2 ** 43;

export interface BulkRowsWrite {
  datasetId: string;
  mode: "replace" | "append";
  rows: AsyncIterable<Row> | Iterable<Row>;
  /** Called once after the last row, before the rows become visible. */
  columns(): Column[];
  updatedAt: string;
  /** Also the dataset's lastRefreshedAt (a refresh); absent: lastRefreshedAt is kept. */
  refreshedAt?: string;
}

interface DatasetAt {
  seq: number;
  first_position: number;
  next_position: number;
}

interface Claim {
  owner: string;
  from_position: number;
  end_position: number;
  heartbeat_ms: number;
}

export function bulkRowWriter(handle: SqliteHandle): (write: BulkRowsWrite) => Promise<{ rowCount: number }> {
  const { db } = handle;
  const sql = statements(db);
  const tails = new Map<string, Promise<unknown>>();
  /**
   * Owners (of this process) whose write failed and whose staged rows could not be deleted: their claims are taken over
   * at once.
   */
  const abandoned = new Set<string>();

  /** Bulk writes to one dataset in this process, one after the other. */
  const serialised = <T>(datasetId: string, run: () => Promise<T>): Promise<T> => {
    const result = (tails.get(datasetId) ?? Promise.resolve()).then(run);
    const tail = result.then(noop, noop);
    tails.set(datasetId, tail);
    void tail.then(() => {
      if (tails.get(datasetId) === tail) tails.delete(datasetId);
    });
    return result;
  };

  /** Try to take the dataset's staging claim: the dataset's seq, or the claim another owner holds. */
  const tryClaim = writeTransaction(db, (datasetId: string, owner: string): { seq: number; held: Claim | null } => {
    const at = existing(sql, datasetId);
    const held = sql.claim.get(at.seq);
    if (held) return { seq: at.seq, held };
    sql.insertClaim.run(at.seq, owner, at.next_position, at.next_position, Date.now());
    sql.setStageFrom.run(at.next_position, at.seq);
    return { seq: at.seq, held: null };
  });

  /**
   * Take over a dead process's claim (if it is still that one, still stale): ours from now on, so its owner can no
   * longer write.
   */
  const seize = writeTransaction(db, (seq: number, stale: Claim, owner: string): boolean => {
    const held = sql.claim.get(seq);
    if (!held || held.owner !== stale.owner || held.heartbeat_ms !== stale.heartbeat_ms) return false;
    sql.setOwner.run(owner, Date.now(), seq);
    return true;
  });

  const stage = writeTransaction(db, (seq: number, owner: string, texts: readonly string[]) => {
    const claim = owned(sql, seq, owner);
    let position = claim.end_position;
    if (position + texts.length > MAX_POSITION) throw new Error("the dataset has used every row position");
    for (const text of texts) {
      sql.insertRow.run(seq, position, seq, position, text);
      position++;
    }
    sql.setEnd.run(position, Date.now(), seq);
  });

  /** Delete up to DELETE_BATCH staged rows from the top of our range; true once the claim is gone. */
  const unstage = writeTransaction(db, (seq: number, owner: string): boolean => {
    const claim = sql.claim.get(seq);
    if (!claim || claim.owner !== owner) return true;
    const low = Math.max(claim.from_position, claim.end_position - DELETE_BATCH);
    sql.deleteRange.run(rowKey(seq, low), rowKey(seq, claim.end_position));
    if (low > claim.from_position) {
      sql.setEnd.run(low, claim.heartbeat_ms, seq);
      return false;
    }
    sql.deleteClaim.run(seq);
    sql.setStageFrom.run(null, seq);
    return true;
  });

  const publishStaged = writeTransaction(db, (seq: number, owner: string, write: BulkRowsWrite, columns: Column[]) => {
    const claim = owned(sql, seq, owner);
    sql.deleteClaim.run(seq);
    return publish(sql, sql.datasetBySeq.get(seq)!, claim.from_position, claim.end_position, write, columns);
  });

  /** A write that fits one batch: staged and published in one transaction, unless another process is staging (null). */
  const writeWhole = writeTransaction(db, (write: BulkRowsWrite, texts: readonly string[], columns: Column[]) => {
    const at = existing(sql, write.datasetId);
    const held = sql.claim.get(at.seq);
    if (held) return { seq: at.seq, held, published: null };
    const from = at.next_position;
    if (from + texts.length > MAX_POSITION) throw new Error("the dataset has used every row position");
    texts.forEach((text, i) => sql.insertRow.run(at.seq, from + i, at.seq, from + i, text));
    return { seq: at.seq, held: null, published: publish(sql, at, from, from + texts.length, write, columns) };
  });

  const beat = (seq: number, owner: string) => {
    try {
      sql.heartbeat.run(Date.now(), seq, owner);
    } catch {
      // Closed or busy: the next batch or heartbeat tries again.
    }
  };

  const abandon = async (seq: number, owner: string) => {
    try {
      while (!(await unstage(seq, owner))) await nextTurn();
    } catch (error) {
      abandoned.add(owner);
      throw error;
    }
  };

  /**
   * Wait for another claim to go, or take it over when its process is dead
   * (or it is one of this process's abandoned ones); past `until`
   * (performance.now() ms), fail with 503.
   */
  const waitFor = async (seq: number, held: Claim, attempt: number, until: number) => {
    if (abandoned.has(held.owner) || Date.now() - held.heartbeat_ms > LEASE_MS) {
      const owner = randomUUID();
      if (await seize(seq, held, owner)) {
        abandoned.delete(held.owner);
        await abandon(seq, owner);
      }
      return;
    }
    if (performance.now() >= until) throw stagingHeld(handle.callTimeoutMs);
    await sleep(Math.min(500, 10 * 2 ** Math.min(attempt, 6), Math.max(1, until - performance.now())));
  };

  /** Old rows below the window (a replace's, or left by a crash), in small transactions. */
  const sweep = async (seq: number, datasetId: string) => {
    try {
      while (sql.deleteBelowFirst.run(rowKey(seq, 0), seq, datasetId, datasetId, DELETE_BATCH).changes === DELETE_BATCH)
        await nextTurn();
    } catch {
      // The write is visible already; a later write's sweep removes what is left.
    }
  };

  const claim = async (datasetId: string, owner: string): Promise<number> => {
    const until = performance.now() + handle.callTimeoutMs;
    for (let attempt = 0; ; attempt++) {
      const { seq, held } = await tryClaim(datasetId, owner);
      if (!held) return seq;
      await waitFor(seq, held, attempt, until);
    }
  };

  const bulkWrite = async (write: BulkRowsWrite): Promise<{ rowCount: number }> => {
    existing(sql, write.datasetId);
    const source = rowBatches(write.rows);
    let batch = await source.next(STAGE_BATCH);

    if (batch.done) {
      const columns = write.columns();
      const until = performance.now() + handle.callTimeoutMs;
      for (let attempt = 0; ; attempt++) {
        const result = await writeWhole(write, batch.texts, columns);
        if (result.published) {
          await sweep(result.seq, write.datasetId);
          return { rowCount: result.published.rowCount };
        }
        await waitFor(result.seq, result.held!, attempt, until);
      }
    }

    const owner = randomUUID();
    let seq: number;
    try {
      seq = await claim(write.datasetId, owner);
    } catch (error) {
      await source.close();
      throw error;
    }
    const heartbeat = setInterval(() => beat(seq, owner), HEARTBEAT_MS);
    heartbeat.unref();
    try {
      // Declared columns are indexed (row-indexes.ts): their batches grow (see nextBatchSize); others stay small,
      // holding fewer rows.
      const indexed = sql.declared.get(write.datasetId) === 1;
      let size = STAGE_BATCH;
      for (;;) {
        if (batch.texts.length > 0) {
          const started = performance.now();
          await stage(seq, owner, batch.texts);
          if (indexed) size = nextBatchSize(size, batch.texts.length, performance.now() - started);
        }
        if (batch.done) break;
        // Rows from code (an array, a generator) arrive without I/O: let other requests run between batches.
        await nextTurn();
        batch = await source.next(size);
      }
      const columns = write.columns();
      const published = await publishStaged(seq, owner, write, columns);
      clearInterval(heartbeat);
      await sweep(seq, write.datasetId);
      return { rowCount: published.rowCount };
    } catch (error) {
      clearInterval(heartbeat);
      await source.close();
      try {
        await abandon(seq, owner);
      } catch {
        // Closed: the claim expires and the next writer deletes what was staged.
      }
      throw error;
    }
  };

  return (write) => serialised(write.datasetId, () => bulkWrite(write));
}

/**
 * For a webhook delivery about to append at `next_position` = the dataset's
 * `stage_from`: move the staged rows up by their count plus some headroom and
 * return the new `stage_from` (null when the claim is gone). Runs inside the
 * delivery's transaction; the staging writer finds its range in the claim.
 */
export function stagingMover(db: Database.Database): (seq: number) => number | null {
  const sql = statements(db);
  return (seq) => {
    const claim = sql.claim.get(seq);
    if (!claim) {
      sql.setStageFrom.run(null, seq);
      return null;
    }
    const shift = claim.end_position - claim.from_position + INGEST_HEADROOM;
    if (claim.end_position + shift > MAX_POSITION) throw new Error("the dataset has used every row position");
    moveRows(sql, seq, claim.from_position, claim.end_position, shift);
    sql.setRange.run(claim.from_position + shift, claim.end_position + shift, seq);
    sql.setStageFrom.run(claim.from_position + shift, seq);
    return claim.from_position + shift;
  };
}

type Statements = ReturnType<typeof statements>;

function statements(db: Database.Database) {
  return {
    dataset: db.prepare<[string], DatasetAt>("SELECT seq, first_position, next_position FROM datasets WHERE id = ?"),
    datasetBySeq: db.prepare<[number], DatasetAt>(
      "SELECT seq, first_position, next_position FROM datasets WHERE seq = ?",
    ),
    isTable: db.prepare<[string], number>("SELECT 1 FROM input_tables WHERE id = ?").pluck(),
    declared: db.prepare<[string], number>("SELECT columns_declared FROM datasets WHERE id = ?").pluck(),
    claim: db.prepare<[number], Claim>(
      "SELECT owner, from_position, end_position, heartbeat_ms FROM dataset_stagings WHERE dataset_seq = ?",
    ),
    insertClaim: db.prepare<[number, string, number, number, number]>(
      "INSERT INTO dataset_stagings (dataset_seq, owner, from_position, end_position, heartbeat_ms) VALUES (?, ?, " +
        "?, ?, ?)",
    ),
    setOwner: db.prepare<[string, number, number]>(
      "UPDATE dataset_stagings SET owner = ?, heartbeat_ms = ? WHERE dataset_seq = ?",
    ),
    setEnd: db.prepare<[number, number, number]>(
      "UPDATE dataset_stagings SET end_position = ?, heartbeat_ms = ? WHERE dataset_seq = ?",
    ),
    setRange: db.prepare<[number, number, number]>(
      "UPDATE dataset_stagings SET from_position = ?, end_position = ? WHERE dataset_seq = ?",
    ),
    heartbeat: db.prepare<[number, number, string]>(
      "UPDATE dataset_stagings SET heartbeat_ms = ? WHERE dataset_seq = ? AND owner = ?",
    ),
    deleteClaim: db.prepare<[number]>("DELETE FROM dataset_stagings WHERE dataset_seq = ?"),
    setStageFrom: db.prepare<[number | null, number]>("UPDATE datasets SET stage_from = ? WHERE seq = ?"),
    // The key computed by SQLite (seq * 2^43 + position, see rowKey): no BigInt per row.
    insertRow: db.prepare<[number, number, number, number, string]>(
      "INSERT INTO dataset_rows (row_key, dataset_seq, position, data) VALUES (? * 8796093022208 + ?, ?, ?, ?)",
    ),
    copyRows: db.prepare<[number, number, bigint, bigint]>(
      `INSERT INTO dataset_rows (row_key, dataset_seq, position, dedup_key, data)
       SELECT row_key + ?, dataset_seq, position + ?, dedup_key, data FROM dataset_rows WHERE row_key >= ? AND row_key < ?`,
    ),
    deleteRange: db.prepare<[bigint, bigint]>("DELETE FROM dataset_rows WHERE row_key >= ? AND row_key < ?"),
    // Bounded by the dataset's current window in the same statement, so nothing of a dataset
    // created since (with this seq) or of the window itself is touched, nor a row a change still names.
    deleteBelowFirst: db.prepare<[bigint, number, string, string, number]>(
      `DELETE FROM dataset_rows WHERE row_key IN (
         SELECT row_key FROM dataset_rows WHERE row_key >= ?
           AND row_key < min((SELECT seq * 8796093022208 + first_position FROM datasets WHERE seq = ? AND id = ?),
                             ${firstNamedRowSql("?")})
         LIMIT +?)`,
    ),
    // The write's changes, in the publishing transaction (see changes.ts): a replace's reset, an append's inserts.
    resetChange: db.prepare<[string, number]>(
      "INSERT INTO changes (feed_id, op, row_id, row, stored_at) VALUES (?, 'reset', NULL, NULL, ?)",
    ),
    insertChanges: db.prepare<[string, number, bigint, bigint]>(
      `INSERT INTO changes (feed_id, op, row_id, row, stored_at)
       SELECT ?, 'insert', NULL, data, ? FROM dataset_rows WHERE row_key >= ? AND row_key < ? ORDER BY row_key`,
    ),
    setWindow: db.prepare<[number, number, string, string, string | null, number]>(
      `UPDATE datasets SET first_position = ?, next_position = ?, stage_from = NULL, columns = ?, updated_at = ?,
         last_refreshed_at = coalesce(?, last_refreshed_at) WHERE seq = ?`,
    ),
  };
}

function existing(sql: Statements, datasetId: string): DatasetAt {
  const at = sql.dataset.get(datasetId);
  if (at) return at;
  if (sql.isTable.get(datasetId) !== undefined)
    throw new Error(`dataset ${datasetId} is an input table: its rows are written one by one`);
  throw new Error(`unknown dataset ${datasetId}`);
}

function owned(sql: Statements, seq: number, owner: string): Claim {
  const claim = sql.claim.get(seq);
  if (!claim || claim.owner !== owner)
    throw new Error("the bulk write lost its staged rows: the dataset was deleted or its claim taken over meanwhile");
  return claim;
}

/**
 * Make the rows at [from, end) the dataset's (inside the caller's
 * transaction): a replace's window becomes that range; an append's grows
 * over it, after the rows are moved down to the window's end when deliveries
 * moved them away from it.
 */
function publish(
  sql: Statements,
  at: DatasetAt,
  from: number,
  end: number,
  write: BulkRowsWrite,
  columns: Column[],
): { rowCount: number } {
  let first = from;
  let next = end;
  if (write.mode === "append") {
    if (from !== at.next_position) moveDown(sql, at.seq, from, end, at.next_position);
    first = at.first_position;
    next = at.next_position + (end - from);
  }
  sql.setWindow.run(first, next, JSON.stringify(columns), write.updatedAt, write.refreshedAt ?? null, at.seq);
  const storedAt = Date.parse(write.updatedAt) || 0;
  if (write.mode === "replace") sql.resetChange.run(write.datasetId, storedAt);
  else sql.insertChanges.run(write.datasetId, storedAt, rowKey(at.seq, at.next_position), rowKey(at.seq, next));
  return { rowCount: next - first };
}

/** Move [from, end) down to start at `to` (< from), through free space above `end` when the ranges overlap. */
function moveDown(sql: Statements, seq: number, from: number, end: number, to: number): void {
  const count = end - from;
  if (from - to >= count) {
    moveRows(sql, seq, from, end, to - from);
    return;
  }
  moveRows(sql, seq, from, end, count);
  moveRows(sql, seq, end, end + count, to - end);
}

/** Rows at [from, end) to [from + shift, end + shift); the two ranges must not overlap. */
function moveRows(sql: Statements, seq: number, from: number, end: number, shift: number): void {
  if (end <= from) return;
  sql.copyRows.run(shift, shift, rowKey(seq, from), rowKey(seq, end));
  sql.deleteRange.run(rowKey(seq, from), rowKey(seq, end));
}

/** Waiting for another process's bulk write to the same dataset lasted past the deadline. */
function stagingHeld(timeoutMs: number): ApiError {
  return storageUnavailable(`another process has been writing this dataset's rows for ${timeoutMs} ms; retry later`);
}

function noop(): void {}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/**
 * The next staging batch of a dataset with declared (indexed) columns: as
 * many rows as the last batch staged in STAGE_TARGET_MS, between STAGE_BATCH
 * and STAGE_BATCH_MAX. Each transaction rewrites the index pages its rows
 * touch, so larger batches write far less (1,000,000 rows, four indexed
 * columns: 28.5 s in batches of 1,000, 12.7 s of 10,000), while the time one
 * batch holds the writer (and the event loop) stays bounded. Other datasets
 * keep batches of STAGE_BATCH: larger ones gain nothing there and hold more
 * rows in memory.
 */
export function nextBatchSize(size: number, staged: number, elapsedMs: number): number {
  if (staged < size) return size;
  const fitting = Math.floor((staged * STAGE_TARGET_MS) / Math.max(elapsedMs, 1));
  return Math.min(STAGE_BATCH_MAX, Math.max(STAGE_BATCH, fitting));
}
