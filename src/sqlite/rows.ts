import type * as Database from "./driver.js";
import { mapped } from "../domain/async-iterables.js";
import type { Row } from "../domain/model.js";
import type { RowPage, RowQuery, RowStore, RowWrites } from "../ports/storage/rows.js";
import { reportsOwnFaults } from "../sql/store-calls.js";
import { sqliteAggregates } from "./aggregate.js";
import { bulkRowWriter } from "./bulk-row-writes.js";
import type { DatasetRecords } from "./dataset-records.js";
import { type Positions, SMALL_READ } from "./dataset-reads.js";
import { dataVersionOf, prepared, type RememberedReads, rememberedReads, rowKey, type SqliteHandle } from "./db.js";
import { ensureDatasetValues } from "./dataset-values.js";
import { lastChangePositionStatement } from "./changes.js";
import { ensureRowIndexes } from "./row-indexes.js";
import { emptyPage, MovedOffLoop, parsedRow, queriedReads } from "./row-reads.js";

/**
 * The rows of upload and connection datasets. Reads query the writer
 * connection (or a snapshot on a read-only one, or a reader thread), so every
 * commit, of this process or another on the same file, is seen by the next
 * read; the pages remembered are forgotten as soon as one can have changed.
 */
export function sqliteRows(handle: SqliteHandle, records: DatasetRecords): RowStore & RowWrites {
  const { db } = handle;
  const aggregates = sqliteAggregates(handle);
  const positions = db.prepare<[string], Positions>(
    "SELECT id, seq, first_position, next_position FROM datasets WHERE id = ?",
  );
  const bulkWrite = bulkRowWriter(handle);
  ensureRowIndexes(db);
  ensureDatasetValues(db);
  const pages = rememberedPages(handle);
  const dataVersion = dataVersionOf(db);
  // A plain page read again: its dataset's window and its texts are both remembered, and one
  // PRAGMA data_version shows neither can have changed, so it needs no read transaction.
  const rememberedPage = (datasetId: string, query: RowQuery & { limit: number }, memo: PageMemo): RowPage | null => {
    const data = dataVersion();
    const at = records.current(data).get(datasetId)?.at;
    if (!at) return null;
    const range = plainRange(at, query);
    const texts = isEmpty(range) ? [] : memo.current(data).get(pageKey(at.seq, range));
    if (!texts) return null;
    const head = query.changesHead ? heads.current(data).get(HEAD)?.position : undefined;
    if (query.changesHead && head === undefined) return null;
    return withHead(plainPageOf(texts, at, range.start, query.columns), head);
  };
  // Where the change log stands, remembered as the records are: every write that appends a change writes its
  // dataset's or input table's record too (`datasetsVersion`), and another process's commit moves data_version.
  const heads = rememberedReads<{ position: string }>(db, () => handle.datasetsVersion, 1);
  const lastChange = lastChangePositionStatement(db);
  /** The log's head now (inside a read transaction: in its snapshot, with `data` read in the same one). */
  const changesHead = (data?: number): string => {
    const memo = heads.current(data);
    let known = memo.get(HEAD);
    if (known === undefined) memo.set(HEAD, (known = { position: String(lastChange.get() ?? 0) }));
    return known.position;
  };
  const queried = queriedReads(handle);
  // One read transaction: the window, the count and a small page come from one snapshot, even
  // when another process publishes a bulk write in between (a streamed page takes its own).
  const read = db.transaction((datasetId: string, query: RowQuery): RowPage => {
    const head = query.changesHead ? changesHead(dataVersion()) : undefined;
    const at = positions.get(datasetId);
    if (!at) return withHead(emptyPage(0), head);
    return withHead(isPlainPage(query) ? plainPage(db, pages, at, query) : queried.onLoop(at, query), head);
  });
  /** A read on a reader thread, in a snapshot of its own: the head is read before it (here, so a fault is reported). */
  const readOffLoop = (datasetId: string, query: RowQuery): Promise<RowPage> => {
    const head = query.changesHead ? changesHead() : undefined;
    return queried.offLoop(datasetId, query).then((page) => withHead(page, head));
  };
  /** A read on the loop while it is short, else on a reader thread (see row-reads.ts). */
  const readRows = (datasetId: string, query: RowQuery): RowPage | Promise<RowPage> => {
    if (!isPlainPage(query) && queried.knownSlow(datasetId, query)) return readOffLoop(datasetId, query);
    try {
      return read(datasetId, query);
    } catch (error) {
      if (error instanceof MovedOffLoop) return readOffLoop(datasetId, query);
      throw error;
    }
  };

  return {
    async aggregateDatasetRows(datasetId, query) {
      return aggregates.aggregateDatasetRows(datasetId, query);
    },
    readDatasetRows: reportsOwnFaults(async (datasetId: string, query: RowQuery) => {
      try {
        return (
          (pages !== null && isPlainPage(query) && rememberedPage(datasetId, query, pages)) ||
          readRows(datasetId, query)
        );
      } catch (error) {
        throw handle.faults.reported(error);
      }
    }),
    async replaceDatasetRows(datasetId, data) {
      // A refresh is a bulk replace that also sets lastRefreshedAt: the same staging, the same queue.
      await bulkWrite({
        datasetId,
        mode: "replace",
        rows: data.rows,
        columns: () => data.columns,
        updatedAt: data.refreshedAt,
        refreshedAt: data.refreshedAt,
      });
    },
    async writeDatasetRows(write) {
      return bulkWrite(write);
    },
  };
}

/** The one key of the change log's remembered head. */
const HEAD = "head";

/** `page`, carrying the change log's head when it was asked for. */
function withHead(page: RowPage, head: string | undefined): RowPage {
  if (head !== undefined) page.changesHead = head;
  return page;
}

/** A small page in stored order without conditions: the common read. */
function isPlainPage(query: RowQuery): query is RowQuery & { limit: number } {
  return (
    query.filters === null &&
    !query.where &&
    !query.sort?.length &&
    query.limit !== null &&
    query.limit > 0 &&
    query.limit <= SMALL_READ
  );
}

/**
 * A plain page from one statement that fetches only the stored texts:
 * positions in the window are dense, so the rows are those after the
 * start position (a cursor's, or the window's beginning) plus the offset,
 * and the last one's position is counted, not read.
 */
function plainPage(
  db: Database.Database,
  pages: PageMemo | null,
  at: Positions,
  query: RowQuery & { limit: number },
): RowPage {
  const range = plainRange(at, query);
  const texts = isEmpty(range) ? [] : pageTexts(db, pages, at.seq, range);
  return plainPageOf(texts, at, range.start, query.columns);
}

/** A plain page's rows: those at positions start < p < end. */
interface PageRange {
  start: number;
  end: number;
}

/** No position lies strictly between start and end (the page starts at or past the window's end). */
function isEmpty({ start, end }: PageRange): boolean {
  return end <= start + 1;
}

function plainRange(at: Positions, query: RowQuery & { limit: number }): PageRange {
  const start = Math.max(at.first_position - 1, query.after?.position ?? -Infinity) + query.offset;
  return { start, end: Math.min(at.next_position, start + 1 + query.limit) };
}

function plainPageOf(texts: readonly string[], at: Positions, start: number, columns: string[] | null): RowPage {
  let yielded = 0;
  const lastKey = () => (yielded === 0 ? null : { values: [], position: start + yielded });
  const page: RowPage = {
    totalRows: at.next_position - at.first_position,
    rows: mapped(texts, (text, i) => {
      yielded = i + 1;
      return parsedRow(text, columns);
    }),
    lastKey,
  };
  if (columns === null) {
    page.rowsJson = mapped([texts], (batch) => {
      yielded = batch.length;
      return batch;
    });
  }
  return page;
}

/** A page's texts, in order, remembered (frozen) when they fit. */
function pageTexts(
  db: Database.Database,
  pages: PageMemo | null,
  seq: number,
  { start, end }: PageRange,
): readonly string[] {
  const remembered = pages?.current();
  const key = pageKey(seq, { start, end });
  const known = remembered?.get(key);
  if (known) return known;
  const texts = prepared<string>(db, "SELECT data FROM dataset_rows WHERE row_key > ? AND row_key < ? ORDER BY row_key")
    .pluck()
    .all(rowKey(seq, start), rowKey(seq, end));
  remembered?.set(key, Object.freeze(texts));
  return texts;
}

function pageKey(seq: number, { start, end }: PageRange): string {
  return `${seq}:${start}:${end}`;
}

/**
 * Plain pages read again while nothing can have changed them, by dataset seq
 * and position range. A dataset's rows never change in place and positions
 * are never written twice: every change moves the window (appends above it,
 * trims and a replace's publishing past its start), and a page is read from
 * inside the window only, so the rows at a range of positions are those
 * remembered for as long as the seq names the same dataset. A seq can come
 * back with a new dataset after a delete: a dataset made here
 * (`datasetsMade`) or any commit of another process (`PRAGMA data_version`)
 * forgets every page. Read inside the read's transaction (no lock of its own).
 */
type PageMemo = RememberedReads<readonly string[]>;

function rememberedPages(handle: SqliteHandle): PageMemo | null {
  if (handle.pageMemoryBytes === 0) return null;
  return rememberedReads<readonly string[]>(handle.db, () => handle.datasetsMade, {
    maxSize: handle.pageMemoryBytes,
    // A page over an eighth of the memory is read from the file each time, so one cannot push out most of the others.
    maxEntrySize: handle.pageMemoryBytes / 8,
    // UTF-16 at most, plus a string's header and the array's slot.
    sizeOf: (texts) => texts.reduce((bytes, text) => bytes + 2 * text.length + 24, 64),
  });
}

/** Append rows at the dataset's next positions (the caller runs this inside a transaction). */
export function appendRowsStatement(db: Database.Database): (seq: number, from: number, rows: readonly Row[]) => void {
  const insert = db.prepare("INSERT INTO dataset_rows (row_key, dataset_seq, position, data) VALUES (?, ?, ?, ?)");
  return (seq, from, rows) => {
    let position = from;
    for (const row of rows) {
      insert.run(rowKey(seq, position), seq, position, JSON.stringify(row));
      position++;
    }
  };
}
