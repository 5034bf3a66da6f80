import type { AggregateAnswer, AggregateQuery } from "../../domain/aggregate-query.js";
import type { Actor, AuditEvent, Row, TableRecord } from "../../domain/model.js";
import type { RowCondition, RowKey, SortKey } from "../../domain/row-query-model.js";
import type { ChangesPage, ChangesQuery, WatchChanges } from "./changes.js";
import type { IdPage, PutResult } from "./identity.js";

/**
 * A page of an input table's rows: `offset` and `limit` as always; `where`,
 * `sort` and `after` as `RowQuery` of the catalog says (the same meaning on
 * every store; `_id`, `_createdAt` and `_updatedAt` are columns like the
 * others).
 */
export interface TableRowsQuery {
  offset: number;
  limit: number;
  /** false: the caller needs no `totalRows` (a download's later batches); the store may skip counting and answer -1. */
  count?: boolean;
  where?: RowCondition | null;
  sort?: SortKey[] | null;
  after?: RowKey | null;
}

export interface TableRowsPage {
  /** Rows matching `where` (ignoring `after`, offset and limit). */
  totalRows: number;
  rows: Row[];
  /**
   * The key of the last row of `rows` (sort values and stored position), for
   * a later `after`; null when `rows` is empty. A row's position is given at
   * insert and never changes, and no later row gets it again (a keyset
   * position, not an index): rows deleted before a key neither skip nor
   * repeat a row of the read continuing after it.
   */
  lastKey: RowKey | null;
}

export type EditOp = "create" | "update" | "delete";

/** One entry of a table's edit log. */
export interface EditLogEntry {
  tableId: string;
  rowId: string;
  op: EditOp;
  actor: Actor;
  /** ISO 8601 time of the write (the clock's `now` of the call). */
  at: string;
  /** The stored row before the write; null for `create`. */
  before: Row | null;
  /** The stored row after the write; null for `delete`. */
  after: Row | null;
}

/** A response kept for an Idempotency-Key so a retry can replay it. */
export interface StoredResponse {
  status: number;
  body: unknown;
}

/**
 * The Idempotency-Key a row write is made under. `scope` already includes
 * the credential and the table; `fingerprint` is what "the same request"
 * means (the store keeps it and returns it, it does not compare it).
 */
export interface IdempotencyKeyUse {
  scope: string;
  key: string;
  fingerprint: string;
  /** The status recorded with the written row as the key's answer: 201 for an insert, 200 for an update. */
  status: number;
  /** A key recorded longer ago than this (by the write's `now`) is expired: the write is made afresh. */
  ttlMs: number;
}

/** What a row write under an Idempotency-Key came to. */
export type IdempotentOutcome<R> =
  /**
   * This call made the write (or was refused: `result` says). When it wrote,
   * the key and its answer (`status`, the stored row) were committed in the
   * same transaction as the row; when it was refused, the key is left as
   * it was (unused), so a corrected retry may use it.
   */
  | { state: "written"; result: R }
  /**
   * An earlier request with this key committed its write: nothing was
   * written now; replay `response` if `fingerprint` matches.
   */
  | { state: "completed"; fingerprint: string; response: StoredResponse }
  /**
   * Another request with this key is writing and has not committed after
   * the store's lock wait; nothing was written now. `fingerprint` is null
   * when the store cannot see it yet (an uncommitted write's).
   */
  | { state: "in_progress"; fingerprint: string | null };

export type RowWriteResult =
  | { status: "ok"; row: Row }
  | { status: "not_found" }
  /** `expectedUpdatedAt` was older than the row's `_updatedAt`. */
  | { status: "conflict"; current: Row };

/** A row to insert, as `TableStore.insertTableRow` takes it. */
export interface InsertRowInput {
  tableId: string;
  rowId: string;
  values: Row;
  actor: Actor;
  now: number;
  auditEvent: AuditEvent;
}

/** A row update, as `TableStore.updateTableRow` takes it. */
/** A row's delete: `expectedUpdatedAt`, when given and not null, makes it conditional (see `deleteTableRow`). */
export interface DeleteRowInput {
  tableId: string;
  rowId: string;
  expectedUpdatedAt?: string | null;
  actor: Actor;
  now: number;
  auditEvent: AuditEvent;
}

export interface UpdateRowInput {
  tableId: string;
  rowId: string;
  patch: Row;
  expectedUpdatedAt: string | null;
  actor: Actor;
  now: number;
  auditEvent: AuditEvent;
}

/**
 * Input-table rows, their edit log and the Idempotency-Keys of row writes.
 *
 * A stored row is flat: the column values plus `_id`, `_createdAt` and
 * `_updatedAt` (ISO 8601 with milliseconds, `toISOString()` form, for rows
 * written through this interface). Column names are arbitrary strings, including
 * `__proto__` and `constructor`: they are data and MUST round-trip as own
 * properties. Returned rows are copies the caller may keep.
 * `src/domain/table-rows.ts` has the stamp and merge rules as pure functions.
 * A fault of the store answers 503 `storage_unavailable` (the fault clause on `Storage`).
 */
export interface TableStore {
  getTable(id: string): Promise<TableRecord | null>;
  /** Every input table, by id (the admin listing). */
  listTables(page: IdPage): Promise<TableRecord[]>;
  /** Stored order (creation order) unless sorted; `totalRows` counts the matching rows. */
  listTableRows(tableId: string, page: TableRowsQuery): Promise<TableRowsPage>;
  /**
   * An aggregate of an input table's rows (`_createdAt`, `_updatedAt` among
   * its columns), with the guarantees of `CatalogStore.aggregateDatasetRows`:
   * in the store, one snapshot, bounded by the call deadline.
   */
  aggregateTableRows(tableId: string, query: AggregateQuery): Promise<AggregateAnswer>;
  /** One row by `_id`, or null. */
  getTableRow(tableId: string, rowId: string): Promise<Row | null>;
  /**
   * Insert a row (values already validated; `_id` chosen by the caller) with
   * `_createdAt` = `_updatedAt` = the stamp for `now`; append the edit-log
   * entry and `auditEvent` (stored at `now`, at the next audit position) in
   * the SAME transaction. The table's `rowCount` grows by one and its
   * `updatedAt` becomes the stamp. Returns the stored row.
   */
  insertTableRow(input: InsertRowInput): Promise<Row>;
  /**
   * MUST be atomic (compare-and-set): when `expectedUpdatedAt` is given and
   * the row's `_updatedAt` is a later instant (compare instants, not strings),
   * nothing is written and `conflict` is returned with the current row.
   * Otherwise the patch's keys replace the row's values (other columns are
   * kept) and `_updatedAt` becomes `max(now, previous _updatedAt + 1 ms)`
   * (`nextUpdatedAt`), so it strictly increases on every write to a row, even
   * two writes in the same millisecond. Appends the edit log entry and
   * `auditEvent` in the same transaction; the table's `updatedAt` follows.
   */
  updateTableRow(input: UpdateRowInput): Promise<RowWriteResult>;
  /**
   * `insertTableRow` made at most once per (scope, key), in ONE transaction
   * with the key and its answer: they commit together or not at all, so a
   * key is never recorded without its row, nor a row without its key, and
   * a request that timed out leaves nothing to clean up.
   *
   * MUST be atomic across every process sharing the store: of concurrent
   * calls with one (scope, key) exactly one writes; the others wait for it
   * (a bounded lock wait) and get `completed` once it committed, or write
   * themselves once it rolled back — never a second row. A call still
   * waiting after the store's lock wait gets `in_progress`. An expired key
   * (`ttlMs`) is written afresh; so is a key an earlier version of the store
   * recorded without an answer once `IDEMPOTENCY_LEASE_MS` has passed.
   */
  insertTableRowOnce(input: InsertRowInput & { idempotency: IdempotencyKeyUse }): Promise<IdempotentOutcome<Row>>;
  /**
   * `updateTableRow` made at most once per (scope, key), as
   * `insertTableRowOnce` says. The key is checked before the row: a retry
   * whose first attempt committed gets `completed`, not the `conflict` its
   * own write would now cause. A `not_found` or `conflict` result records
   * nothing under the key.
   */
  updateTableRowOnce(
    input: UpdateRowInput & { idempotency: IdempotencyKeyUse },
  ): Promise<IdempotentOutcome<RowWriteResult>>;
  /**
   * Deletes and returns the deleted row as `ok`; appends edit log entry and
   * `auditEvent` in the same transaction; `rowCount` shrinks by one. Nothing
   * is logged for an unknown row (`not_found`). MUST be atomic
   * (compare-and-set) as `updateTableRow` is: when `expectedUpdatedAt` is
   * given and the row's `_updatedAt` is a later instant, nothing is deleted
   * and `conflict` is returned with the current row (an `If-Match` DELETE).
   */
  deleteTableRow(input: DeleteRowInput): Promise<RowWriteResult>;
  /** The table's edit log, oldest first (all of it when `page` is omitted). */
  listEditLog(tableId: string, page?: { offset: number; limit: number }): Promise<EditLogEntry[]>;
  /**
   * The table's change feed (`ChangeFeedReads.read` in changes.ts): every
   * row write above appends its change (`insert`, `update` with the whole
   * row after it, `delete`) in the SAME transaction as the write, at the
   * next position of the store's change log; a put that reshaped the rows
   * appends a `reset`. A deleted table's changes go with it.
   */
  readTableChanges(tableId: string, query: ChangesQuery): Promise<ChangesPage>;
  /** `ChangeFeedReads.head` of the table's feed: where a rows read made after it hands over to the feed. */
  tableChangesHead(tableId: string): Promise<string>;
  /** Retention of the change log (`ChangeRetention.trimChanges`). */
  trimTableChanges(storedBefore: number): Promise<void>;
  /** Optional `WatchChanges` (changes.ts), for the tables' feeds. */
  watchTableChanges?: WatchChanges;
}

/** Changes to input tables themselves (their rows change through `TableStore`). Atomic, visible to the next read. */
export interface TableWrites {
  /**
   * Creates or replaces the table with `table.id`. Replacing keeps its rows
   * and edit log; `rowCount` is the store's (the value passed is ignored).
   * With `reshape` (new declared columns), every stored row becomes
   * `reshape(row)` in the same transaction (its `_id` and stamps as the
   * function returns them; no edit-log entries); when it throws for any row,
   * nothing is written and the error is re-thrown.
   */
  putTable(table: TableRecord, reshape?: (row: Row) => Row): Promise<PutResult>;
  /** Deletes the table, its rows, its edit log, in one transaction; false when unknown. */
  deleteTable(id: string): Promise<boolean>;
}
