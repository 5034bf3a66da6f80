import type { z } from "zod";
import type { Column, TableRecord } from "../domain/model.js";
import type { RowKey } from "../domain/row-query-model.js";
import { ApiError, notFound } from "../base/api-error.js";
import type { EditLogEntry, TableRowsPage } from "../ports/storage/tables.js";
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
import {
  checkDeclaredColumns,
  checkDropColumns,
  columnsChanged,
  dropRefused,
  reshapeTableRow,
  valuesLost,
} from "./reshape.js";
import { parseBody, tableBody, validationFailed } from "./schemas.js";

export type TableInput = z.input<typeof tableBody>;

/** Rows read per page while a put looks for values its new columns would drop. */
const SCAN_PAGE = 1000;

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

  /**
   * 409 naming every column whose values `columns` would drop unlisted. The
   * put's own transaction checks each row again (`reshapeTableRow`), so a
   * row written meanwhile is refused too; this read names them all at once.
   * A table with declared columns holds no others, so only its left-out
   * declared columns can lose values; an undeclared one is read through.
   */
  async function refuseLostValues(
    id: string,
    current: TableRecord,
    columns: readonly Column[],
    dropColumns: readonly string[],
  ): Promise<void> {
    const kept = new Set([...columns.map((c) => c.name), ...dropColumns]);
    if (current.columns.length > 0 && current.columns.every((c) => kept.has(c.name))) return;
    const lose = valuesLost(columns, dropColumns, true);
    const lost = new Set<string>();
    for (let after: RowKey | null = null; ;) {
      const query = { offset: 0, limit: SCAN_PAGE, count: false, after };
      const page: TableRowsPage = await storage.tables.listTableRows(id, query);
      for (const row of page.rows) for (const name of lose(row)) lost.add(name);
      if (page.rows.length < SCAN_PAGE || page.lastKey === null) break;
      after = page.lastKey;
    }
    if (lost.size > 0) throw dropRefused([...lost]);
  }

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
      checkDropColumns(body.columns, body.dropColumns);
      const dataset = await storage.catalog.getDataset(id);
      if (dataset && dataset.type !== "input_table")
        throw new ApiError(409, "conflict", `${id} is a dataset; datasets and tables share ids`);
      const current = await storage.tables.getTable(id);
      if (current && current.teamId !== body.teamId)
        throw validationFailed("$.teamId", "a table cannot move to another team");
      const actor = await actorFor(storage, options);
      // Omitted keeps the declaration; null removes it (any shape again).
      const columns = body.columns === undefined ? (current?.columns ?? []) : (body.columns ?? []);
      const table: TableRecord = {
        id,
        teamId: body.teamId,
        name: body.name,
        columns,
        rowCount: current?.rowCount ?? 0,
        updatedAt: isoNow(deps),
      };
      // Rows already stored take the new declaration (or the put is refused, 409, writing nothing).
      const reshaping = columns.length > 0 && current !== null && columnsChanged(current.columns, columns);
      const dropColumns = body.dropColumns ?? [];
      if (reshaping) await refuseLostValues(id, current, columns, dropColumns);
      const reshape = reshaping ? reshapeTableRow(columns, dropColumns) : undefined;
      const created = (await storage.tables.putTable(table, reshape)) === "created";
      const dropped = dropColumns.length > 0 ? { details: { dropColumns } } : {};
      const target = { type: "table", id };
      const action = putAction("table", created);
      await recordChange(deps, { teamIds: [body.teamId], action, actor, target, ...dropped });
      return { created, value: await existing(id) };
    },
    getTable: existing,
    listTables: (options) => listPage(options, (page) => storage.tables.listTables(page)),
    async deleteTable(id, options) {
      assertWritable(storage.tables, "deleteTable");
      const actor = await actorFor(storage, options);
      const table = await existing(id);
      if (!(await storage.tables.deleteTable(id))) throw notFound("table");
      await recordChange(deps, {
        teamIds: [table.teamId],
        action: "table.deleted",
        actor,
        target: { type: "table", id },
      });
    },
    async tableEditLog(tableId, page = {}) {
      await existing(tableId);
      return storage.tables.listEditLog(tableId, {
        offset: Math.max(0, page.offset ?? 0),
        limit: Math.max(0, page.limit ?? 1000),
      });
    },
  };
}
