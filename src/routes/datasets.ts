import { z } from "zod";
import { getDataset, listDatasets, readDatasetRows } from "../handlers/datasets.js";
import { intParam, jsonObjectParam, listParam } from "../http/query.js";
import { authed } from "../routing.js";
import { columnSchema, isoTimestamp, teamIdParam } from "../schemas/common.js";

export const datasetSchema = z.object({
  id: z.string(),
  name: z.string(),
  type: z.enum(["upload", "connection", "input_table"]),
  rowCount: z.number().int(),
  columns: z.array(columnSchema),
  connectionId: z.string().nullable(),
  connectionType: z.string().nullable(),
  lastRefreshedAt: isoTimestamp.nullable(),
  updatedAt: isoTimestamp,
});

const rowsQuery = z.object({
  maxRows: intParam({ min: 0 }).optional(),
  offset: intParam({ min: 0 }).default(0),
  columns: listParam().optional(),
  filters: jsonObjectParam().optional(),
});

const rowsResponse = z.object({
  success: z.boolean(),
  data: z.array(z.record(z.string(), z.unknown())),
  metadata: z.object({
    datasetId: z.string(),
    datasetName: z.string(),
    totalRows: z.number().int(),
    returnedRows: z.number().int(),
    offset: z.number().int(),
    hasMore: z.boolean(),
    columns: z.array(z.string()),
    columnTypes: z.record(z.string(), z.string().nullable()),
    lastUpdated: isoTimestamp,
  }),
});

export const datasetRoutes = [
  authed({
    method: "GET",
    path: "/datasets",
    auth: "bearer",
    scope: "data:read",
    tag: "Datasets",
    summary: "Datasets the credential may reach",
    query: z.object({ teamId: teamIdParam }),
    responses: { 200: z.object({ datasets: z.array(datasetSchema) }) },
    handle: ({ query }, ctx) => listDatasets(ctx, query.teamId),
  }),
  authed({
    method: "GET",
    path: "/datasets/:id",
    auth: "bearer",
    scope: "data:read",
    tag: "Datasets",
    summary: "One dataset, without rows",
    responses: { 200: datasetSchema.extend({ writable: z.boolean() }) },
    handle: ({ params }, ctx) => getDataset(ctx, params.id!),
  }),
  authed({
    method: "GET",
    path: "/datasets/:id/rows",
    auth: "bearer",
    scope: "data:read",
    tag: "Datasets",
    summary: "Rows of an uploaded or connection-backed dataset",
    query: rowsQuery,
    responses: { 200: rowsResponse },
    handle: ({ params, query }, ctx) => readDatasetRows(ctx, params.id!, query),
  }),
];
