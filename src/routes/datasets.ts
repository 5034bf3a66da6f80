import { z } from "zod";
import { getDataset, listDatasets, readDatasetRows } from "../handlers/datasets.js";
import { intParam, jsonObjectParam, listParam } from "../http/query.js";
import { EXPORT_TYPES, rowQueryParams } from "./row-query-params.js";
import { readHeaders } from "../handlers/rows-common.js";
import { authed } from "./route-def.js";
import { teamIdParam } from "../schemas/common.js";
import { datasetDetailSchema, datasetListSchema, datasetRowsPageSchema, datasetSchema } from "../schemas/datasets.js";

export { datasetSchema };

const rowsQuery = z.object({
  maxRows: intParam({ min: 0 }).optional(),
  offset: intParam({ min: 0 }).default(0),
  columns: listParam().optional(),
  filters: jsonObjectParam().optional(),
  ...rowQueryParams,
});

export const datasetRoutes = [
  authed({
    method: "GET",
    path: "/datasets",
    operationId: "listDatasets",
    auth: "bearer",
    scope: "data:read",
    tag: "Datasets",
    summary: "Datasets the credential may reach",
    query: z.object({ teamId: teamIdParam }),
    responses: { 200: datasetListSchema },
    handle: ({ query }, ctx) => listDatasets(ctx, query.teamId),
  }),
  authed({
    method: "GET",
    path: "/datasets/:id",
    operationId: "getDataset",
    etag: true,
    auth: "bearer",
    scope: "data:read",
    tag: "Datasets",
    summary: "One dataset, without rows",
    responses: { 200: datasetDetailSchema, 304: z.null() },
    handle: ({ params, headers }, ctx) => getDataset(ctx, params.id!, headers.get("if-none-match")),
  }),
  authed({
    method: "GET",
    path: "/datasets/:id/rows",
    operationId: "getDatasetRows",
    etag: true,
    auth: "bearer",
    scope: "data:read",
    tag: "Datasets",
    summary: "Rows of an uploaded or connection-backed dataset",
    query: rowsQuery,
    responses: { 200: datasetRowsPageSchema, 304: z.null() },
    alsoProduces: EXPORT_TYPES,
    handle: ({ params, query, headers }, ctx) => readDatasetRows(ctx, params.id!, query, readHeaders(headers)),
  }),
];
