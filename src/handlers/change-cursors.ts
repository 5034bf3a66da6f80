import { LRUCache } from "lru-cache";
import type { AuthedContext } from "../context/handler.js";
import { encodeChangeCursor } from "../domain/changes.js";

/** The header of a download that names where the change feed stood when the rows were read. */
export const CHANGES_CURSOR_HEADER = "dataport-changes-cursor";

/**
 * The `changesCursor` a rows read of the table hands over with (../shared/changes.md,
 * "Hand-off from a read"): read it BEFORE the rows, so every change up to it is in them.
 */
export async function tableChangesCursor(ctx: AuthedContext, tableId: string): Promise<string> {
  return sealed(tableId, await ctx.storage.tables.tableChangesHead(tableId));
}

/**
 * The same for an upload, connection or webhook dataset, from the head its page carries (`RowQuery.changesHead`:
 * read in the page's snapshot or before it).
 */
export function datasetChangesCursor(datasetId: string, head: string | undefined): string {
  // A store's contract (RowStore.readDatasetRows); a host's own Storage built without mountStorage may miss it.
  if (head === undefined) throw new Error("the rows area's page has no changesHead: wrap the area in headBeforePage");
  return sealed(datasetId, head);
}

/**
 * The last cursor sealed per feed: a feed's head moves only with its writes, so reads between two writes hand over
 * the same cursor, sealed (a SHA-256) once. Feed ids are those the caller was allowed to read.
 */
const lastSealed = new LRUCache<string, { position: string; cursor: string }>({ max: 1000 });

function sealed(feedId: string, position: string): string {
  const known = lastSealed.get(feedId);
  if (known !== undefined && known.position === position) return known.cursor;
  const cursor = encodeChangeCursor({ feedId, position });
  lastSealed.set(feedId, { position, cursor });
  return cursor;
}
