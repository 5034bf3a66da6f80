import type { TableStore } from "../../ports/storage/tables.js";
import type { MemoryState } from "./state.js";

// TODO(issue 4): input-table writes, edit log and idempotency claims.
export function memoryTables(state: MemoryState): TableStore {
  const pending = (): never => {
    throw new Error("input-table writes are not implemented yet");
  };
  return {
    async getTable(id) {
      const table = state.tables.get(id);
      return table ? structuredClone(table) : null;
    },
    async listTableRows(tableId, page) {
      const rows = state.tableRows.get(tableId) ?? [];
      return { totalRows: rows.length, rows: rows.slice(page.offset, page.offset + page.limit).map((r) => structuredClone(r)) };
    },
    insertTableRow: pending,
    updateTableRow: pending,
    deleteTableRow: pending,
    listEditLog: pending,
    claimIdempotencyKey: pending,
    completeIdempotencyKey: pending,
    releaseIdempotencyKey: pending,
  };
}
