import { z } from "zod";
import { aggregateDataset, aggregateTable } from "../handlers/aggregates.js";
import { readHeaders } from "../handlers/rows-common.js";
import { DEFAULT_GROUPS, MAX_GROUP_KEYS, MAX_GROUPS, MAX_METRICS } from "../domain/aggregate-query.js";
import { TIME_UNITS } from "../domain/time-buckets.js";
import { intParam, jsonObjectParam, queryParamDocs } from "../http/query.js";
import { aggregatePageSchema } from "../schemas/aggregates.js";
import { EXPORT_TYPES, rowQueryParams } from "./row-query-params.js";
import { authed } from "./route-def.js";

/**
 * The parameters of both aggregate endpoints (../shared/aggregates.md); the handler parses them against the columns.
 */
const aggregateQuery = z.object({
  groupBy: text(
    `Comma-separated group keys (0–${MAX_GROUP_KEYS}): a column, or a time bucket of one: ${TIME_UNITS.map((u) => `${u}(c)`).join(", ")}. ` +
      "Without it, one group: every matching row.",
  ),
  metrics: text(
    `Comma-separated metrics (1–${MAX_METRICS}): count, count(c), countDistinct(c), sum(c), avg(c), min(c), max(c). Default count.`,
  ),
  where: rowQueryParams.where,
  filters: jsonObjectParam().optional().describe("exact-match conditions, a URL-encoded JSON object {column: value}"),
  having: jsonObjectParam()
    .optional()
    .describe("conditions on the groups: the where grammar over the answer's fields (keys and metrics as named)"),
  sort: text(
    "Comma-separated answer fields, - before one for descending (at most 8). Default: the group keys ascending.",
  ),
  maxRows: intParam({ min: 0 })
    .optional()
    .describe(`groups per page: ${DEFAULT_GROUPS} when absent, at most ${MAX_GROUPS}`),
  offset: intParam({ min: 0 }).optional().describe("groups before the page"),
  format: rowQueryParams.format,
});

export const datasetAggregateRoute = authed({
  method: "GET",
  path: "/datasets/:id/aggregate",
  operationId: "aggregateDatasetRows",
  auth: "bearer",
  scope: "data:read",
  tag: "Datasets",
  summary: "Groups of a dataset's rows with their counts, sums, averages, minima and maxima (computed in the store)",
  query: aggregateQuery,
  responses: { 200: aggregatePageSchema },
  alsoProduces: EXPORT_TYPES,
  handle: ({ params, query, headers }, ctx) => aggregateDataset(ctx, params.id!, query, readHeaders(headers)),
});

export const tableAggregateRoute = authed({
  method: "GET",
  path: "/tables/:id/aggregate",
  operationId: "aggregateTableRows",
  auth: "bearer",
  scope: "data:read",
  tag: "Input tables",
  summary: "Groups of an input table's rows with their metrics (computed in the store); _createdAt and _updatedAt too",
  query: aggregateQuery,
  responses: { 200: aggregatePageSchema },
  alsoProduces: EXPORT_TYPES,
  handle: ({ params, query, headers }, ctx) => aggregateTable(ctx, params.id!, query, readHeaders(headers)),
});

function text(description: string) {
  const schema = z.string().optional();
  queryParamDocs.add(schema, { openapi: { type: "string", description } });
  return schema;
}
