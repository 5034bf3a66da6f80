import type { AuthedContext } from "../context/handler.js";
import { encodeChangeCursor } from "../domain/changes.js";

/** The header of a download that names where the change feed stood when the rows were read. */
export const CHANGES_CURSOR_HEADER = "dataport-changes-cursor";

/**
 * The `changesCursor` a rows read of the table hands over with (../shared/changes.md,
 * "Hand-off from a read"): read it BEFORE the rows, so every change up to it is in them.
 */
export async function tableChangesCursor(ctx: AuthedContext, tableId: string): Promise<string> {
  return encodeChangeCursor({ feedId: tableId, position: await ctx.storage.tables.tableChangesHead(tableId) });
}

/** The same for an upload, connection or webhook dataset. */
export async function datasetChangesCursor(ctx: AuthedContext, datasetId: string): Promise<string> {
  return encodeChangeCursor({ feedId: datasetId, position: await ctx.storage.rows.datasetChangesHead(datasetId) });
}
