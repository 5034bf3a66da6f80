import type { DatasetRowsWrite } from "../ports/storage/catalog.js";
import { type Db, json, num } from "./db.js";

/** Rows per INSERT statement of a streamed write. */
const STREAM_BATCH_ROWS = 5000;
/** JSON text per INSERT statement: a batch of large rows is cut here before it reaches STREAM_BATCH_ROWS. */
const STREAM_BATCH_CHARS = 4 * 1024 * 1024;

/**
 * Replace or append a dataset's rows from a stream, in ONE transaction on
 * one pooled client:
 *
 * 1. `select … for update` on the dataset row: bulk writes and webhook
 *    deliveries to the dataset (which take the same lock) wait for each
 *    other, in every instance sharing the database;
 * 2. the rows go in as they arrive, in multi-row INSERTs of at most
 *    STREAM_BATCH_ROWS rows, at positions after every stored row — the old
 *    rows stay in place (and keep their positions) until the end;
 * 3. a replace then deletes the old positions, the dataset row takes the
 *    columns, row count and updatedAt, and the transaction commits.
 *
 * Readers on other connections see the old rows until COMMIT and the new
 * ones after it (MVCC); positions stay contiguous either way. Memory holds
 * one batch being built and at most one being written. When the rows'
 * iteration (or anything else) throws, the transaction rolls back and the
 * error is re-thrown: nothing was written.
 */
export async function writeDatasetRows(db: Db, write: DatasetRowsWrite): Promise<{ rowCount: number }> {
  const { t } = db;
  const client = await db.pool.connect();
  // An INSERT in flight while the next batch is built; awaited before the next is sent.
  let inFlight: Promise<unknown> | null = null;
  try {
    await client.query("BEGIN");
    const locked = await client.query(`select 1 from ${t("datasets")} where id = $1 for update`, [write.datasetId]);
    if (locked.rowCount === 0) throw new Error(`unknown dataset ${write.datasetId} (input tables take rows through the table API)`);
    // A statement of its own, after the lock: its snapshot includes whatever committed while we waited.
    const range = await client.query<{ lo: string | null; hi: string | null }>(
      `select min(pos) as lo, max(pos) as hi from ${t("dataset_rows")} where dataset_id = $1`,
      [write.datasetId],
    );
    const { lo, hi } = range.rows[0] ?? { lo: null, hi: null };
    const stored = hi === null ? 0 : num(hi) - num(lo) + 1;
    const firstPos = hi === null ? 1 : num(hi) + 1;

    const insert = `insert into ${t("dataset_rows")} (dataset_id, pos, row)
      select $1, $2::bigint + ord - 1, value from json_array_elements($3::json) with ordinality as e(value, ord)`;
    let written = 0;
    let batch: string[] = [];
    let chars = 0;
    const flush = async () => {
      if (batch.length === 0) return;
      const text = `[${batch.join(",")}]`;
      const pos = firstPos + written;
      written += batch.length;
      batch = [];
      chars = 0;
      if (inFlight) await inFlight;
      inFlight = client.query(insert, [write.datasetId, pos, text]);
      // Its failure surfaces where it is awaited (next flush, the end, or the catch below).
      inFlight.catch(() => {});
    };
    for await (const row of write.rows) {
      const text = JSON.stringify(row);
      batch.push(text);
      chars += text.length;
      if (batch.length >= STREAM_BATCH_ROWS || chars >= STREAM_BATCH_CHARS) await flush();
    }
    await flush();
    if (inFlight) await inFlight;
    inFlight = null;

    const columns = write.columns();
    if (write.mode === "replace" && hi !== null) {
      await client.query(`delete from ${t("dataset_rows")} where dataset_id = $1 and pos < $2::bigint`, [write.datasetId, firstPos]);
    }
    const rowCount = write.mode === "replace" ? written : stored + written;
    await client.query(`update ${t("datasets")} set columns = $2, row_count = $3, updated_at = $4, rows_version = rows_version + 1 where id = $1`, [
      write.datasetId,
      json(columns),
      rowCount,
      write.updatedAt,
    ]);
    await client.query("COMMIT");
    return { rowCount };
  } catch (error) {
    await settle(inFlight);
    await client.query("ROLLBACK").catch(() => {});
    throw error;
  } finally {
    client.release();
  }
}

/** Wait for a statement whose outcome no longer matters. */
async function settle(statement: Promise<unknown> | null): Promise<void> {
  await statement?.catch(() => {});
}
