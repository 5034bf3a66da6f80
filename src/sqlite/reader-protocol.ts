import type { SqliteDriverName } from "./driver.js";
import type { RowQuery } from "../ports/storage/rows.js";
import type { TableRowsPage, TableRowsQuery } from "../ports/storage/tables.js";

/*
 * What the event loop and a reader thread say to each other (see
 * reader-pool.ts and reader-thread.ts), and what a read of dataset rows
 * fetches (see dataset-reads.ts): plain data, copied between threads.
 */

/** A dataset's window: its rows are at the positions first_position ≤ p < next_position. */
export interface Positions {
  id: string;
  seq: number;
  first_position: number;
  next_position: number;
}

/** A stored row as a read fetches it. */
export interface Fetched {
  position: number;
  data: string;
}

export interface ReaderThreadData {
  path: string;
  driver: SqliteDriverName;
  busyTimeoutMs: number;
}

/** A count made for a window (the count memo's entry, see row-reads.ts). */
export interface CountEntry {
  first: number;
  next: number;
  n: number;
}

/**
 * A read of dataset rows that is not a plain page, in one read transaction:
 * its window, its count (`count`, when made for the same window, is used as
 * it is) and, when it fits one query, its rows; a larger read is then
 * streamed in a session (`stream`).
 */
export interface RowsRequest {
  kind: "rows";
  datasetId: string;
  query: RowQuery;
  count: CountEntry | null;
}

export interface RowsAnswer {
  /** The window read, or null when the dataset does not exist. */
  at: Positions | null;
  totalRows: number;
  /** The count made here (null: the window's size, or `count` as given). */
  counted: CountEntry | null;
  /** The rows, or null when the read is to be streamed. */
  fetched: Fetched[] | null;
}

/**
 * Opens the session's read transaction (its snapshot) and answers the first
 * batch of the read; `next` answers the following ones. `seq`: the dataset
 * the count was made for (a dataset made again since yields nothing).
 */
export interface StreamRequest {
  kind: "stream";
  datasetId: string;
  seq: number;
  query: RowQuery;
  totalRows: number;
}

export interface NextRequest {
  kind: "next";
}

/** A batch of a streamed read; `done`: there are no more. */
export interface BatchAnswer {
  rows: Fetched[];
  done: boolean;
}

/**
 * Any read-only statement (the connection cannot write), with positional
 * parameters: all its rows, or the first (undefined: none). A statement that
 * scans should call `DEADLINE_CHECK` first in its WHERE, so its deadline can
 * end it (see statement-deadline.ts).
 */
export interface StatementRequest {
  kind: "statement";
  text: string;
  params: unknown[];
  mode: "all" | "get";
}

/** A page of an input table's rows with where, sort or after (see `queriedTableRows`), in one read transaction. */
export interface TableRowsRequest {
  kind: "tableRows";
  tableId: string;
  query: TableRowsQuery;
}

export type ReaderRequest = RowsRequest | StreamRequest | NextRequest | StatementRequest | TableRowsRequest;

export type ReaderAnswer<R extends ReaderRequest> = R extends RowsRequest
  ? RowsAnswer
  : R extends StreamRequest | NextRequest
    ? BatchAnswer
    : R extends TableRowsRequest
      ? TableRowsPage
      : unknown;

/** What the pool posts: a request, its session (null: none), the time it has left. `end` closes a session. */
export interface ReaderEnvelope {
  id: number;
  session: number | null;
  timeoutMs: number;
  request: ReaderRequest | { kind: "end" };
}

/** What the thread posts back: the answer, or the error (`deadline`: ended at its deadline). */
export type ReaderMessage =
  | { id: number; value: unknown }
  | { id: number; error: { name: string; message: string; code?: string; deadline?: boolean } };
