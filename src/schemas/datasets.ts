import { z } from "zod";
import { columnSchema, isoTimestamp, rowSchema } from "./common.js";

export const datasetSchema = z
  .object({
    id: z.string(),
    name: z.string(),
    type: z.enum(["upload", "connection", "input_table"]),
    rowCount: z.number().int(),
    columns: z.array(columnSchema),
    connectionId: z.string().nullable(),
    connectionType: z.string().nullable(),
    lastRefreshedAt: isoTimestamp.nullable(),
    updatedAt: isoTimestamp,
  })
  .meta({ id: "Dataset", description: "A dataset: an upload, a connection's data or an input table" });

export const datasetDetailSchema = datasetSchema
  .extend({ writable: z.boolean().describe("rows can be changed through /tables/{id}/rows") })
  .meta({ id: "DatasetDetail", description: "One dataset, and whether its rows can be written" });

export const datasetListSchema = z.object({ datasets: z.array(datasetSchema) }).meta({ id: "DatasetList" });

export const datasetRowsPageSchema = z
  .object({
    success: z.boolean(),
    data: z.array(rowSchema),
    metadata: z.object({
      datasetId: z.string(),
      datasetName: z.string(),
      totalRows: z.number().int().describe("rows matching the filters and where"),
      returnedRows: z.number().int(),
      offset: z.number().int().describe("matching rows before this page"),
      hasMore: z.boolean().describe("more rows follow; ask again with cursor=nextCursor (or offset + returnedRows)"),
      columns: z.array(z.string()),
      columnTypes: z.record(z.string(), z.string().nullable()),
      lastUpdated: isoTimestamp,
      nextCursor: z
        .string()
        .nullable()
        .describe(
          "pass as cursor for the next page (keyset paging: deep pages cost what the first does); null on the last " +
            "page",
        ),
      changesCursor: z
        .string()
        .describe(
          "where the change feed stood when this read began: follow GET …/changes from the first page's " +
            "changesCursor to keep a copy",
        ),
    }),
  })
  .meta({ id: "DatasetRowsPage", description: "One page of a dataset's rows" });
