import { setTimeout as sleep } from "node:timers/promises";
import { reachable } from "../core/access.js";
import { actorOf, type Credential } from "../core/auth.js";
import type { AuthedContext } from "../context/handler.js";
import { eventId, randomId } from "../domain/crypto.js";
import {
  IDEMPOTENCY_LEASE_MS,
  IDEMPOTENCY_TTL_MS,
  MAX_IDEMPOTENCY_KEY_LENGTH,
  idempotencyScope,
  requestFingerprint,
} from "../domain/idempotency.js";
import type { AuditEvent, Row, TableRecord } from "../domain/model.js";
import { emptyRow } from "../domain/rows.js";
import { changedSince, isReservedField, parseTimestamp, patchedRow, rowValues } from "../domain/table-rows.js";
import { checkColumns, checkSchemas, schemasFor, type ValidationProblem } from "../domain/validation.js";
import { ApiError, invalidParameter, notFound } from "../core/errors.js";
import { Reply } from "../http/reply.js";
import type { IdempotencyClaim, StoredResponse, TableRowsPage, TableRowsQuery } from "../ports/storage/tables.js";
import { ifMatchCondition, ifMatchHolds } from "../http/conditional.js";
import { rowsTag, rowTag } from "./entity-tags.js";
import {
  auditRowsRead,
  checkRowQuery,
  exportFormat,
  exportReply,
  nextCursor,
  notModified,
  type ReadHeaders,
  type RowQueryParams,
  tagged,
} from "./row-query.js";

/** A table the credential may reach, or the same 404 as an unknown id. */
async function reachableTable(ctx: AuthedContext, id: string): Promise<TableRecord> {
  return reachable(ctx.credential, ["tables"], await ctx.storage.tables.getTable(id), "table", ctx.storage);
}

export interface TableRowsParams extends RowQueryParams {
  /** Rows per page; JSON pages default to 100, a download without it has every row. */
  limit?: number;
  offset: number;
}

/** JSON pages hold this many rows unless `limit` says otherwise. */
const DEFAULT_PAGE = 100;
/** Rows fetched per store call while a download streams. */
const EXPORT_BATCH = 1000;

/** GET /tables/{id}/rows: a page, or a CSV/NDJSON download; `where`, `sort` and `cursor` as on datasets. */
export async function listRows(
  ctx: AuthedContext,
  tableId: string,
  params: TableRowsParams,
  read: ReadHeaders = { accept: null, ifNoneMatch: null },
): Promise<Reply> {
  const table = await reachableTable(ctx, tableId);
  // Columns are the declared ones and the stamps; a table that declares none takes any name.
  const known: ReadonlySet<string> =
    table.columns.length > 0 ? new Set([...table.columns.map((c) => c.name), ...RESERVED_COLUMNS]) : { has: () => true } as unknown as ReadonlySet<string>;
  const checked = checkRowQuery(table.id, known, params);
  const format = exportFormat(params.format, read.accept);
  const target = { type: "table" as const, id: table.id, teamId: table.teamId };
  const { limit: asked, offset: from, where, sort, cursor } = params;
  const request = { read: "table-rows", limit: asked ?? null, offset: from, where: where ?? null, sort: sort ?? null, cursor: cursor ?? null, format };
  const tag = rowsTag(table, request, ctx.clock.now());
  const unchanged = await notModified(ctx, target, tag, { offset: checked.before + params.offset, format, ifNoneMatch: read.ifNoneMatch });
  if (unchanged !== null) return unchanged;
  const query = {
    ...(checked.where && { where: checked.where }),
    ...(checked.sort && { sort: checked.sort }),
  };
  const offset = checked.before + params.offset;
  if (format !== "json") {
    // The first batch is read before the reply, so the audit event can say how many rows the download holds.
    const limit = params.limit ?? Number.POSITIVE_INFINITY;
    const first = await ctx.storage.tables.listTableRows(table.id, {
      offset: params.offset,
      limit: Math.min(EXPORT_BATCH, limit),
      ...query,
      ...(checked.after && { after: checked.after }),
    });
    await auditRowsRead(ctx, target, { offset, returnedRows: Math.min(Math.max(0, first.totalRows - offset), limit), format });
    const columns = table.columns.length > 0 ? [...RESERVED_COLUMNS.slice(0, 1), ...table.columns.map((c) => c.name), ...RESERVED_COLUMNS.slice(1)] : null;
    const header = columns ?? (await firstFields(ctx, table.id, query));
    return tagged(exportReply(format, table.id, header, exportedRows(ctx, table.id, query, first, limit)), tag);
  }
  const limit = params.limit ?? DEFAULT_PAGE;
  const { totalRows, rows, lastKey } = await ctx.storage.tables.listTableRows(table.id, {
    offset: params.offset,
    limit,
    ...query,
    ...(checked.after && { after: checked.after }),
  });
  await auditRowsRead(ctx, target, { offset, returnedRows: rows.length });
  const hasMore = offset + rows.length < totalRows;
  const page = {
    success: true,
    data: rows,
    metadata: {
      tableId: table.id,
      tableName: table.name,
      totalRows,
      returnedRows: rows.length,
      offset,
      hasMore,
      columns: table.columns.length > 0 ? table.columns.map((c) => c.name) : fieldsOf(rows),
      nextCursor: nextCursor(checked, { offset: params.offset, returned: rows.length, hasMore, lastKey }),
    },
  };
  return tagged(Reply.json(200, page), tag);
}


/** `_id` first, the stamps last: how a download lays out an input table's columns. */
const RESERVED_COLUMNS = ["_id", "_createdAt", "_updatedAt"];

/**
 * A download's rows: the first batch, already read, then EXPORT_BATCH at a
 * time, each batch continuing after the last, until `limit` rows are out.
 * A batch is read only when the previous one has been taken, so the
 * download goes no faster than its reader.
 */
async function* exportedRows(
  ctx: AuthedContext,
  tableId: string,
  query: Pick<TableRowsQuery, "where" | "sort">,
  first: TableRowsPage,
  limit: number,
): AsyncGenerator<Row> {
  let page = first;
  let asked = Math.min(EXPORT_BATCH, limit);
  let remaining = limit;
  for (;;) {
    yield* page.rows;
    remaining -= page.rows.length;
    if (remaining <= 0 || page.rows.length < asked || page.lastKey === null) return;
    asked = Math.min(EXPORT_BATCH, remaining);
    page = await ctx.storage.tables.listTableRows(tableId, { offset: 0, limit: asked, ...query, after: page.lastKey, count: false });
  }
}

/** The header of a table without declared columns: the fields of its first rows, as its JSON pages show them. */
async function firstFields(ctx: AuthedContext, tableId: string, query: Pick<TableRowsQuery, "where" | "sort">): Promise<string[]> {
  const { rows } = await ctx.storage.tables.listTableRows(tableId, { offset: 0, limit: EXPORT_BATCH, ...query });
  return ["_id", ...fieldsOf(rows), "_createdAt", "_updatedAt"];
}

/** POST /tables/{id}/rows: 201 with the stored row; an Idempotency-Key makes retries safe. */
export async function createRow(ctx: AuthedContext, tableId: string, body: Row, idempotencyKey: string | null): Promise<Reply> {
  const key = checkIdempotencyKey(idempotencyKey);
  const table = await reachableTable(ctx, tableId);
  await validate(ctx, table, body, body);
  if (key === null) return rowReply(201, await insert(ctx, table, body));
  return once(ctx, { scope: idempotencyScope(credentialRef(ctx.credential), table.id), key, fingerprint: requestFingerprint(body) }, async () => ({
    status: 201,
    body: await insert(ctx, table, body),
  }));
}

/**
 * The write `run` does, applied once per Idempotency-Key: a repeat with the
 * same fingerprint gets the first response (replayed), another fingerprint
 * 422, a repeat while the first still runs 409 (after `idempotencyWaitMs`).
 */
async function once(ctx: AuthedContext, claimed: { scope: string; key: string; fingerprint: string }, run: () => Promise<StoredResponse>): Promise<Reply> {
  const { scope, key, fingerprint } = claimed;
  const claim = await claimOrWait(ctx, claimed);
  if (claim.state !== "claimed") {
    if (claim.fingerprint !== fingerprint) {
      throw new ApiError(422, "idempotency_key_reused", "this Idempotency-Key was used with a different body; use a new key", {
        details: { idempotencyKey: key },
      });
    }
    if (claim.state === "in_progress") {
      throw new ApiError(409, "idempotency_key_in_use", "a request with this Idempotency-Key is still running; retry later", {
        details: { idempotencyKey: key },
      });
    }
    return rowReply(claim.response.status, claim.response.body, { "idempotent-replayed": "true" });
  }
  let response: StoredResponse;
  try {
    response = await run();
  } catch (error) {
    await ctx.storage.tables.releaseIdempotencyKey({ scope, key }).catch((e: unknown) => ctx.log("could not release an idempotency key", e));
    throw error;
  }
  // Once the write is done the claim is never released: a retry must not write twice.
  await ctx.storage.tables.completeIdempotencyKey({ scope, key, response });
  return rowReply(response.status, response.body);
}

/** A row written (201, 200) as JSON, with the row's `ETag` (its `_updatedAt`), which `If-Match` can carry back. */
function rowReply(status: number, row: unknown, headers: Record<string, string> = {}): Reply {
  const tag = status < 300 && row !== null && typeof row === "object" ? rowTag(row as Row) : null;
  return Reply.json(status, row, tag === null ? headers : { ...headers, etag: tag });
}

/**
 * PATCH /tables/{id}/rows/{rowId}: optional `expectedUpdatedAt` makes it a
 * compare-and-set. With an Idempotency-Key a retry whose first attempt
 * succeeded gets that answer again instead of a 409 (the row changed: by it).
 */
export async function updateRow(
  ctx: AuthedContext,
  tableId: string,
  rowId: string,
  body: Row,
  idempotencyKey: string | null = null,
  ifMatch: string | null = null,
): Promise<Reply> {
  const key = checkIdempotencyKey(idempotencyKey);
  const condition = ifMatchCondition(ifMatch);
  if (key === null) return rowReply(200, await patchRow(ctx, tableId, rowId, body, condition));
  const table = await reachableTable(ctx, tableId);
  // One key names one request: the method and row are part of what "the same request" means.
  const fingerprint = requestFingerprint(ifMatch === null ? { method: "PATCH", rowId, body } : { method: "PATCH", rowId, body, ifMatch });
  return once(ctx, { scope: idempotencyScope(credentialRef(ctx.credential), table.id), key, fingerprint }, async () => ({
    status: 200,
    body: await patchRow(ctx, table.id, rowId, body, condition),
  }));
}

/** An `If-Match` header, parsed. */
type IfMatch = ReturnType<typeof ifMatchCondition>;

async function patchRow(ctx: AuthedContext, tableId: string, rowId: string, body: Row, condition: IfMatch = null): Promise<Row> {
  const table = await reachableTable(ctx, tableId);
  const { expectedUpdatedAt, patch } = splitPatch(body);
  const schemas = schemasFor(ctx.settings.tableSchemas, table.id);
  const structural = checkColumns(table, patch);
  if (structural) throw validationFailed(structural);

  // A row validator judges the merged row, and If-Match names the row's
  // current version, so with either the row is read first and the write made
  // conditional on that read; without expectedUpdatedAt (or a tag) a lost
  // race is retried (last write wins), with it the race is the client's 409 (412).
  const versioned = condition !== null && !condition.any;
  for (let attempt = 0; ; attempt++) {
    let guard = expectedUpdatedAt;
    if (schemas || condition) {
      const current = await readRow(ctx, table.id, rowId);
      if (condition && !ifMatchHolds(condition, rowTag(current))) throw preconditionFailed(current);
      if (expectedUpdatedAt !== null && changedSince(current, expectedUpdatedAt)) throw conflict(current);
      if (schemas) {
        const problem = await checkSchemas(schemas, patch, rowValues(patchedRow(current, patch, String(current._updatedAt))));
        if (problem) throw validationFailed(problem);
      }
      guard = String(current._updatedAt);
    }
    const result = await ctx.storage.tables.updateTableRow({
      tableId: table.id,
      rowId,
      patch,
      expectedUpdatedAt: guard,
      actor: actorOf(ctx.credential),
      now: ctx.clock.now(),
      auditEvent: rowEvent(ctx, table, rowId, "table.row.updated"),
    });
    if (result.status === "ok") return result.row;
    if (result.status === "not_found") throw notFound("row");
    // Changed since the tag was compared: the version the client named is no longer the row's.
    if (versioned) throw preconditionFailed(result.current);
    if (expectedUpdatedAt !== null || attempt >= 9) throw conflict(result.current);
  }
}

/**
 * DELETE /tables/{id}/rows/{rowId}. With `If-Match` the row is read and its
 * tag compared first (412 with the current row when it is not named); the
 * store's delete takes no version, so a write landing between that read and
 * the delete is not caught.
 */
export async function deleteRow(ctx: AuthedContext, tableId: string, rowId: string, ifMatch: string | null = null) {
  const table = await reachableTable(ctx, tableId);
  const condition = ifMatchCondition(ifMatch);
  if (condition !== null) {
    const current = await readRow(ctx, table.id, rowId);
    if (!ifMatchHolds(condition, rowTag(current))) throw preconditionFailed(current);
  }
  const result = await ctx.storage.tables.deleteTableRow({
    tableId: table.id,
    rowId,
    actor: actorOf(ctx.credential),
    now: ctx.clock.now(),
    auditEvent: rowEvent(ctx, table, rowId, "table.row.deleted"),
  });
  if (result.status !== "ok") throw notFound("row");
  return { deleted: true as const };
}

async function validate(ctx: AuthedContext, table: TableRecord, written: Row, row: Row): Promise<void> {
  const problem = checkColumns(table, written) ?? (await checkSchemas(schemasFor(ctx.settings.tableSchemas, table.id), written, row));
  if (problem) throw validationFailed(problem);
}

async function insert(ctx: AuthedContext, table: TableRecord, values: Row): Promise<Row> {
  const rowId = randomId("row_");
  return ctx.storage.tables.insertTableRow({
    tableId: table.id,
    rowId,
    values,
    actor: actorOf(ctx.credential),
    now: ctx.clock.now(),
    auditEvent: rowEvent(ctx, table, rowId, "table.row.created"),
  });
}

async function readRow(ctx: AuthedContext, tableId: string, rowId: string): Promise<Row> {
  const row = await ctx.storage.tables.getTableRow(tableId, rowId);
  if (!row) throw notFound("row");
  return row;
}

/**
 * Claim the key; while another request holds it, wait for it to finish (up
 * to `idempotencyWaitMs`, polling with backoff) so a burst of retries gets
 * the first response rather than a 409. A released claim is taken over.
 */
async function claimOrWait(ctx: AuthedContext, input: { scope: string; key: string; fingerprint: string }): Promise<IdempotencyClaim> {
  let waited = 0;
  let delay = 2;
  for (;;) {
    const claim = await ctx.storage.tables.claimIdempotencyKey({ ...input, now: ctx.clock.now(), ttlMs: IDEMPOTENCY_TTL_MS, leaseMs: IDEMPOTENCY_LEASE_MS });
    if (claim.state !== "in_progress" || claim.fingerprint !== input.fingerprint) return claim;
    if (waited >= ctx.settings.idempotencyWaitMs) return claim;
    const step = Math.min(delay, ctx.settings.idempotencyWaitMs - waited);
    await sleep(step);
    waited += step;
    delay = Math.min(delay * 2, 100);
  }
}

function checkIdempotencyKey(value: string | null): string | null {
  if (value === null) return null;
  if (value.length === 0 || value.length > MAX_IDEMPOTENCY_KEY_LENGTH) {
    throw invalidParameter("Idempotency-Key", `Idempotency-Key must be 1 to ${MAX_IDEMPOTENCY_KEY_LENGTH} characters`);
  }
  return value;
}

/** A PATCH body: the columns to change, and the optional `expectedUpdatedAt` control field. */
function splitPatch(body: Row): { expectedUpdatedAt: string | null; patch: Row } {
  const patch: Row = emptyRow();
  for (const key of Object.keys(body)) if (key !== "expectedUpdatedAt") patch[key] = body[key];
  if (!Object.hasOwn(body, "expectedUpdatedAt") || body.expectedUpdatedAt === null) return { expectedUpdatedAt: null, patch };
  const expected = body.expectedUpdatedAt;
  if (typeof expected !== "string" || parseTimestamp(expected) === null) {
    throw new ApiError(422, "validation_failed", "expectedUpdatedAt must be an ISO 8601 timestamp (a row's _updatedAt)", {
      details: { field: "expectedUpdatedAt" },
    });
  }
  return { expectedUpdatedAt: expected, patch };
}

function preconditionFailed(current: Row): ApiError {
  return new ApiError(412, "precondition_failed", "the row is no longer the version If-Match names; re-read it and retry", {
    details: { current },
    headers: withTag({}, current),
  });
}

function withTag(headers: Record<string, string>, row: Row): Record<string, string> {
  const tag = rowTag(row);
  if (tag !== null) headers.etag = tag;
  return headers;
}

function conflict(current: Row): ApiError {
  return new ApiError(409, "conflict", "the row changed since expectedUpdatedAt; re-read it and retry", { details: { current } });
}

function validationFailed(problem: ValidationProblem): ApiError {
  return new ApiError(422, "validation_failed", problem.message, { details: problem.details });
}

function credentialRef(credential: Credential): { kind: string; id: string } {
  return credential.kind === "api-key" ? { kind: "api-key", id: credential.key.id } : { kind: "user", id: credential.user.id };
}

function rowEvent(ctx: AuthedContext, table: TableRecord, rowId: string, action: string): AuditEvent {
  return {
    id: eventId(),
    teamId: table.teamId,
    time: new Date(ctx.clock.now()).toISOString(),
    category: "audit",
    action,
    actor: actorOf(ctx.credential),
    target: { type: "table_row", id: rowId },
    outcome: "success",
    ip: ctx.clientAddress,
    userAgent: ctx.userAgent,
    details: { tableId: table.id, tableName: table.name, rowId, requestId: ctx.requestId },
  };
}

/** Field names of rows without declared columns, first seen first, reserved fields left out. */
function fieldsOf(rows: readonly Row[]): string[] {
  const seen = new Set<string>();
  for (const row of rows) for (const key of Object.keys(row)) if (!isReservedField(key)) seen.add(key);
  return [...seen];
}
