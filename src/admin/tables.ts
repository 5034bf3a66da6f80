import type { z } from "zod";
import type { TableRecord } from "../domain/model.js";
import { ApiError, notFound } from "../base/api-error.js";
import type { EditLogEntry } from "../ports/storage/tables.js";
import { assertWritable } from "../storage/mount.js";
import {
  type AdminDeps,
  actorFor,
  type ChangeOptions,
  checkId,
  isoNow,
  type ListOptions,
  type ListPage,
  listPage,
  type Put,
  putAction,
  recordChange,
  requireRef,
} from "./change.js";
import { checkDeclaredColumns, columnsChanged, reshapeTableRow } from "./reshape.js";
import { parseBody, tableBody, validationFailed } from "./schemas.js";

export type TableInput = z.input<typeof tableBody>;

/** Input tables: the tables themselves, and what the host reads about their rows. */
export interface TableAdmin {
  /** Create or replace an input table; its rows are kept and its declared columns apply to the next write. */
  putTable(id: string, input: TableInput, options?: ChangeOptions): Promise<Put<TableRecord>>;
  getTable(id: string): Promise<TableRecord>;
  listTables(options?: ListOptions): Promise<ListPage<TableRecord>>;
  /** Its rows and edit log go with it. */
  deleteTable(id: string, options?: ChangeOptions): Promise<void>;
  /**
   * A table's edit log, oldest first: who wrote which row when, with the
   * row before and after. `limit` defaults to 1000. Unknown table: 404.
   */
  tableEditLog(tableId: string, page?: { offset?: number; limit?: number }): Promise<EditLogEntry[]>;
}

export function tableAdmin(deps: AdminDeps): TableAdmin {
  const { storage } = deps.ports;

  async function existing(id: string): Promise<TableRecord> {
    const table = await storage.tables.getTable(id);
    if (!table) throw notFound("table");
    return table;
  }

  return {
    async putTable(id, input, options) {
      assertWritable(storage.tables, "putTable");
      checkId(id);
      const body = parseBody(tableBody, input);
      requireRef(await storage.identity.getTeam(body.teamId), "$.teamId", "team", body.teamId);
      if (body.columns) checkDeclaredColumns(body.columns, true);
      const dataset = await storage.catalog.getDataset(id);
      if (dataset && dataset.type !== "input_table") throw new ApiError(409, "conflict", `${id} is a dataset; datasets and tables share ids`);
      const current = await storage.tables.getTable(id);
      if (current && current.teamId !== body.teamId) throw validationFailed("$.teamId", "a table cannot move to another team");
      const actor = await actorFor(storage, options);
      // Omitted keeps the declaration; null removes it (any shape again).
      const columns = body.columns === undefined ? (current?.columns ?? []) : (body.columns ?? []);
      const table: TableRecord = { id, teamId: body.teamId, name: body.name, columns, rowCount: current?.rowCount ?? 0, updatedAt: isoNow(deps) };
      // Rows already stored take the new declaration (or the put is refused, 409, writing nothing).
      const reshape = columns.length > 0 && current !== null && columnsChanged(current.columns, columns) ? reshapeTableRow(columns) : undefined;
      const created = (await storage.tables.putTable(table, reshape)) === "created";
      await recordChange(deps, { teamIds: [body.teamId], action: putAction("table", created), actor, target: { type: "table", id } });
      return { created, value: await existing(id) };
    },
    getTable: existing,
    listTables: (options) => listPage(options, (page) => storage.tables.listTables(page)),
    async deleteTable(id, options) {
      assertWritable(storage.tables, "deleteTable");
      const actor = await actorFor(storage, options);
      const table = await existing(id);
      if (!(await storage.tables.deleteTable(id))) throw notFound("table");
      await recordChange(deps, { teamIds: [table.teamId], action: "table.deleted", actor, target: { type: "table", id } });
    },
    async tableEditLog(tableId, page = {}) {
      await existing(tableId);
      return storage.tables.listEditLog(tableId, { offset: Math.max(0, page.offset ?? 0), limit: Math.max(0, page.limit ?? 1000) });
    },
  };
}
