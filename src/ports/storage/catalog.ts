import type { Column, ConnectionRecord, DatasetRecord, Row } from "../../domain/model.js";

/**
 * A read of dataset rows, pushed down to storage. Rows come in stored order
 * (upload order; webhook rows by arrival).
 */
export interface RowQuery {
  /** Rows to skip (after filtering). */
  offset: number;
  /** Maximum rows; null means all remaining rows. */
  limit: number | null;
  /** Columns to return, in this order; null means every column of the row. */
  columns: string[] | null;
  /** Exact matches: JSON equality of the stored value. null means no filter. */
  filters: Record<string, unknown> | null;
}

export interface RowPage {
  /** Rows matching `filters` (ignoring offset and limit). */
  totalRows: number;
  /**
   * The page, produced lazily so a large read can be streamed: an
   * implementation MUST NOT materialise the whole dataset in memory.
   */
  rows: AsyncIterable<Row>;
  /**
   * Optional, for stores that keep rows as JSON text: the same page as
   * `JSON.stringify(row)` of every row `rows` would yield, in the same
   * order, so a response can be streamed without parsing and re-serialising
   * each row. Equally lazy. A caller consumes `rows` OR `rowsJson`, never both.
   */
  rowsJson?: AsyncIterable<string>;
}

/** Connections and datasets. Input tables are datasets of type `input_table`. */
export interface CatalogStore {
  getConnection(id: string): Promise<ConnectionRecord | null>;
  /** Connections of a team, ordered by id. */
  listConnections(teamId: string): Promise<ConnectionRecord[]>;
  /** Datasets of a team (input tables included), ordered by name then id. When `ids` is given only those. */
  listDatasets(query: { teamId: string; ids?: readonly string[] }): Promise<DatasetRecord[]>;
  /** A dataset or input table by id. */
  getDataset(id: string): Promise<DatasetRecord | null>;
  /**
   * Rows of an upload or connection dataset (never an input table). Column
   * names in `columns` and `filters` have been checked against the dataset's
   * columns by the caller.
   */
  readDatasetRows(datasetId: string, query: RowQuery): Promise<RowPage>;
  /**
   * Replace every row of a connection dataset (a refresh), set its columns,
   * rowCount, lastRefreshedAt and updatedAt, in one transaction: readers see
   * the old rows or the new ones, never a mix.
   */
  replaceDatasetRows(
    datasetId: string,
    data: { rows: Row[]; columns: Column[]; refreshedAt: string },
  ): Promise<void>;
}
