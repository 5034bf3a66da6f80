import type { AggregateAnswer, AggregateQuery } from "../../domain/aggregate-query.js";
import type { Column, Row } from "../../domain/model.js";
import type { RowCondition, RowKey, SortKey } from "../../domain/row-query-model.js";

export type { RowCondition, RowKey, SortKey };

/**
 * A read of dataset rows, pushed down to storage. Rows come in stored order
 * (upload order; webhook rows by arrival), or sorted by `sort`.
 *
 * `where`, `sort` and `after` mean what ../shared/row-queries.md says, on
 * every store alike (`src/domain/row-query-order.ts` is the reference):
 * JSON kinds never coerce, nulls and absent values sort last both ways, ties
 * go by stored position ascending. A store MUST evaluate them itself, not by
 * loading the dataset into the process (the memory store, which holds every
 * row anyway, excepted).
 */
export interface RowQuery {
  /** Rows to skip (after filtering, after `after`). */
  offset: number;
  /** Maximum rows; null means all remaining rows. */
  limit: number | null;
  /** Columns to return, in this order; null means every column of the row. */
  columns: string[] | null;
  /** Exact matches: JSON equality of the stored value. null means no filter. */
  filters: Record<string, unknown> | null;
  /** Conditions (AND with `filters`); absent or null means none. Column names checked by the caller. */
  where?: RowCondition | null;
  /** Sort columns; absent, null or empty means stored order. */
  sort?: SortKey[] | null;
  /**
   * Keyset paging: only rows strictly after this key in the read's order
   * (its `values` are the sort columns' values, `position` the stored
   * position `lastKey` reported). Absent or null: from the first row.
   */
  after?: RowKey | null;
  /**
   * Also tell where the dataset's change feed stands (`RowPage.changesHead`):
   * the rows read's hand-off to the feed (../shared/changes.md).
   */
  changesHead?: boolean;
}

export interface RowPage {
  /** Rows matching `filters` and `where` (ignoring `after`, offset and limit). */
  totalRows: number;
  /**
   * The page, produced lazily so a large read can be streamed: an
   * implementation MUST NOT materialise the whole dataset in memory.
   */
  rows: AsyncIterable<Row>;
  /**
   * Optional, for stores that keep rows as JSON text: the same page as
   * `JSON.stringify(row)` of every row `rows` would yield, in the same
   * order, in batches as the store fetches them (a batch may be empty), so a
   * response can be written without parsing and re-serialising each row.
   * Equally lazy. A caller consumes `rows` OR `rowsJson`, never both.
   */
  rowsJson?: AsyncIterable<readonly string[]>;
  /**
   * Once `rows` or `rowsJson` has been read (wholly or in part), the key of
   * the last row it yielded (its sort values and stored position), which a
   * later read passes as `after` to continue right behind it; null when it
   * yielded none. Positions are the store's, and only grow: an append's rows
   * come after the stored ones (which keep theirs, retention trimming the
   * oldest or not), and a replace or refresh positions its rows after every
   * earlier one, so a read continuing after a key from before it starts at
   * the new rows.
   */
  lastKey(): RowKey | null;
  /**
   * Set when the query asked for it (`changesHead`): a position of the
   * dataset's change feed (as `datasetChangesHead` gives) such that every
   * change up to it is in the page's rows, read in the page's own snapshot or
   * before it. Following the feed from there misses nothing written after the
   * rows were read.
   */
  changesHead?: string;
}

/**
 * The rows of upload and connection datasets (an input table's rows are the
 * `tables` area's): reading, aggregating, and the refresh's replace, which
 * the core makes on its own. A fault of the store answers 503
 * `storage_unavailable` (the fault clause on `Storage`).
 */
export interface RowStore {
  /**
   * Rows of an upload or connection dataset (never an input table). Column
   * names in `columns` and `filters` have been checked against the dataset's
   * columns by the caller. With `changesHead` asked, the page MUST carry it
   * (`headBeforePage` in src/storage/change-feeds.ts gives it to a store that
   * reads the head apart from its pages).
   */
  readDatasetRows(datasetId: string, query: RowQuery): Promise<RowPage>;
  /**
   * An aggregate of an upload or connection dataset's rows
   * (../shared/aggregates.md), the query parsed against its columns by the
   * caller. It runs in the store (SQL `GROUP BY`, never the rows loaded into
   * the process: memory is bounded by the groups), over one snapshot of the
   * rows, and answers as `evaluateAggregate` does (`aggregate-eval.ts`).
   * Bounded by the call deadline like every store call: past it the caller
   * gets 503 `storage_unavailable` with Retry-After, never part of an answer.
   * An unknown dataset answers as an empty one.
   */
  aggregateDatasetRows(datasetId: string, query: AggregateQuery): Promise<AggregateAnswer>;
  /**
   * Replace every row of a connection dataset (a refresh), set its columns,
   * rowCount, lastRefreshedAt and updatedAt, in one transaction: readers see
   * the old rows or the new ones, never a mix.
   */
  replaceDatasetRows(datasetId: string, data: { rows: Row[]; columns: Column[]; refreshedAt: string }): Promise<void>;
}

/** What a bulk row write stores. */
export interface DatasetRowsWrite {
  datasetId: string;
  /** `replace`: the rows become exactly `rows`; `append`: `rows` follow the stored ones. */
  mode: "replace" | "append";
  /**
   * The rows, in order, read once. They may be many more than fit in memory:
   * a store writes them as they come and MUST NOT collect them all first
   * (the memory store, which holds every row anyway, excepted). When the
   * iteration throws, nothing is written and the error is re-thrown.
   */
  rows: AsyncIterable<Row>;
  /** Called once, after the last row and before the write becomes visible: the dataset's columns from then on. */
  columns(): Column[];
  /** The dataset's `updatedAt` from then on. */
  updatedAt: string;
}

/**
 * The admin functions' bulk row writes. Each call is atomic and visible to
 * the very next read, in every process sharing the store.
 */
export interface RowWrites {
  /**
   * Replace or append a dataset's rows from a stream. Atomic for readers: a
   * read (a page of `readDatasetRows`, `getDataset().rowCount`) sees the rows
   * before the write or after it, never a mix or a part. Bulk writes to one
   * dataset are serialised: the outcome is as if they ran one after the other.
   * Returns the dataset's row count after the write. Throws (writing nothing)
   * when the dataset does not exist or is an input table.
   */
  writeDatasetRows(write: DatasetRowsWrite): Promise<{ rowCount: number }>;
}
