import { z } from "zod";
import { createRow, deleteRow, listRows, updateRow } from "../handlers/tables.js";
import type { Row } from "../domain/model.js";
import { intParam } from "../http/query.js";
import { authed } from "../routing.js";
import { isoTimestamp } from "../schemas/common.js";

/** A stored row: column values plus the reserved fields (documentation only; payloads never pass through it). */
export const tableRowSchema = z
  .object({ _id: z.string(), _createdAt: isoTimestamp, _updatedAt: isoTimestamp })
  .catchall(z.unknown());

const rowsQuery = z.object({
  limit: intParam({ min: 1, max: 1000 }).default(100),
  offset: intParam({ min: 0 }).default(0),
});

const rowsResponse = z.object({
  success: z.boolean(),
  data: z.array(tableRowSchema),
  metadata: z.object({
    tableId: z.string(),
    tableName: z.string(),
    totalRows: z.number().int(),
    returnedRows: z.number().int(),
    offset: z.number().int(),
    hasMore: z.boolean(),
    columns: z.array(z.string()),
  }),
});

export const tableRoutes = [
  authed<z.infer<typeof rowsQuery>>({
    method: "GET",
    path: "/tables/:id/rows",
    auth: "bearer",
    scope: "data:read",
    tag: "Input tables",
    summary: "Rows of an input table, in creation order",
    query: rowsQuery,
    responses: { 200: rowsResponse },
    handle: ({ params, query }, ctx) => listRows(ctx, params.id!, query),
  }),
  authed<Record<string, never>, Row>({
    method: "POST",
    path: "/tables/:id/rows",
    auth: "bearer",
    scope: "tables:write",
    tag: "Input tables",
    summary: "Add a row (Idempotency-Key makes retries safe)",
    body: { kind: "json-object" },
    responses: { 201: tableRowSchema },
    handle: ({ params, body, headers }, ctx) => createRow(ctx, params.id!, body, headers.get("idempotency-key")),
  }),
  authed<Record<string, never>, Row>({
    method: "PATCH",
    path: "/tables/:id/rows/:rowId",
    auth: "bearer",
    scope: "tables:write",
    tag: "Input tables",
    summary: "Change some columns of a row (expectedUpdatedAt: compare-and-set)",
    body: { kind: "json-object" },
    responses: { 200: tableRowSchema },
    handle: ({ params, body }, ctx) => updateRow(ctx, params.id!, params.rowId!, body),
  }),
  authed({
    method: "DELETE",
    path: "/tables/:id/rows/:rowId",
    auth: "bearer",
    scope: "tables:write",
    tag: "Input tables",
    summary: "Delete a row",
    responses: { 200: z.object({ deleted: z.literal(true) }) },
    handle: ({ params }, ctx) => deleteRow(ctx, params.id!, params.rowId!),
  }),
];
