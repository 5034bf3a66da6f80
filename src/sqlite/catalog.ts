import { sqliteAggregates } from "./aggregate.js";
import type * as Database from "./driver.js";
import { mapped } from "../domain/async-iterables.js";
import type { ConnectionRecord, DatasetRecord, DatasetType, Row } from "../domain/model.js";
import type { CatalogStore, CatalogWrites, RowPage, RowQuery } from "../ports/storage/catalog.js";
import { bulkRowWriter } from "./bulk-rows.js";
import { catalogWrites } from "./catalog-writes.js";
import { type Positions, SMALL_READ } from "./dataset-reads.js";
import { dataVersionOf, deepFreeze, parseJson, prepared, type RememberedReads, rememberedReads, rowKey, type SqliteHandle } from "./db.js";
import { idPageQuery } from "./identity.js";
import { ensureRowIndexes } from "./row-indexes.js";
import { emptyPage, MovedOffLoop, parsedRow, queriedReads } from "./row-reads.js";
import { reportsOwnFaults } from "../sql/store-calls.js";

interface DatasetRow {
  seq: number;
  id: string;
  team_id: string;
  name: string;
  type: string;
  connection_id: string | null;
  source: string | null;
  columns: string;
  columns_declared: number;
  last_refreshed_at: string | null;
  updated_at: string;
  row_count: number;
}

interface ConnectionRow {
  id: string;
  team_id: string;
  name: string;
  type: string;
  config: string;
  created_at: string;
}

/** Datasets and input tables share one listing; input tables have no positions (their rows live in table_rows). */
const DATASET_COLUMNS = `seq, id, team_id, name, type, connection_id, source, columns, columns_declared, last_refreshed_at, updated_at,
  next_position - first_position AS row_count`;
const TABLE_AS_DATASET = `NULL AS seq, id, team_id, name, 'input_table' AS type, NULL AS connection_id, NULL AS source, columns,
  0 AS columns_declared, NULL AS last_refreshed_at, updated_at, row_count`;

/**
 * Reads query the writer connection (or a snapshot on a read-only one), so
 * every commit, of this process or another on the same file, is seen by the
 * next read. What is remembered (dataset records, counts) is forgotten as
 * soon as either can have changed it.
 */
export function sqliteCatalog(handle: SqliteHandle): CatalogStore & CatalogWrites {
  const { db } = handle;
  const connection = db.prepare<[string], ConnectionRow>("SELECT * FROM connections WHERE id = ?");
  const teamConnections = db.prepare<[string], ConnectionRow>("SELECT * FROM connections WHERE team_id = ? ORDER BY id");
  const teamDatasets = db.prepare<[string, string], DatasetRow>(
    `SELECT ${DATASET_COLUMNS} FROM datasets WHERE team_id = ?
     UNION ALL SELECT ${TABLE_AS_DATASET} FROM input_tables WHERE team_id = ?
     ORDER BY name, id`,
  );
  const someDatasets = db.prepare<[string, string, string, string], DatasetRow>(
    `SELECT ${DATASET_COLUMNS} FROM datasets WHERE team_id = ? AND id IN (SELECT value FROM json_each(?))
     UNION ALL SELECT ${TABLE_AS_DATASET} FROM input_tables WHERE team_id = ? AND id IN (SELECT value FROM json_each(?))
     ORDER BY name, id`,
  );
  const dataset = db.prepare<[string], DatasetRow & { first_position: number; next_position: number }>(
    `SELECT ${DATASET_COLUMNS}, first_position, next_position FROM datasets WHERE id = ?`,
  );
  const table = db.prepare<[string], DatasetRow>(`SELECT ${TABLE_AS_DATASET} FROM input_tables WHERE id = ?`);
  const aggregates = sqliteAggregates(handle);
  const positions = db.prepare<[string], Positions>("SELECT id, seq, first_position, next_position FROM datasets WHERE id = ?");
  const connectionPage = idPageQuery<ConnectionRow>(db, "SELECT * FROM connections");
  const datasetPage = idPageQuery<DatasetRow>(db, `SELECT ${DATASET_COLUMNS} FROM datasets`);
  const bulkWrite = bulkRowWriter(handle);
  ensureRowIndexes(db);
  // Every read of rows asks for its dataset first (access, columns): its record is remembered, frozen, until
  // another process commits or this one writes a dataset or input table (misses are not remembered).
  // With the record, its window (input tables have none): the same row, the same changes.
  const records = rememberedReads<RememberedDataset>(db, () => handle.datasetsVersion, REMEMBERED_RECORDS);
  const remembered = (id: string): RememberedDataset | null => {
    const known = records.current();
    const found = known.get(id);
    if (found) return found;
    const row = dataset.get(id);
    const tableRow = row ? undefined : table.get(id);
    const loaded: RememberedDataset | null = row
      ? { record: deepFreeze(toDataset(row)), at: { id, seq: row.seq, first_position: row.first_position, next_position: row.next_position } }
      : tableRow
        ? { record: deepFreeze(toDataset(tableRow)), at: null }
        : null;
    if (loaded) known.set(id, loaded);
    return loaded;
  };
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
    return texts ? plainPageOf(texts, at, range.start, query.columns) : null;
  };
  const queried = queriedReads(handle);
  // One read transaction: the window, the count and a small page come from one snapshot, even
  // when another process publishes a bulk write in between (a streamed page takes its own).
  const read = db.transaction((datasetId: string, query: RowQuery): RowPage => {
    const at = positions.get(datasetId);
    if (!at) return emptyPage(0);
    return isPlainPage(query) ? plainPage(db, pages, at, query) : queried.onLoop(at, query);
  });
  /** A read on the loop while it is short, else on a reader thread (see row-reads.ts). */
  const readRows = (datasetId: string, query: RowQuery): RowPage | Promise<RowPage> => {
    if (!isPlainPage(query) && queried.knownSlow(datasetId, query)) return queried.offLoop(datasetId, query);
    try {
      return read(datasetId, query);
    } catch (error) {
      if (error instanceof MovedOffLoop) return queried.offLoop(datasetId, query);
      throw error;
    }
  };

  return {
    async getConnection(id) {
      const row = connection.get(id);
      return row ? toConnection(row) : null;
    },
    async listConnections(teamId) {
      return teamConnections.all(teamId).map(toConnection);
    },
    async listDatasets({ teamId, ids }) {
      const rows = ids ? someDatasets.all(teamId, JSON.stringify(ids), teamId, JSON.stringify(ids)) : teamDatasets.all(teamId, teamId);
      return rows.map(toDataset);
    },
    async listAllConnections(page) {
      return connectionPage(page).map(toConnection);
    },
    async listAllDatasets(page) {
      return datasetPage(page).map(toDataset);
    },
    // The calls of every rows read: they report their own faults (no wrapper's promise on the way).
    getDataset: reportsOwnFaults(async (id: string) => {
      try {
        return remembered(id)?.record ?? null;
      } catch (error) {
        throw handle.faults.reported(error);
      }
    }),
    async aggregateDatasetRows(datasetId, query) {
      return aggregates.aggregateDatasetRows(datasetId, query);
    },
    readDatasetRows: reportsOwnFaults(async (datasetId: string, query: RowQuery) => {
      try {
        return (pages !== null && isPlainPage(query) && rememberedPage(datasetId, query, pages)) || readRows(datasetId, query);
      } catch (error) {
        throw handle.faults.reported(error);
      }
    }),
    async replaceDatasetRows(datasetId, data) {
      // A refresh is a bulk replace that also sets lastRefreshedAt: the same staging, the same queue.
      await bulkWrite({ datasetId, mode: "replace", rows: data.rows, columns: () => data.columns, updatedAt: data.refreshedAt, refreshedAt: data.refreshedAt });
    },
    ...catalogWrites(handle),
    async writeDatasetRows(write) {
      return bulkWrite(write);
    },
  };
}

/** A small page in stored order without conditions: the common read. */
function isPlainPage(query: RowQuery): query is RowQuery & { limit: number } {
  return query.filters === null && !query.where && !query.sort?.length && query.limit !== null && query.limit > 0 && query.limit <= SMALL_READ;
}

/**
 * A plain page from one statement that fetches only the stored texts:
 * positions in the window are dense, so the rows are those after the
 * start position (a cursor's, or the window's beginning) plus the offset,
 * and the last one's position is counted, not read.
 */
function plainPage(db: Database.Database, pages: PageMemo | null, at: Positions, query: RowQuery & { limit: number }): RowPage {
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
function pageTexts(db: Database.Database, pages: PageMemo | null, seq: number, { start, end }: PageRange): readonly string[] {
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

/** A dataset record as remembered, with its window when it has rows of its own (not an input table). */
interface RememberedDataset {
  record: DatasetRecord;
  at: Positions | null;
}

/** Dataset records remembered per store: at most this many, the least recently used forgotten first. */
const REMEMBERED_RECORDS = 1024;

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

function toConnection(row: ConnectionRow): ConnectionRecord {
  return { id: row.id, teamId: row.team_id, name: row.name, type: row.type, config: parseJson(row.config), createdAt: row.created_at };
}

function toDataset(row: DatasetRow): DatasetRecord {
  const dataset: DatasetRecord = {
    id: row.id,
    teamId: row.team_id,
    name: row.name,
    type: row.type as DatasetType,
    connectionId: row.connection_id,
    source: row.source,
    columns: parseJson(row.columns),
    rowCount: row.row_count,
    lastRefreshedAt: row.last_refreshed_at,
    updatedAt: row.updated_at,
  };
  // Absent unless declared ("absent or false" mean the same), as datasets were before the field.
  if (row.columns_declared === 1) dataset.columnsDeclared = true;
  return dataset;
}
