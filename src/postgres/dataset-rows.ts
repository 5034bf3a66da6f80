import { randomUUID } from "node:crypto";
import type { PoolClient } from "pg";
import type { DatasetRowsWrite } from "../ports/storage/rows.js";
import type { Row } from "../domain/model.js";
import { bounded, checkout, type Db, json, type Lease, num } from "./db.js";
import { publishChangesSql } from "./changes.js";
import { insertJsonRowsSql } from "./dataset-values-sql.js";
import { rowBatches } from "../storage/row-batches.js";

/**
 * Streamed bulk row writes (`writeDatasetRows`, and `replaceDatasetRows`
 * through the same path), in short transactions only.
 *
 * Readers see a dataset's rows at the positions [first_pos, next_pos). A
 * bulk write stages its rows, STAGE_ROWS per transaction, at positions no
 * reader looks at (an append from next_pos on, a replace REPLACE_HEADROOM
 * above it, so deliveries meanwhile never reach them), and makes them
 * visible in ONE short final transaction that moves the window (replace:
 * the window becomes the staged range; append: it grows over it) and bumps
 * `rows_version`. The old rows of a replace are then below the window,
 * invisible, and deleted afterwards in small transactions. When anything
 * fails before the final transaction, the staged rows are deleted and
 * nothing was ever visible.
 *
 * No transaction stays open while the rows arrive, so the audit feed's xid
 * gate (and VACUUM) never waits for an upload.
 *
 * One bulk write per dataset at a time: in this process writes queue per
 * dataset; across instances the writer holds a session-level advisory lock
 * on the dataset for the whole write (no transaction open). The claim row in
 * `dataset_stagings` records the staged range; a claim found by a writer
 * that holds the lock belongs to a writer whose connection died (its
 * advisory lock went with it): its rows are deleted first.
 *
 * Webhook deliveries append at next_pos under the dataset row's lock. When a
 * batch of them would reach the staged range (`stage_from`), it moves the
 * staged rows up out of its way (`makeRoomForDeliveries`); the writer reads
 * its range from the claim row in every transaction, and an append whose
 * rows are no longer right after the window moves them down when publishing.
 */

/** Rows per staging transaction (fewer when they are large, see STAGE_CHARS). */
const STAGE_ROWS = 2000;
/** JSON text per staging transaction. */
const STAGE_CHARS = 2 * 1024 * 1024;
/** Rows deleted per cleanup transaction. */
const DELETE_ROWS = 10_000;
/** Free positions between the window and a replace's staged rows, for deliveries meanwhile. */
const REPLACE_HEADROOM = 1 << 20;
/** Free positions deliveries leave themselves when they move a staging out of their way. */
const INGEST_HEADROOM = 4096;

export interface BulkRowsWrite extends Omit<DatasetRowsWrite, "rows"> {
  rows: AsyncIterable<Row> | Iterable<Row>;
  /** Also the dataset's lastRefreshedAt (a refresh); absent: lastRefreshedAt is kept. */
  refreshedAt?: string;
}

interface Window {
  first: number;
  next: number;
}

export function bulkRowWriter(db: Db): (write: BulkRowsWrite) => Promise<{ rowCount: number }> {
  const tails = new Map<string, Promise<unknown>>();
  /** Bulk writes to one dataset in this process, one after the other (the advisory lock orders instances). */
  return (write) => {
    const result = (tails.get(write.datasetId) ?? Promise.resolve()).then(() => bulkWrite(db, write));
    const tail = result.then(noop, noop);
    tails.set(write.datasetId, tail);
    void tail.then(() => {
      if (tails.get(write.datasetId) === tail) tails.delete(write.datasetId);
    });
    return result;
  };
}

async function bulkWrite(db: Db, write: BulkRowsWrite): Promise<{ rowCount: number }> {
  const { t } = db;
  const source = rowBatches(write.rows);
  let lease: Lease | null = null;
  let client: PoolClient | null = null;
  let locked = false;
  const lockKey = `dataport:rows:${db.schema}:${write.datasetId}`;
  const begin = bounded("BEGIN", { idleMs: db.bounds.idleMs });
  try {
    await existing(db, write.datasetId);
    let batch = await source.next(STAGE_ROWS, STAGE_CHARS);
    lease = await checkout(db.pool);
    client = lease.client;
    await lockDataset(client, lockKey);
    locked = true;
    await abandonDeadClaim(client, t, begin, write.datasetId);

    if (batch.done) {
      // Fits one transaction: staged and published at once.
      const columns = write.columns();
      const published = await transaction(client, begin, async () => {
        const at = await lockWindow(client!, t, write.datasetId);
        const from = at.next;
        await insertRows(client!, t, write.datasetId, from, batch.texts);
        return publish(client!, t, write, at, from, from + batch.texts.length, columns);
      });
      await sweep(client, t, write.datasetId);
      return published;
    }

    const owner = randomUUID();
    await transaction(client, begin, async () => {
      const at = await lockWindow(client!, t, write.datasetId);
      const from = write.mode === "replace" ? at.next + REPLACE_HEADROOM : at.next;
      await client!.query(
        `insert into ${t("dataset_stagings")} (dataset_id, owner, from_pos, end_pos) values ($1, $2, $3, $3)`,
        [write.datasetId, owner, from],
      );
      await client!.query(`update ${t("datasets")} set stage_from = $2 where id = $1`, [write.datasetId, from]);
    });
    try {
      for (;;) {
        if (batch.texts.length > 0) {
          const texts = batch.texts;
          await transaction(client, begin, async () => {
            const claim = await ownedClaim(client!, t, write.datasetId, owner);
            await insertRows(client!, t, write.datasetId, claim.end, texts);
            await client!.query(`update ${t("dataset_stagings")} set end_pos = $2 where dataset_id = $1`, [
              write.datasetId,
              claim.end + texts.length,
            ]);
          });
        }
        if (batch.done) break;
        batch = await source.next(STAGE_ROWS, STAGE_CHARS);
      }
      const columns = write.columns();
      const published = await transaction(client, begin, async () => {
        const at = await lockWindow(client!, t, write.datasetId);
        const claim = await ownedClaim(client!, t, write.datasetId, owner);
        await client!.query(`delete from ${t("dataset_stagings")} where dataset_id = $1`, [write.datasetId]);
        return publish(client!, t, write, at, claim.from, claim.end, columns);
      });
      await sweep(client, t, write.datasetId);
      return published;
    } catch (error) {
      await unstage(client, t, begin, write.datasetId, owner).catch(() => {
        // Closed or broken: the next writer of this dataset finds the claim and deletes what was staged.
      });
      throw error;
    }
  } catch (error) {
    await source.close();
    throw error;
  } finally {
    if (client && lease) {
      let unlocked = !locked;
      if (locked) {
        unlocked = await client.query("select pg_advisory_unlock(hashtextextended($1, 0))", [lockKey]).then(
          () => true,
          () => false,
        );
      }
      // A connection that may still hold the lock (or a transaction) is closed rather than pooled: they go with it.
      if (!unlocked || broken.has(client)) lease.spoil();
      lease.release();
    }
  }
}

/** Wait until this instance holds the dataset's write lock (polled, so no statement or transaction waits open). */
async function lockDataset(client: PoolClient, lockKey: string): Promise<void> {
  for (let attempt = 0; ; attempt++) {
    const { rows } = await client.query<{ ok: boolean }>("select pg_try_advisory_lock(hashtextextended($1, 0)) as ok", [
      lockKey,
    ]);
    if (rows[0]?.ok) return;
    await sleep(Math.min(250, 5 * 2 ** Math.min(attempt, 6)));
  }
}

async function existing(db: Db, datasetId: string): Promise<void> {
  const [found] = await db.query<{ dataset: boolean; table: boolean }>(
    `select exists (select 1 from ${db.t("datasets")} where id = $1) as dataset, exists (select 1 from ${db.t("input_tables")} where id = $1) as table`,
    [datasetId],
  );
  if (found?.dataset) return;
  if (found?.table) throw new Error(`dataset ${datasetId} is an input table: its rows are written one by one`);
  throw new Error(`unknown dataset ${datasetId}`);
}

/** The dataset's window, its row locked until the transaction ends. */
async function lockWindow(client: PoolClient, t: Db["t"], datasetId: string): Promise<Window> {
  const { rows } = await client.query<{ first_pos: string; next_pos: string }>(
    `select first_pos, next_pos from ${t("datasets")} where id = $1 for update`,
    [datasetId],
  );
  const row = rows[0];
  if (!row) throw new Error(`unknown dataset ${datasetId} (deleted during the bulk write)`);
  return { first: num(row.first_pos), next: num(row.next_pos) };
}

async function ownedClaim(
  client: PoolClient,
  t: Db["t"],
  datasetId: string,
  owner: string,
): Promise<{ from: number; end: number }> {
  const { rows } = await client.query<{ owner: string; from_pos: string; end_pos: string }>(
    `select owner, from_pos, end_pos from ${t("dataset_stagings")} where dataset_id = $1 for update`,
    [datasetId],
  );
  const claim = rows[0];
  if (!claim || claim.owner !== owner)
    throw new Error("the bulk write lost its staged rows: the dataset was deleted meanwhile");
  return { from: num(claim.from_pos), end: num(claim.end_pos) };
}

/**
 * Make the rows at [from, end) the dataset's (in the caller's transaction,
 * the dataset row locked): a replace's window becomes that range; an
 * append's grows over it, after the rows are moved down to the window's end
 * when deliveries moved them away from it.
 */
async function publish(
  client: PoolClient,
  t: Db["t"],
  write: BulkRowsWrite,
  at: Window,
  from: number,
  end: number,
  columns: unknown,
): Promise<{ rowCount: number }> {
  let first = from;
  let next = end;
  if (write.mode === "append") {
    if (from !== at.next) await moveDown(client, t, write.datasetId, from, end, at.next);
    first = at.first;
    next = at.next + (end - from);
  }
  await client.query(
    `update ${t("datasets")} set first_pos = $2, next_pos = $3, row_count = $3::bigint - $2::bigint, stage_from = null, columns = $4,
       updated_at = $5, last_refreshed_at = coalesce($6, last_refreshed_at), rows_version = rows_version + 1
     where id = $1`,
    [write.datasetId, first, next, json(columns), write.updatedAt, write.refreshedAt ?? null],
  );
  // The write's changes, in the publishing transaction: a replace's reset, an append's inserts.
  const changes = publishChangesSql(t);
  const storedAt = Date.parse(write.updatedAt) || 0;
  if (write.mode === "replace") await client.query(changes.reset, [write.datasetId, storedAt]);
  else await client.query(changes.inserts, [write.datasetId, storedAt, at.next, next]);
  return { rowCount: next - first };
}

async function insertRows(
  client: PoolClient,
  t: Db["t"],
  datasetId: string,
  from: number,
  texts: readonly string[],
): Promise<void> {
  if (texts.length === 0) return;
  await client.query(insertJsonRowsSql(t), [datasetId, from, `[${texts.join(",")}]`]);
}

/**
 * For deliveries about to append past the dataset's `stage_from`: move the
 * staged rows up by their count plus headroom and return the new
 * `stage_from` (null when no claim is left). Runs in the deliveries'
 * transaction, the dataset row locked; the claim row's lock waits for a
 * staging transaction in flight.
 */
export async function makeRoomForDeliveries(
  client: PoolClient,
  t: Db["t"],
  datasetId: string,
  needed: number,
): Promise<number | null> {
  const { rows } = await client.query<{ from_pos: string; end_pos: string }>(
    `select from_pos, end_pos from ${t("dataset_stagings")} where dataset_id = $1 for update`,
    [datasetId],
  );
  const claim = rows[0];
  if (!claim) return null;
  const from = num(claim.from_pos);
  const end = num(claim.end_pos);
  const shift = end - from + Math.max(INGEST_HEADROOM, needed);
  await moveRows(client, t, datasetId, from, end, shift);
  await client.query(`update ${t("dataset_stagings")} set from_pos = $2, end_pos = $3 where dataset_id = $1`, [
    datasetId,
    from + shift,
    end + shift,
  ]);
  return from + shift;
}

/** Move [from, end) down to start at `to` (< from), through free space above `end` when the ranges overlap. */
async function moveDown(
  client: PoolClient,
  t: Db["t"],
  datasetId: string,
  from: number,
  end: number,
  to: number,
): Promise<void> {
  const count = end - from;
  if (from - to >= count) {
    await moveRows(client, t, datasetId, from, end, to - from);
    return;
  }
  await moveRows(client, t, datasetId, from, end, count);
  await moveRows(client, t, datasetId, end, end + count, to - end);
}

/**
 * Rows at [from, end) to [from + shift, end + shift); the two ranges must not overlap (each row's key is checked as it
 * moves).
 */
async function moveRows(
  client: PoolClient,
  t: Db["t"],
  datasetId: string,
  from: number,
  end: number,
  shift: number,
): Promise<void> {
  if (end <= from) return;
  await client.query(
    `update ${t("dataset_rows")} set pos = pos + $4::bigint where dataset_id = $1 and pos >= $2 and pos < $3`,
    [datasetId, from, end, shift],
  );
}

/** A claim found while holding the dataset's lock: its writer is gone. Delete what it staged. */
async function abandonDeadClaim(client: PoolClient, t: Db["t"], begin: string, datasetId: string): Promise<void> {
  const { rows } = await client.query<{ owner: string }>(
    `select owner from ${t("dataset_stagings")} where dataset_id = $1`,
    [datasetId],
  );
  if (rows[0]) await unstage(client, t, begin, datasetId, rows[0].owner);
}

/** Delete a claim's staged rows from the top of its range, DELETE_ROWS per transaction, then the claim. */
async function unstage(client: PoolClient, t: Db["t"], begin: string, datasetId: string, owner: string): Promise<void> {
  for (;;) {
    const done = await transaction(client, begin, async () => {
      const { rows } = await client.query<{ owner: string; from_pos: string; end_pos: string }>(
        `select owner, from_pos, end_pos from ${t("dataset_stagings")} where dataset_id = $1 for update`,
        [datasetId],
      );
      const claim = rows[0];
      if (!claim || claim.owner !== owner) return true;
      const from = num(claim.from_pos);
      const end = num(claim.end_pos);
      const low = Math.max(from, end - DELETE_ROWS);
      await client.query(`delete from ${t("dataset_rows")} where dataset_id = $1 and pos >= $2 and pos < $3`, [
        datasetId,
        low,
        end,
      ]);
      await client.query(`update ${t("dataset_stagings")} set end_pos = $2 where dataset_id = $1`, [datasetId, low]);
      return low === from;
    });
    if (done) break;
  }
  // The claim goes with the dataset row locked first (the order deliveries lock them in).
  await transaction(client, begin, async () => {
    await client.query(`select 1 from ${t("datasets")} where id = $1 for update`, [datasetId]);
    const deleted = await client.query(`delete from ${t("dataset_stagings")} where dataset_id = $1 and owner = $2`, [
      datasetId,
      owner,
    ]);
    if (deleted.rowCount)
      await client.query(`update ${t("datasets")} set stage_from = null where id = $1`, [datasetId]);
  });
}

/** Rows below the window (a replace's old rows, trimmed deliveries), DELETE_ROWS per statement. */
async function sweep(client: PoolClient, t: Db["t"], datasetId: string): Promise<void> {
  try {
    const { rows } = await client.query<{ swept_below: string; first_pos: string }>(
      `select swept_below, first_pos from ${t("datasets")} where id = $1`,
      [datasetId],
    );
    const at = rows[0];
    if (!at || num(at.swept_below) >= num(at.first_pos)) return;
    for (;;) {
      const deleted = await client.query(
        `delete from ${t("dataset_rows")} where dataset_id = $1 and pos in (
           select pos from ${t("dataset_rows")} where dataset_id = $1 and pos >= $2 and pos < $3 order by pos limit ${DELETE_ROWS})`,
        [datasetId, at.swept_below, at.first_pos],
      );
      if ((deleted.rowCount ?? 0) < DELETE_ROWS) break;
    }
    await client.query(`update ${t("datasets")} set swept_below = greatest(swept_below, $2) where id = $1`, [
      datasetId,
      at.first_pos,
    ]);
  } catch {
    // The write is visible already; deliveries and later writes sweep what is left.
  }
}

/**
 * `work` in one transaction on `client` (which stays checked out), begun
 * with `begin` (the store's bounded BEGIN). A client whose ROLLBACK fails is
 * marked broken.
 */
async function transaction<T>(client: PoolClient, begin: string, work: () => Promise<T>): Promise<T> {
  await client.query(begin);
  try {
    const result = await work();
    await client.query("COMMIT");
    return result;
  } catch (error) {
    await client.query("ROLLBACK").catch(() => broken.add(client));
    throw error;
  }
}

/** Clients left in an unknown state: closed instead of going back to the pool. */
const broken = new WeakSet<PoolClient>();

function noop(): void {}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
