import type { Actor, AuditEvent, Row, TableRecord } from "../../domain/model.js";

export type EditOp = "create" | "update" | "delete";

/** One entry of a table's edit log. */
export interface EditLogEntry {
  tableId: string;
  rowId: string;
  op: EditOp;
  actor: Actor;
  at: string;
  before: Row | null;
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

/** Input-table rows, their edit log and Idempotency-Key claims. */
export interface TableStore {
  getTable(id: string): Promise<TableRecord | null>;
  /** Stored order (creation order). */
  listTableRows(tableId: string, page: { offset: number; limit: number }): Promise<{ totalRows: number; rows: Row[] }>;
  /**
   * Insert a row (values already validated; `_id` chosen by the caller) with
   * `_createdAt` = `_updatedAt` = the stamp for `now`; append the edit-log
   * entry and `auditEvent` in the SAME transaction.
   */
  insertTableRow(input: { tableId: string; rowId: string; values: Row; actor: Actor; now: number; auditEvent: AuditEvent }): Promise<Row>;
  /**
   * MUST be atomic (compare-and-set): when `expectedUpdatedAt` is given and
   * the row's `_updatedAt` is later, nothing is written and `conflict` is
   * returned. `_updatedAt` MUST strictly increase on every write to a row,
   * even two writes in the same millisecond. Appends the edit log entry and
   * `auditEvent` in the same transaction.
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
  /** Deletes; appends edit log entry and `auditEvent` in the same transaction. */
  deleteTableRow(input: { tableId: string; rowId: string; actor: Actor; now: number; auditEvent: AuditEvent }): Promise<RowWriteResult>;
  /** The table's edit log, oldest first. */
  listEditLog(tableId: string, page?: { offset: number; limit: number }): Promise<EditLogEntry[]>;
  /**
   * MUST be atomic: of concurrent claims of one (scope, key) exactly one gets
   * `claimed`. A claim older than `ttlMs` (by `now`) is expired and may be
   * claimed afresh. `scope` already includes the credential and the table.
   */
  claimIdempotencyKey(input: { scope: string; key: string; fingerprint: string; now: number; ttlMs: number }): Promise<IdempotencyClaim>;
  /** Store the final response of a claimed key. */
  completeIdempotencyKey(input: { scope: string; key: string; response: StoredResponse }): Promise<void>;
  /** Drop a claim whose request failed without a response worth replaying. */
  releaseIdempotencyKey(input: { scope: string; key: string }): Promise<void>;
}
