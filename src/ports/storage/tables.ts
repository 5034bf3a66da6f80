import type { Actor, AuditEvent, Row, TableRecord } from "../../domain/model.js";
import type { RowCondition, RowKey, SortKey } from "../../domain/row-query-model.js";
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
  /** The key of the last row of `rows` (sort values and stored position), for a later `after`; null when `rows` is empty. */
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

export type IdempotencyClaim =
  /** The caller now owns the key and MUST complete or release it. */
  | { state: "claimed" }
  /** Another request holds the key and has not finished. */
  | { state: "in_progress"; fingerprint: string }
  /** The first request finished; replay its response (if the fingerprint matches). */
  | { state: "completed"; fingerprint: string; response: StoredResponse };

export type RowWriteResult =
  | { status: "ok"; row: Row }
  | { status: "not_found" }
  /** `expectedUpdatedAt` was older than the row's `_updatedAt`. */
  | { status: "conflict"; current: Row };

/**
 * Input-table rows, their edit log and Idempotency-Key claims.
 *
 * A stored row is flat: the column values plus `_id`, `_createdAt` and
 * `_updatedAt` (ISO 8601 with milliseconds, `toISOString()` form, for rows
 * written through this interface). Column names are arbitrary strings, including
 * `__proto__` and `constructor`: they are data and MUST round-trip as own
 * properties. Returned rows are copies the caller may keep.
 * `src/domain/table-rows.ts` has the stamp and merge rules as pure functions.
 */
export interface TableStore {
  getTable(id: string): Promise<TableRecord | null>;
  /** Every input table, by id (the admin listing). */
  listTables(page: IdPage): Promise<TableRecord[]>;
  /** Stored order (creation order) unless sorted; `totalRows` counts the matching rows. */
  listTableRows(tableId: string, page: TableRowsQuery): Promise<TableRowsPage>;
  /** One row by `_id`, or null. */
  getTableRow(tableId: string, rowId: string): Promise<Row | null>;
  /**
   * Insert a row (values already validated; `_id` chosen by the caller) with
   * `_createdAt` = `_updatedAt` = the stamp for `now`; append the edit-log
   * entry and `auditEvent` (stored at `now`, at the next audit position) in
   * the SAME transaction. The table's `rowCount` grows by one and its
   * `updatedAt` becomes the stamp. Returns the stored row.
   */
  insertTableRow(input: { tableId: string; rowId: string; values: Row; actor: Actor; now: number; auditEvent: AuditEvent }): Promise<Row>;
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
  updateTableRow(input: {
    tableId: string;
    rowId: string;
    patch: Row;
    expectedUpdatedAt: string | null;
    actor: Actor;
    now: number;
    auditEvent: AuditEvent;
  }): Promise<RowWriteResult>;
  /**
   * Deletes and returns the deleted row as `ok`; appends edit log entry and
   * `auditEvent` in the same transaction; `rowCount` shrinks by one. Nothing
   * is logged for an unknown row (`not_found`).
   */
  deleteTableRow(input: { tableId: string; rowId: string; actor: Actor; now: number; auditEvent: AuditEvent }): Promise<RowWriteResult>;
  /** The table's edit log, oldest first (all of it when `page` is omitted). */
  listEditLog(tableId: string, page?: { offset: number; limit: number }): Promise<EditLogEntry[]>;
  /**
   * MUST be atomic: of concurrent claims of one (scope, key) exactly one gets
   * `claimed`. A claim older than `ttlMs` (by `now`) is expired and may be
   * claimed afresh; so may a claim still without a response after `leaseMs`
   * (its request crashed or hung, so it will never complete — without the
   * lease, one crash would block the key for the whole TTL). `scope` already
   * includes the credential and the table. The store does not compare
   * fingerprints; it returns the stored one.
   */
  claimIdempotencyKey(input: {
    scope: string;
    key: string;
    fingerprint: string;
    now: number;
    ttlMs: number;
    leaseMs: number;
  }): Promise<IdempotencyClaim>;
  /** Store the final response of a claimed key (kept until the claim expires). */
  completeIdempotencyKey(input: { scope: string; key: string; response: StoredResponse }): Promise<void>;
  /** Drop a claim whose request failed without a response worth replaying. */
  releaseIdempotencyKey(input: { scope: string; key: string }): Promise<void>;
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
