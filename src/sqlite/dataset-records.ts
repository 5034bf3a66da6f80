import type { DatasetRecord, DatasetType } from "../domain/model.js";
import type { Positions } from "./dataset-reads.js";
import { deepFreeze, parseJson, type RememberedReads, rememberedReads, type SqliteHandle } from "./db.js";

export interface DatasetRow {
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

/** Datasets and input tables share one listing; input tables have no positions (their rows live in table_rows). */
export const DATASET_COLUMNS = `seq, id, team_id, name, type, connection_id, source, columns, columns_declared, last_refreshed_at, updated_at,
  next_position - first_position AS row_count`;
export const TABLE_AS_DATASET = `NULL AS seq, id, team_id, name, 'input_table' AS type, NULL AS connection_id, NULL AS source, columns,
  0 AS columns_declared, NULL AS last_refreshed_at, updated_at, row_count`;

/** A dataset record as remembered, with its window when it has rows of its own (not an input table). */
interface RememberedDataset {
  record: DatasetRecord;
  at: Positions | null;
}

/** Dataset records remembered per store: at most this many, the least recently used forgotten first. */
const REMEMBERED_RECORDS = 1024;

/**
 * Dataset records as the catalog and the rows areas read them: every read of
 * rows asks for its dataset first (access, columns), so its record is
 * remembered, frozen, until another process commits or this one writes a
 * dataset or input table (misses are not remembered); with the record, its
 * window (input tables have none): the same row, the same changes. One per
 * store, shared by both areas.
 */
export interface DatasetRecords {
  /** The record of a dataset or input table, and its window; null when unknown. */
  remembered(id: string): RememberedDataset | null;
  /** The records remembered now, checked against `data` (a `PRAGMA data_version` just read) when given. */
  current: RememberedReads<RememberedDataset>["current"];
}

export function datasetRecords(handle: SqliteHandle): DatasetRecords {
  const { db } = handle;
  const dataset = db.prepare<[string], DatasetRow & { first_position: number; next_position: number }>(
    `SELECT ${DATASET_COLUMNS}, first_position, next_position FROM datasets WHERE id = ?`,
  );
  const table = db.prepare<[string], DatasetRow>(`SELECT ${TABLE_AS_DATASET} FROM input_tables WHERE id = ?`);
  const records = rememberedReads<RememberedDataset>(db, () => handle.datasetsVersion, REMEMBERED_RECORDS);
  const remembered = (id: string): RememberedDataset | null => {
    const known = records.current();
    const found = known.get(id);
    if (found) return found;
    const row = dataset.get(id);
    const tableRow = row ? undefined : table.get(id);
    const loaded: RememberedDataset | null = row
      ? {
          record: deepFreeze(toDataset(row)),
          at: { id, seq: row.seq, first_position: row.first_position, next_position: row.next_position },
        }
      : tableRow
        ? { record: deepFreeze(toDataset(tableRow)), at: null }
        : null;
    if (loaded) known.set(id, loaded);
    return loaded;
  };
  return { remembered, current: (data?: number) => records.current(data) };
}

export function toDataset(row: DatasetRow): DatasetRecord {
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
