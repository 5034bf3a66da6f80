import { z } from "zod";
import { isoTimestamp, rowSchema } from "./common.js";

/** The answer of an aggregate (../shared/aggregates.md), on datasets and input tables alike. */
export const aggregatePageSchema = z
  .object({
    success: z.boolean(),
    data: z
      .array(rowSchema)
      .describe(
        "one object per group: its keys, then its metrics, each named as written in the request (spaces removed)",
      ),
    metadata: z.object({
      datasetId: z.string(),
      datasetName: z.string(),
      groupBy: z.array(z.string()).describe("the group keys' names, in request order"),
      metrics: z.array(z.string()).describe("the metrics' names, in request order"),
      matchedRows: z.number().int().describe("rows that passed where and filters"),
      totalGroups: z.number().int().describe("groups that passed having, on every page"),
      returnedGroups: z.number().int(),
      offset: z.number().int().describe("groups before this page"),
      hasMore: z.boolean().describe("more groups follow; ask again with offset + returnedGroups"),
      totals: z
        .record(z.string(), z.unknown())
        .describe("every metric over every matching row (having aside); totals.count equals matchedRows"),
      lastUpdated: isoTimestamp,
    }),
  })
  .meta({
    id: "AggregatePage",
    description: "Groups of a dataset's or an input table's rows, with their metrics and totals",
  });
