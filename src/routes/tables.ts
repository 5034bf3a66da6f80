import { z } from "zod";
import { createRow, deleteRow, listRows, updateRow } from "../handlers/tables.js";
import type { Row } from "../domain/model.js";
import { intParam } from "../http/query.js";
import { EXPORT_TYPES, rowQueryParams } from "./row-query-params.js";
import { readHeaders } from "../handlers/rows-common.js";
import { tableAggregateRoute } from "./aggregates.js";
import { authed } from "./route-def.js";
import { errorEnvelopeSchema } from "../schemas/common.js";
import {
  tableRowDeletedSchema,
  tableRowPatchSchema,
  tableRowSchema,
  tableRowsPageSchema,
  tableRowValuesSchema,
} from "../schemas/tables.js";

export { tableRowSchema };

const rowsQuery = z.object({
  limit: intParam({ min: 1, max: 1000 })
    .optional()
    .describe("rows per page; 100 when absent (a csv or ndjson download without it has every row)"),
  offset: intParam({ min: 0 }).default(0),
  ...rowQueryParams,
});

export const tableRoutes = [
  authed<z.infer<typeof rowsQuery>>({
    method: "GET",
    path: "/tables/:id/rows",
    operationId: "listTableRows",
    etag: true,
    auth: "bearer",
    scope: "data:read",
    tag: "Input tables",
    summary: "Rows of an input table, in creation order unless sorted",
    query: rowsQuery,
    responses: { 200: tableRowsPageSchema, 304: z.null() },
    alsoProduces: EXPORT_TYPES,
    handle: ({ params, query, headers }, ctx) => listRows(ctx, params.id!, query, readHeaders(headers)),
  }),
  tableAggregateRoute,
  authed<Record<string, never>, Row>({
    method: "POST",
    path: "/tables/:id/rows",
    operationId: "createTableRow",
    etag: true,
    auth: "bearer",
    scope: "tables:write",
    tag: "Input tables",
    summary: "Add a row (Idempotency-Key makes retries safe)",
    body: { kind: "json-object" },
    bodySchema: tableRowValuesSchema,
    responses: { 201: tableRowSchema },
    handle: ({ params, body, headers }, ctx) => createRow(ctx, params.id!, body, headers.get("idempotency-key")),
  }),
  authed<Record<string, never>, Row>({
    method: "PATCH",
    path: "/tables/:id/rows/:rowId",
    operationId: "updateTableRow",
    etag: true,
    auth: "bearer",
    scope: "tables:write",
    tag: "Input tables",
    summary: "Change some columns of a row (expectedUpdatedAt: compare-and-set; Idempotency-Key makes retries safe)",
    body: { kind: "json-object" },
    bodySchema: tableRowPatchSchema,
    responses: { 200: tableRowSchema, 412: errorEnvelopeSchema },
    handle: ({ params, body, headers }, ctx) =>
      updateRow(ctx, params.id!, params.rowId!, body, headers.get("idempotency-key"), headers.get("if-match")),
  }),
  authed({
    method: "DELETE",
    path: "/tables/:id/rows/:rowId",
    operationId: "deleteTableRow",
    auth: "bearer",
    scope: "tables:write",
    tag: "Input tables",
    summary: "Delete a row",
    responses: { 200: tableRowDeletedSchema, 412: errorEnvelopeSchema },
    handle: ({ params, headers }, ctx) => deleteRow(ctx, params.id!, params.rowId!, headers.get("if-match")),
  }),
];
