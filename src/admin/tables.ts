import type { Ports } from "../context.js";
import { notFound } from "../errors.js";
import type { EditLogEntry } from "../ports/storage/tables.js";

/** What the host reads about input tables. */
export interface TableAdmin {
  /**
   * A table's edit log, oldest first: who wrote which row when, with the
   * row before and after. `limit` defaults to 1000. Unknown table: 404.
   */
  tableEditLog(tableId: string, page?: { offset?: number; limit?: number }): Promise<EditLogEntry[]>;
}

export function tableAdmin(ports: Ports): TableAdmin {
  const { storage } = ports;
  return {
    async tableEditLog(tableId, page = {}) {
      if (!(await storage.getTable(tableId))) throw notFound("table");
      return storage.listEditLog(tableId, { offset: Math.max(0, page.offset ?? 0), limit: Math.max(0, page.limit ?? 1000) });
    },
  };
}
