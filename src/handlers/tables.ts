import { setTimeout as sleep } from "node:timers/promises";
import { reachable } from "../core/access.js";
import { actorOf, type Credential } from "../core/auth.js";
import type { AuthedContext } from "../context/handler.js";
import { eventId, randomId } from "../domain/crypto.js";
import {
  IDEMPOTENCY_TTL_MS,
  MAX_IDEMPOTENCY_KEY_LENGTH,
  idempotencyScope,
  requestFingerprint,
} from "../domain/idempotency.js";
import type { AuditEvent, Row, TableRecord } from "../domain/model.js";
import { emptyRow } from "../domain/rows.js";
import { changedSince, isReservedField, parseTimestamp, patchedRow, rowValues } from "../domain/table-rows.js";
import { checkColumns, checkSchemas, schemasFor, type ValidationProblem } from "../domain/validation.js";
import { ApiError, invalidParameter, notFound } from "../base/api-error.js";
import { Reply } from "../http/reply.js";
import type {
  IdempotencyKeyUse,
  IdempotentOutcome,
  InsertRowInput,
  RowWriteResult,
  TableRowsPage,
  TableRowsQuery,
  UpdateRowInput,
} from "../ports/storage/tables.js";
import { ifMatchCondition, ifMatchHolds } from "../http/conditional.js";
import { CHANGES_CURSOR_HEADER, tableChangesCursor } from "./change-cursors.js";
import { rowsTag, rowTag, stampOfRowTag } from "./entity-tags.js";
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
} from "./rows-common.js";

/** A table the credential may reach, or the same 404 as an unknown id. */
export async function reachableTable(ctx: AuthedContext, id: string): Promise<TableRecord> {
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
    table.columns.length > 0
      ? new Set([...table.columns.map((c) => c.name), ...RESERVED_COLUMNS])
      : ({ has: () => true } as unknown as ReadonlySet<string>);
  const checked = checkRowQuery(table.id, known, params);
  const format = exportFormat(params.format, read.accept);
  const target = { type: "table" as const, id: table.id, teamId: table.teamId };
  const { limit: asked, offset: from, where, sort, cursor } = params;
  const request = {
    read: "table-rows",
    limit: asked ?? null,
    offset: from,
    where: where ?? null,
    sort: sort ?? null,
    cursor,
    format,
  };
  const tag = rowsTag(table, request, ctx.clock.now());
  const held = { offset: checked.before + params.offset, format, ifNoneMatch: read.ifNoneMatch };
  const unchanged = await notModified(ctx, target, tag, held);
  if (unchanged !== null) return unchanged;
  const query = {
    ...(checked.where && { where: checked.where }),
    ...(checked.sort && { sort: checked.sort }),
  };
  const offset = checked.before + params.offset;
  // Where the table's change feed stands, read BEFORE the rows: every change up to it is in what follows.
  const changesCursor = await tableChangesCursor(ctx, table.id);
  if (format !== "json") {
    // The first batch is read before the reply, so the audit event can say how many rows the download holds.
    const limit = params.limit ?? Number.POSITIVE_INFINITY;
    const first = await ctx.storage.tables.listTableRows(table.id, {
      offset: params.offset,
      limit: Math.min(EXPORT_BATCH, limit),
      ...query,
      ...(checked.after && { after: checked.after }),
    });
    await auditRowsRead(ctx, target, {
      offset,
      returnedRows: Math.min(Math.max(0, first.totalRows - offset), limit),
      format,
    });
    const columns =
      table.columns.length > 0
        ? [...RESERVED_COLUMNS.slice(0, 1), ...table.columns.map((c) => c.name), ...RESERVED_COLUMNS.slice(1)]
        : null;
    const names = columns ?? (await firstFields(ctx, table.id, query));
    const csv = { escapeFormulas: ctx.settings.csvEscapeFormulas };
    const rows = exportedRows(ctx, table.id, query, first, limit);
    const reply = exportReply(format, table.id, names, rows, undefined, csv);
    reply.headers[CHANGES_CURSOR_HEADER] = changesCursor;
    return tagged(reply, tag);
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
      changesCursor,
    },
  };
  return tagged(Reply.json(200, page), tag);
}

/** `_id` first, the stamps last: how a download lays out an input table's columns. */
export const RESERVED_COLUMNS = ["_id", "_createdAt", "_updatedAt"];

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
    page = await ctx.storage.tables.listTableRows(tableId, {
      offset: 0,
      limit: asked,
      ...query,
      after: page.lastKey,
      count: false,
    });
  }
}

/** The header of a table without declared columns: the fields of its first rows, as its JSON pages show them. */
async function firstFields(
  ctx: AuthedContext,
  tableId: string,
  query: Pick<TableRowsQuery, "where" | "sort">,
): Promise<string[]> {
  const { rows } = await ctx.storage.tables.listTableRows(tableId, { offset: 0, limit: EXPORT_BATCH, ...query });
  return ["_id", ...fieldsOf(rows), "_createdAt", "_updatedAt"];
}

/** POST /tables/{id}/rows: 201 with the stored row; an Idempotency-Key makes retries safe. */
export async function createRow(
  ctx: AuthedContext,
  tableId: string,
  body: Row,
  idempotencyKey: string | null,
): Promise<Reply> {
  const key = checkIdempotencyKey(idempotencyKey);
  const table = await reachableTable(ctx, tableId);
  await validate(ctx, table, body, body);
  ctx.operations.changeRetention?.due();
  const { tables } = ctx.storage;
  if (key === null) return rowReply(201, await tables.insertTableRow(insertion(ctx, table, body)));
  const scope = idempotencyScope(credentialRef(ctx.credential), table.id);
  const use = { scope, key, fingerprint: requestFingerprint(body), status: 201 };
  const outcome = await once(ctx, use, (idempotency) =>
    tables.insertTableRowOnce({ ...insertion(ctx, table, body), idempotency }),
  );
  return outcome instanceof Reply ? outcome : rowReply(201, outcome);
}

/** A row written (201, 200) as JSON, with the row's `ETag` (its `_updatedAt`), which `If-Match` can carry back. */
function rowReply(status: number, row: unknown, headers: Record<string, string> = {}): Reply {
  const tag = status < 300 && row !== null && typeof row === "object" ? rowTag(row as Row) : null;
  return Reply.json(status, row, tag === null ? headers : { ...headers, etag: tag });
}

/**
 * A write made once per Idempotency-Key: the store writes the row, the key
 * and its answer in one transaction (or finds the key's answer instead).
 * A repeat with the same fingerprint gets the first answer (replayed),
 * another fingerprint 422. While another request with the key is still
 * writing, the write is tried again for up to `idempotencyWaitMs` (each
 * try waits on the key in the store as well), then 409 with Retry-After:
 * that request's transaction commits or ends within the store's bounds.
 * Returns the written result, or the reply that replaces it.
 */
async function once<R>(
  ctx: AuthedContext,
  use: Omit<IdempotencyKeyUse, "ttlMs">,
  write: (idempotency: IdempotencyKeyUse) => Promise<IdempotentOutcome<R>>,
): Promise<R | Reply> {
  const started = performance.now();
  for (let delay = 2; ; delay = Math.min(delay * 2, 100)) {
    const outcome = await write({ ...use, ttlMs: IDEMPOTENCY_TTL_MS });
    if (outcome.state === "written") return outcome.result;
    if (outcome.fingerprint !== null && outcome.fingerprint !== use.fingerprint) {
      throw new ApiError(
        422,
        "idempotency_key_reused",
        "this Idempotency-Key was used with a different body; use a new key",
        {
          details: { idempotencyKey: use.key },
        },
      );
    }
    if (outcome.state === "completed") {
      return rowReply(outcome.response.status, outcome.response.body, { "idempotent-replayed": "true" });
    }
    // Measured on the wall clock: a wait in the store counts too (the API's clock may stand still in tests).
    const left = ctx.settings.idempotencyWaitMs - (performance.now() - started);
    if (left <= 0) {
      throw new ApiError(
        409,
        "idempotency_key_in_use",
        "a request with this Idempotency-Key is still running; retry later",
        {
          details: { idempotencyKey: use.key },
          headers: { "retry-after": "1" },
        },
      );
    }
    await sleep(Math.min(delay, left));
  }
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
  if (key === null) {
    const plain: RowUpdate = { keyed: false, write: (input) => ctx.storage.tables.updateTableRow(input) };
    return rowReply(200, await patchRow(ctx, tableId, rowId, body, plain, condition));
  }
  const table = await reachableTable(ctx, tableId);
  // One key names one request: the method, row and condition are part of what "the same request" means.
  const request = ifMatch === null ? { method: "PATCH", rowId, body } : { method: "PATCH", rowId, body, ifMatch };
  const fingerprint = requestFingerprint(request);
  const use = { scope: idempotencyScope(credentialRef(ctx.credential), table.id), key, fingerprint, status: 200 };
  const keyed: RowUpdate = {
    keyed: true,
    write: (input) => once(ctx, use, (idempotency) => ctx.storage.tables.updateTableRowOnce({ ...input, idempotency })),
  };
  const updated = await patchRow(ctx, table.id, rowId, body, keyed, condition);
  return updated instanceof Reply ? updated : rowReply(200, updated);
}

/** An `If-Match` header, parsed. */
type IfMatch = ReturnType<typeof ifMatchCondition>;

/** How a PATCH writes: plainly, or under an Idempotency-Key (whose replay may replace the result). */
interface RowUpdate {
  keyed: boolean;
  write(input: UpdateRowInput): Promise<RowWriteResult | Reply>;
}

async function patchRow(
  ctx: AuthedContext,
  tableId: string,
  rowId: string,
  body: Row,
  update: RowUpdate,
  condition: IfMatch = null,
): Promise<Row | Reply> {
  const table = await reachableTable(ctx, tableId);
  const { expectedUpdatedAt, patch } = splitPatch(body);
  const schemas = schemasFor(ctx.settings.tableSchemas, table.id);
  const structural = checkColumns(table, patch);
  if (structural) throw validationFailed(structural);

  // A row validator judges the merged row, and If-Match names the row's
  // version, so with either the row is read first and the write made
  // conditional on that read; without expectedUpdatedAt (or a tag) a lost
  // race is retried (last write wins), with it the race is the client's 409 (412).
  const versioned = condition !== null && !condition.any;
  for (let attempt = 0; ; attempt++) {
    let guard = expectedUpdatedAt;
    if (schemas || condition) {
      const current = await readRow(ctx, table.id, rowId);
      const tagHolds = condition === null || ifMatchHolds(condition, rowTag(current));
      if (!tagHolds || (expectedUpdatedAt !== null && changedSince(current, expectedUpdatedAt))) {
        // Under an Idempotency-Key the store decides: the change may be this key's own first write (replayed);
        // otherwise its compare-and-set refuses the write (nothing unvalidated is written).
        if (!update.keyed) throw tagHolds ? conflict(current) : preconditionFailed(current);
        if (!tagHolds) guard = earlierTagStamp(condition, current);
      } else {
        if (schemas) {
          const merged = patchedRow(current, patch, String(current._updatedAt));
          const problem = await checkSchemas(schemas, patch, rowValues(merged));
          if (problem) throw validationFailed(problem);
        }
        guard = String(current._updatedAt);
      }
    }
    const result = await update.write({
      tableId: table.id,
      rowId,
      patch,
      expectedUpdatedAt: guard,
      actor: actorOf(ctx.credential),
      now: ctx.clock.now(),
      auditEvent: rowEvent(ctx, table, rowId, "table.row.updated"),
    });
    if (result instanceof Reply) return result;
    if (result.status === "ok") return result.row;
    if (result.status === "not_found") throw notFound("row");
    // Changed since the tag was compared: the version the client named is no longer the row's.
    if (versioned) throw preconditionFailed(result.current);
    if (expectedUpdatedAt !== null || attempt >= 9) throw conflict(result.current);
  }
}

/**
 * Under an Idempotency-Key, the stamp of a single `If-Match` tag older than
 * the row: the store's compare-and-set then tells this key's own earlier
 * write (replayed) from another's (412). Anything else fails here.
 */
function earlierTagStamp(condition: IfMatch, current: Row): string {
  const tags = condition !== null && !condition.any ? condition.tags : [];
  const stamp = tags.length === 1 ? stampOfRowTag(tags[0]!) : null;
  if (stamp === null || !changedSince(current, stamp)) throw preconditionFailed(current);
  return stamp;
}

/**
 * DELETE /tables/{id}/rows/{rowId}. With `If-Match` the row is read and its
 * tag compared first (412 with the current row when it is not named), and
 * the store's delete is made conditional on the version read: a write
 * landing between that read and the delete makes it a 412 too, deleting
 * nothing.
 */
export async function deleteRow(ctx: AuthedContext, tableId: string, rowId: string, ifMatch: string | null = null) {
  const table = await reachableTable(ctx, tableId);
  const condition = ifMatchCondition(ifMatch);
  let expectedUpdatedAt: string | null = null;
  if (condition !== null) {
    const current = await readRow(ctx, table.id, rowId);
    if (!ifMatchHolds(condition, rowTag(current))) throw preconditionFailed(current);
    if (!condition.any) expectedUpdatedAt = String(current._updatedAt);
  }
  const result = await ctx.storage.tables.deleteTableRow({
    tableId: table.id,
    rowId,
    expectedUpdatedAt,
    actor: actorOf(ctx.credential),
    now: ctx.clock.now(),
    auditEvent: rowEvent(ctx, table, rowId, "table.row.deleted"),
  });
  if (result.status === "conflict") throw preconditionFailed(result.current);
  if (result.status !== "ok") throw notFound("row");
  return { deleted: true as const };
}

async function validate(ctx: AuthedContext, table: TableRecord, written: Row, row: Row): Promise<void> {
  const problem =
    checkColumns(table, written) ?? (await checkSchemas(schemasFor(ctx.settings.tableSchemas, table.id), written, row));
  if (problem) throw validationFailed(problem);
}

/** A new row's insert, under a fresh `_id`. */
function insertion(ctx: AuthedContext, table: TableRecord, values: Row): InsertRowInput {
  const rowId = randomId("row_");
  return {
    tableId: table.id,
    rowId,
    values,
    actor: actorOf(ctx.credential),
    now: ctx.clock.now(),
    auditEvent: rowEvent(ctx, table, rowId, "table.row.created"),
  };
}

async function readRow(ctx: AuthedContext, tableId: string, rowId: string): Promise<Row> {
  const row = await ctx.storage.tables.getTableRow(tableId, rowId);
  if (!row) throw notFound("row");
  return row;
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
  if (!Object.hasOwn(body, "expectedUpdatedAt") || body.expectedUpdatedAt === null)
    return { expectedUpdatedAt: null, patch };
  const expected = body.expectedUpdatedAt;
  if (typeof expected !== "string" || parseTimestamp(expected) === null) {
    throw new ApiError(
      422,
      "validation_failed",
      "expectedUpdatedAt must be an ISO 8601 timestamp (a row's _updatedAt)",
      {
        details: { field: "expectedUpdatedAt" },
      },
    );
  }
  return { expectedUpdatedAt: expected, patch };
}

function preconditionFailed(current: Row): ApiError {
  const tag = rowTag(current);
  const message = "the row is no longer the version If-Match names; re-read it and retry";
  return new ApiError(412, "precondition_failed", message, {
    details: { current },
    ...(tag !== null && { headers: { etag: tag } }),
  });
}

function conflict(current: Row): ApiError {
  return new ApiError(409, "conflict", "the row changed since expectedUpdatedAt; re-read it and retry", {
    details: { current },
  });
}

function validationFailed(problem: ValidationProblem): ApiError {
  return new ApiError(422, "validation_failed", problem.message, { details: problem.details });
}

function credentialRef(credential: Credential): { kind: string; id: string } {
  return credential.kind === "api-key"
    ? { kind: "api-key", id: credential.key.id }
    : { kind: "user", id: credential.user.id };
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
