import { z } from "zod";
import { isoTimestamp } from "./common.js";

/** A stored row: column values plus the reserved fields (documentation only; payloads never pass through it). */
export const tableRowSchema = z
  .object({ _id: z.string(), _createdAt: isoTimestamp, _updatedAt: isoTimestamp })
  .catchall(z.unknown())
  .meta({ id: "TableRow", description: "An input-table row: its column values and the reserved fields" });

export const tableRowsPageSchema = z
  .object({
    success: z.boolean(),
    data: z.array(tableRowSchema),
    metadata: z.object({
      tableId: z.string(),
      tableName: z.string(),
      totalRows: z.number().int().describe("rows matching where"),
      returnedRows: z.number().int(),
      offset: z.number().int().describe("matching rows before this page"),
      hasMore: z.boolean(),
      columns: z.array(z.string()),
      nextCursor: z
        .string()
        .nullable()
        .describe("pass as cursor for the next page (keyset paging); null on the last page"),
      changesCursor: z
        .string()
        .describe(
          "where the change feed stood when this read began: follow GET …/changes from the first page's " +
            "changesCursor to keep a copy",
        ),
    }),
  })
  .meta({ id: "TableRowsPage", description: "One page of an input table's rows, in creation order or sorted" });

export const tableRowDeletedSchema = z.object({ deleted: z.literal(true) }).meta({ id: "TableRowDeleted" });

const VALUES = "Column values: only declared columns (any, when the table declares none), no `_`-prefixed names.";

/** Request bodies, for the document only: the handlers check them against the table's columns. */
export const tableRowValuesSchema = z
  .record(z.string(), z.unknown())
  .meta({ id: "TableRowValues", description: VALUES });

export const tableRowPatchSchema = z
  .object({
    expectedUpdatedAt: isoTimestamp
      .nullable()
      .optional()
      .describe("the row's `_updatedAt` as last read: a row changed since then is refused with 409 conflict"),
  })
  .catchall(z.unknown())
  .meta({ id: "TableRowPatch", description: `The columns to change. ${VALUES}` });
