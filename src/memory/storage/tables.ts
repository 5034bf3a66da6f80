import { evaluateAggregate } from "../../domain/aggregate-eval.js";
import type { Row } from "../../domain/model.js";
import { changedSince, newRow, nextUpdatedAt, patchedRow } from "../../domain/table-rows.js";
import type {
  EditLogEntry,
  IdempotencyKeyUse,
  IdempotentOutcome,
  InsertRowInput,
  RowWriteResult,
  StoredResponse,
  TableStore,
  TableWrites,
  UpdateRowInput,
} from "../../ports/storage/tables.js";
import { appendAuditEntry, assertNewAuditId } from "./audit.js";
import { appendChange, forgetFeed, memoryChangeFeeds } from "./changes.js";
import { pageById } from "./order.js";
import { queriedTableRows } from "./queried-rows.js";
import { cloneJson, type MemoryState, type TableRows } from "./state.js";

/** A key's answer, recorded with the write it answers. */
interface Claim {
  fingerprint: string;
  claimedAt: number;
  response: StoredResponse;
}

/** How often (by the clock) expired idempotency claims are swept. */
const SWEEP_EVERY_MS = 60 * 60 * 1000;

/**
 * Input tables on the shared state. Every write runs without an `await`
 * between its check and its change, which is what makes it atomic in one
 * process: the row, the edit-log entry and the audit event land together
 * (the audit event's id is checked before anything changes).
 */
export function memoryTables(state: MemoryState): TableStore & TableWrites {
  const claims = new Map<string, Claim>();
  let lastSweep = -Infinity;
  const changes = memoryChangeFeeds(state);

  function logEdit(entry: EditLogEntry): void {
    const log = state.editLogs.get(entry.tableId) ?? [];
    log.push(cloneJson(entry));
    state.editLogs.set(entry.tableId, log);
  }

  function touchTable(tableId: string, rowDelta: number, stamp: string): void {
    const table = state.tables.get(tableId);
    if (!table) return;
    table.rowCount += rowDelta;
    table.updatedAt = stamp;
  }

  /** The table's rows, an empty set for a table without any yet. */
  function rowsOf(tableId: string): TableRows {
    let rows = state.tableRows.get(tableId);
    if (!rows) state.tableRows.set(tableId, (rows = { entries: [], nextPosition: 0 }));
    return rows;
  }

  /** The row written (no `await` between the check and the change: atomic in this process). */
  function insertRow({ tableId, rowId, values, actor, now, auditEvent }: InsertRowInput): Row {
    assertNewAuditId(state, auditEvent.id);
    const stamp = nextUpdatedAt(null, now);
    const row = newRow(rowId, values, stamp);
    const rows = rowsOf(tableId);
    rows.entries.push({ position: rows.nextPosition++, row });
    touchTable(tableId, 1, stamp);
    const at = new Date(now).toISOString();
    logEdit({ tableId, rowId, op: "create", actor, at, before: null, after: row });
    appendChange(state, tableId, now, "insert", rowId, row);
    appendAuditEntry(state, auditEvent, now);
    return cloneJson(row);
  }

  function updateRow(input: UpdateRowInput): RowWriteResult {
    const { tableId, rowId, patch, expectedUpdatedAt, actor, now, auditEvent } = input;
    const entry = state.tableRows.get(tableId)?.entries.find((e) => e.row._id === rowId);
    if (!entry) return { status: "not_found" };
    const current = entry.row;
    if (expectedUpdatedAt !== null && changedSince(current, expectedUpdatedAt)) {
      return { status: "conflict", current: cloneJson(current) };
    }
    assertNewAuditId(state, auditEvent.id);
    const stamp = nextUpdatedAt(String(current._updatedAt), now);
    const row = patchedRow(current, patch, stamp);
    entry.row = row;
    touchTable(tableId, 0, stamp);
    const at = new Date(now).toISOString();
    logEdit({ tableId, rowId, op: "update", actor, at, before: current, after: row });
    appendChange(state, tableId, now, "update", rowId, row);
    appendAuditEntry(state, auditEvent, now);
    return { status: "ok", row: cloneJson(row) };
  }

  /**
   * `write` at most once per key: a live key's answer instead of the write;
   * else the write, and its answer (when it wrote) kept under the key, with
   * no `await` in between, so the key and the row land together.
   */
  function once<R>(
    use: IdempotencyKeyUse,
    now: number,
    write: () => { result: R; answer: Row | null },
  ): IdempotentOutcome<R> {
    sweep(now, use.ttlMs);
    const id = claimId(use.scope, use.key);
    const existing = claims.get(id);
    if (existing && now - existing.claimedAt < use.ttlMs) {
      return { state: "completed", fingerprint: existing.fingerprint, response: cloneJson(existing.response) };
    }
    const { result, answer } = write();
    if (answer !== null) {
      const response = { status: use.status, body: cloneJson(answer) };
      claims.set(id, { fingerprint: use.fingerprint, claimedAt: now, response });
    }
    return { state: "written", result };
  }

  function sweep(now: number, ttlMs: number): void {
    if (now - lastSweep < SWEEP_EVERY_MS) return;
    lastSweep = now;
    for (const [id, claim] of claims) if (now - claim.claimedAt >= ttlMs) claims.delete(id);
  }

  return {
    async getTable(id) {
      const table = state.tables.get(id);
      return table ? cloneJson(table) : null;
    },

    async listTables(page) {
      return pageById(state.tables.values(), page).map(cloneJson);
    },

    async aggregateTableRows(tableId, query) {
      return evaluateAggregate(
        (state.tableRows.get(tableId)?.entries ?? []).map((entry) => entry.row),
        query,
      );
    },
    async listTableRows(tableId, query) {
      return queriedTableRows(state.tableRows.get(tableId)?.entries ?? [], query);
    },

    async getTableRow(tableId, rowId) {
      const entry = state.tableRows.get(tableId)?.entries.find((e) => e.row._id === rowId);
      return entry ? cloneJson(entry.row) : null;
    },

    async insertTableRow(input) {
      return insertRow(input);
    },

    async updateTableRow(input) {
      return updateRow(input);
    },

    async insertTableRowOnce(input) {
      return once(input.idempotency, input.now, () => {
        const row = insertRow(input);
        return { result: row, answer: row };
      });
    },

    async updateTableRowOnce(input) {
      return once(input.idempotency, input.now, () => {
        const result = updateRow(input);
        return { result, answer: result.status === "ok" ? result.row : null };
      });
    },

    async deleteTableRow({ tableId, rowId, expectedUpdatedAt, actor, now, auditEvent }) {
      const entries = state.tableRows.get(tableId)?.entries ?? [];
      const index = entries.findIndex((e) => e.row._id === rowId);
      const current: Row | undefined = entries[index]?.row;
      if (!current) return { status: "not_found" };
      if (expectedUpdatedAt != null && changedSince(current, expectedUpdatedAt))
        return { status: "conflict", current: cloneJson(current) };
      assertNewAuditId(state, auditEvent.id);
      entries.splice(index, 1);
      const at = new Date(now).toISOString();
      touchTable(tableId, -1, at);
      logEdit({ tableId, rowId, op: "delete", actor, at, before: current, after: null });
      appendChange(state, tableId, now, "delete", rowId);
      appendAuditEntry(state, auditEvent, now);
      return { status: "ok", row: cloneJson(current) };
    },

    async listEditLog(tableId, page) {
      const log = state.editLogs.get(tableId) ?? [];
      const slice = page ? log.slice(page.offset, page.offset + page.limit) : log;
      return slice.map(cloneJson);
    },

    async readTableChanges(tableId, query) {
      return changes.read(tableId, query);
    },

    async tableChangesHead(tableId) {
      return changes.head(tableId);
    },

    async trimTableChanges(storedBefore) {
      return changes.trimChanges(storedBefore);
    },

    watchTableChanges: changes.watch,

    async putTable(table, reshape) {
      const stored = state.tableRows.get(table.id);
      // Every row reshaped before any is replaced (each keeping its position): a refusal leaves the table as it was.
      if (stored && reshape) {
        stored.entries = stored.entries.map(({ position, row }) => ({ position, row: reshape(cloneJson(row)) }));
        // The table's `updatedAt` is when the declaration was stored.
        if (stored.entries.length > 0) appendChange(state, table.id, Date.parse(table.updatedAt) || 0, "reset");
      }
      const result = state.tables.has(table.id) ? "updated" : "created";
      state.tables.set(table.id, { ...cloneJson(table), rowCount: stored?.entries.length ?? 0 });
      if (!stored) state.tableRows.set(table.id, { entries: [], nextPosition: 0 });
      return result;
    },

    async deleteTable(id) {
      if (!state.tables.has(id)) return false;
      state.tables.delete(id);
      state.tableRows.delete(id);
      state.editLogs.delete(id);
      forgetFeed(state, id);
      return true;
    },
  };
}

function claimId(scope: string, key: string): string {
  return JSON.stringify([scope, key]);
}
