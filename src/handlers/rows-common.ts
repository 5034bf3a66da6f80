import type { AuthedContext } from "../context/handler.js";
import { actorOf } from "../core/auth.js";
import type { Row } from "../domain/model.js";
import { parseSort, parseWhere, type RowCondition, type RowKey, type SortKey } from "../domain/row-query-model.js";
import { type CursorState, decodeCursor, encodeCursor, queryFingerprint } from "../domain/row-query-cursor.js";
import { invalidParameter } from "../base/api-error.js";
import { ifNoneMatch } from "../http/conditional.js";
import { Reply } from "../http/reply.js";
import type { HeaderReader } from "../base/headers.js";

/** The row-query parameters both rows endpoints take (see ../shared/row-queries.md). */
export interface RowQueryParams {
  where?: Record<string, unknown>;
  sort?: string;
  cursor?: string;
  format?: ExportFormat;
}

export type ExportFormat = "json" | "csv" | "ndjson";

/** A read's query, checked against the target's columns, with where its cursor left off. */
export interface CheckedRowQuery {
  where: RowCondition | null;
  sort: SortKey[] | null;
  /** Matching rows before the page the cursor asks for (0 without one). */
  before: number;
  after: RowKey | null;
  /** What this query's cursors are bound to. */
  fingerprint: string;
}

/**
 * Parse and check `where`, `sort` and `cursor` for a read of `targetId`
 * whose columns are `columns`: 400 `invalid_parameter` naming the
 * parameter (and for `where` the JSON path) on any problem, before anything
 * is read.
 */
export function checkRowQuery(
  targetId: string,
  columns: ReadonlySet<string>,
  params: RowQueryParams & { filters?: Record<string, unknown>; offset: number },
): CheckedRowQuery {
  const where = params.where === undefined ? null : parseWhere(params.where, columns);
  const sort = params.sort === undefined ? null : parseSort(params.sort, columns);
  const fingerprint = queryFingerprint(targetId, { where: params.where, filters: params.filters, sort });
  let state: CursorState = { before: 0, after: null };
  if (params.cursor !== undefined) {
    if (params.offset > 0)
      throw invalidParameter(
        "cursor",
        "cursor: cannot be combined with an offset; a cursor already says where the page starts",
      );
    state = decodeCursor(params.cursor, fingerprint, sort?.length ?? 0);
  }
  return { where, sort, before: state.before, after: state.after, fingerprint };
}

/** The cursor of the page after this one (`metadata.nextCursor`), or null when it is the last. */
export function nextCursor(
  query: CheckedRowQuery,
  page: { offset: number; returned: number; hasMore: boolean; lastKey: RowKey | null },
): string | null {
  if (!page.hasMore) return null;
  // A page that returned no row (maxRows=0) continues where it started.
  return encodeCursor(query.fingerprint, {
    before: query.before + page.offset + page.returned,
    after: page.lastKey ?? query.after,
  });
}

/** What a rows read answered: a page of `returnedRows`, or a 304 for the page the client held. */
export type RowsRead =
  | { offset: number; returnedRows: number; format?: ExportFormat }
  | { offset: number; notModified: true; format?: ExportFormat };

/**
 * A rows read of a dataset or an input table (a JSON page or a download) in
 * the audit feed: `data_access`, `dataset.rows.read` or `table.rows.read`,
 * with the rows it returns (and a download's format). The caller awaits it
 * before answering: a read answered is a read audited, even if the process
 * dies right after.
 */
export function auditRowsRead(
  ctx: AuthedContext,
  target: { type: "dataset" | "table"; id: string; teamId: string },
  read: RowsRead,
): Promise<void> {
  const { requestId } = ctx;
  const { offset, format } = read;
  // A 304 is a read too: the client holds the page; how many rows it has is not worked out again.
  const rows = "notModified" in read ? { notModified: true } : { returnedRows: read.returnedRows };
  return ctx.audit({
    teamId: target.teamId,
    category: "data_access",
    action: `${target.type}.rows.read`,
    actor: actorOf(ctx.credential),
    target: { type: target.type, id: target.id },
    outcome: "success",
    ip: ctx.clientAddress,
    userAgent: ctx.userAgent,
    details: { requestId, offset, ...rows, ...(format !== undefined && format !== "json" && { format }) },
  });
}

/** What a rows read takes from its request's headers. */
export interface ReadHeaders {
  /** `Accept`: chooses a download's format when `format` does not. */
  accept: string | null;
  /** `If-None-Match`: the tags of the pages the client holds. */
  ifNoneMatch: string | null;
}

/** The headers of a request as a rows read takes them. */
export function readHeaders(headers: HeaderReader): ReadHeaders {
  return { accept: headers.get("accept"), ifNoneMatch: headers.get("if-none-match") };
}

/**
 * Before any row is read: when the client already holds this page (its tag
 * in `If-None-Match`), the 304 that says so — a read all the same, audited
 * and counted — else null, and the page is read and tagged (`tagged`).
 */
export async function notModified(
  ctx: AuthedContext,
  target: { type: "dataset" | "table"; id: string; teamId: string },
  tag: string | null,
  read: { offset: number; format: ExportFormat; ifNoneMatch: string | null },
): Promise<Reply | null> {
  if (tag === null) return null;
  const held = ifNoneMatch(read.ifNoneMatch, tag);
  if (held === null) return null;
  await auditRowsRead(ctx, target, { offset: read.offset, notModified: true, format: read.format });
  return notModifiedReply(ctx, held);
}

/**
 * A 304 naming the tag the client holds. It carries the `Vary` the full
 * answer would (RFC 9110: a 304 keeps the validators and `Vary` of the 200);
 * a page worth compressing says `Accept-Encoding`.
 */
export function notModifiedReply(ctx: { settings: { compression: boolean } }, held: string): Reply {
  return new Reply(304, null, ctx.settings.compression ? { etag: held, vary: "Accept-Encoding" } : { etag: held });
}

/** A reply carrying its tag (when the content has one). */
export function tagged(reply: Reply, tag: string | null): Reply {
  if (tag !== null) reply.headers.etag = tag;
  return reply;
}

/** `format`, else what `Accept` asks for first among the formats offered, else JSON. */
export function exportFormat(format: ExportFormat | undefined, accept: string | null): ExportFormat {
  if (format !== undefined) return format;
  if (accept === null || accept === "*/*") return "json";
  for (const part of accept.split(",")) {
    const type = part.split(";")[0]!.trim().toLowerCase();
    if (type === "text/csv") return "csv";
    if (type === "application/x-ndjson") return "ndjson";
    if (type === "application/json") return "json";
  }
  return "json";
}

/** Characters collected before a chunk of an export is sent. */
const CHUNK = 64 * 1024;

/**
 * A streamed CSV or NDJSON download of `rows` (`columns` in order). One
 * chunk (about CHUNK characters) is held at a time, and the next rows are
 * asked for only once the client has taken it (the adapters wait for the
 * socket to drain). The rows' source is closed when the client goes.
 * `rowsJson`, when given (rows as their JSON text), spares NDJSON a
 * re-serialisation. `csv.escapeFormulas`: text cells (the header's too) a
 * spreadsheet would run are written with a leading `'`; NDJSON is never
 * touched.
 */
export function exportReply(
  format: "csv" | "ndjson",
  targetId: string,
  columns: readonly string[],
  rows: AsyncIterable<Row>,
  rowsJson: AsyncIterable<readonly string[]> | undefined,
  csv: { escapeFormulas: boolean },
): Reply {
  const text = csv.escapeFormulas ? (value: string) => csvField(defuseFormula(value)) : csvField;
  const body =
    format === "csv"
      ? chunks(`${columns.map(text).join(",")}\r\n`, rows, csvLine(columns, text))
      : rowsJson
        ? chunks("", rowsJson, jsonTextLines)
        : chunks("", rows, jsonLine);
  const filename = `${targetId.replace(/[^\w.-]/g, "_")}.${format}`;
  return new Reply(200, body, {
    "content-type": format === "csv" ? "text/csv; charset=utf-8" : "application/x-ndjson",
    "content-disposition": `attachment; filename="${filename}"`,
  });
}

/** `header`, then a line per row, sent in chunks of about CHUNK characters. */
async function* chunks<T>(header: string, rows: AsyncIterable<T>, line: (row: T) => string): AsyncGenerator<string> {
  let parts = [header];
  let size = header.length;
  for await (const row of rows) {
    const text = line(row);
    parts.push(text);
    size += text.length;
    if (size >= CHUNK) {
      yield parts.join("");
      parts = [];
      size = 0;
    }
  }
  if (size > 0) yield parts.join("");
}

function jsonLine(row: Row): string {
  return `${JSON.stringify(row)}\n`;
}

/** A batch of rows' JSON texts as NDJSON lines ("" for an empty batch). */
function jsonTextLines(batch: readonly string[]): string {
  return batch.length === 0 ? "" : `${batch.join("\n")}\n`;
}

/** RFC 4180: one line per row, CRLF; null and absent are empty fields; `text` writes a string cell. */
function csvLine(columns: readonly string[], text: (value: string) => string): (row: Row) => string {
  return (row) => `${columns.map((c) => csvValue(Object.hasOwn(row, c) ? row[c] : null, text)).join(",")}\r\n`;
}

/** Numbers, booleans, objects and arrays as their JSON text (never a formula: `-3`, `true`, `{…}`, `[…]`). */
function csvValue(value: unknown, text: (value: string) => string): string {
  if (value === null || value === undefined) return "";
  if (typeof value === "string") return value === "" ? '""' : text(value);
  return csvField(JSON.stringify(value));
}

/** What a spreadsheet reads as the start of a formula (OWASP, "CSV Injection"). */
const FORMULA_START = /^[=+\-@\t\r]/;
/** A number as written (`-3`, `+42.5`, `-1e3`): a spreadsheet reads it as that number, never as a formula. */
const PLAIN_NUMBER = /^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$/;

/** `=HYPERLINK(…)` → `'=HYPERLINK(…)`: shown as text by a spreadsheet, not run. */
function defuseFormula(text: string): string {
  return FORMULA_START.test(text) && !PLAIN_NUMBER.test(text) ? `'${text}` : text;
}

function csvField(text: string): string {
  return /[",\r\n]/.test(text) ? `"${text.replace(/"/g, '""')}"` : text;
}
