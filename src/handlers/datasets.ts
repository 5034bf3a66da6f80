import { reachable, resolveTeam } from "../core/access.js";
import type { AuthedContext } from "../context/handler.js";
import type { ConnectionRecord, DatasetRecord } from "../domain/model.js";
import { invalidParameter } from "../base/api-error.js";
import { joinedTexts, jsonRowsBody } from "../http/json-stream.js";
import { Reply } from "../http/reply.js";
import { ifNoneMatch } from "../http/conditional.js";
import { CHANGES_CURSOR_HEADER, datasetChangesCursor } from "./change-cursors.js";
import { rowsTag, textTag } from "./entity-tags.js";
import {
  auditRowsRead,
  checkRowQuery,
  exportFormat,
  exportReply,
  nextCursor,
  notModified,
  notModifiedReply,
  type ReadHeaders,
  type RowQueryParams,
  tagged,
} from "./rows-common.js";

/** A dataset as the API shows it. */
export function datasetView(dataset: DatasetRecord, connection: ConnectionRecord | null) {
  return {
    id: dataset.id,
    name: dataset.name,
    type: dataset.type,
    rowCount: dataset.rowCount,
    columns: dataset.columns,
    connectionId: dataset.connectionId,
    connectionType: connection?.type ?? null,
    lastRefreshedAt: dataset.lastRefreshedAt,
    updatedAt: dataset.updatedAt,
  };
}

/** GET /datasets: a key sees exactly what its allowlist names; a session sees its team. */
export async function listDatasets(ctx: AuthedContext, teamId: string | undefined) {
  const { credential, storage } = ctx;
  const team = await resolveTeam(credential, teamId, storage);
  const ids =
    credential.kind === "api-key"
      ? [...credential.key.allowlist.datasets, ...credential.key.allowlist.tables]
      : undefined;
  const [datasets, connections] = await Promise.all([
    storage.catalog.listDatasets(ids ? { teamId: team.id, ids } : { teamId: team.id }),
    storage.catalog.listConnections(team.id),
  ]);
  const byId = new Map(connections.map((c) => [c.id, c]));
  return { datasets: datasets.map((d) => datasetView(d, d.connectionId ? (byId.get(d.connectionId) ?? null) : null)) };
}

/** A dataset the credential may reach, or the same 404 as an unknown id. */
export async function reachableDataset(ctx: AuthedContext, id: string): Promise<DatasetRecord> {
  const dataset = await ctx.storage.catalog.getDataset(id);
  const kinds = dataset?.type === "input_table" ? (["tables", "datasets"] as const) : (["datasets"] as const);
  return reachable(ctx.credential, kinds, dataset, "dataset", ctx.storage);
}

/** GET /datasets/{id}: tagged with its text's hash, 304 when `If-None-Match` holds that tag. */
export async function getDataset(ctx: AuthedContext, id: string, held: string | null = null): Promise<Reply> {
  const dataset = await reachableDataset(ctx, id);
  const connection = dataset.connectionId ? await ctx.storage.catalog.getConnection(dataset.connectionId) : null;
  const text = JSON.stringify({ ...datasetView(dataset, connection), writable: dataset.type === "input_table" });
  const tag = textTag(text);
  const matched = ifNoneMatch(held, tag);
  return matched === null ? Reply.jsonText(200, text, { etag: tag }) : notModifiedReply(ctx, matched);
}

export interface RowsQuery extends RowQueryParams {
  maxRows?: number;
  offset: number;
  columns?: string[];
  filters?: Record<string, unknown>;
}

/**
 * GET /datasets/{id}/rows: paging, columns, filters, `where` and `sort`
 * pushed down to storage; large reads stream; `cursor` continues a read;
 * `format` (or `Accept`) makes it a CSV or NDJSON download.
 */
export async function readDatasetRows(
  ctx: AuthedContext,
  id: string,
  query: RowsQuery,
  read: ReadHeaders = { accept: null, ifNoneMatch: null },
): Promise<Reply> {
  const dataset = await reachableDataset(ctx, id);
  if (dataset.type === "input_table") {
    throw invalidParameter("id", `dataset ${id} is an input table; read its rows with GET /api/v1/tables/${id}/rows`);
  }
  const facts = columnFacts(dataset);
  const { known, names: allNames, columnTypes: allTypes } = facts;
  const unknownColumns = (query.columns ?? []).filter((c) => !known.has(c));
  if (unknownColumns.length > 0) {
    throw invalidParameter("columns", `unknown column ${unknownColumns[0]}`, { unknownColumns });
  }
  const unknownFilters = Object.keys(query.filters ?? {}).filter((c) => !known.has(c));
  if (unknownFilters.length > 0) {
    throw invalidParameter("filters", `unknown column ${unknownFilters[0]} in filters`, {
      unknownColumns: unknownFilters,
    });
  }
  const checked = checkRowQuery(dataset.id, known, query);
  const format = exportFormat(query.format, read.accept);
  const target = { type: "dataset" as const, id: dataset.id, teamId: dataset.teamId };
  const tag = rowsTag(dataset, rowsRequest(query, format), ctx.clock.now());
  if (read.ifNoneMatch !== null) {
    const asked = { offset: checked.before + query.offset, format, ifNoneMatch: read.ifNoneMatch };
    const unchanged = await notModified(ctx, target, tag, asked);
    if (unchanged !== null) return unchanged;
  }
  const page = await ctx.storage.rows.readDatasetRows(id, {
    offset: query.offset,
    limit: query.maxRows ?? null,
    columns: query.columns ?? null,
    filters: query.filters ?? null,
    ...(checked.where && { where: checked.where }),
    ...(checked.sort && { sort: checked.sort }),
    ...(checked.after && { after: checked.after }),
    changesHead: true,
  });
  // Where the dataset's change feed stood when the rows were read: every change up to it is in the page.
  const changesCursor = datasetChangesCursor(dataset.id, page.changesHead);
  const offset = checked.before + query.offset;
  const available = Math.max(0, page.totalRows - offset);
  const returnedRows = Math.min(available, query.maxRows ?? available);
  await auditRowsRead(ctx, target, { offset, returnedRows, format });
  const names = query.columns ?? allNames;
  if (format !== "json") {
    const rowsJson = query.columns === undefined ? page.rowsJson : undefined;
    const csv = { escapeFormulas: ctx.settings.csvEscapeFormulas };
    const reply = exportReply(format, dataset.id, names, page.rows, rowsJson, csv);
    reply.headers[CHANGES_CURSOR_HEADER] = changesCursor;
    return tagged(reply, tag);
  }
  let columnTypes = allTypes;
  if (query.columns) {
    const picked: Record<string, string | null> = Object.create(null);
    for (const name of names) picked[name] = allTypes[name] ?? null;
    columnTypes = picked;
  }
  const hasMore = offset + returnedRows < page.totalRows;
  // The record's own parts of the metadata are the same text for every read of all its columns.
  const around = query.columns ? metadataAround(dataset, names, columnTypes) : facts.metadataAround;
  // The cursor names the page's last row, known once the rows are written.
  const suffix = () =>
    `],"metadata":${around.head}${page.totalRows},"returnedRows":${returnedRows},"offset":${offset},"hasMore":${hasMore}${around.tail},"nextCursor":${JSON.stringify(
      nextCursor(checked, { offset: query.offset, returned: returnedRows, hasMore, lastKey: page.lastKey() }),
    )},"changesCursor":${JSON.stringify(changesCursor)}}}`;
  // A store that holds rows as JSON text hands them over as text: no parse and re-serialise per row.
  const body = page.rowsJson
    ? await jsonRowsBody('{"success":true,"data":[', page.rowsJson, suffix, joinedTexts)
    : await jsonRowsBody('{"success":true,"data":[', page.rows, suffix);
  return tagged(typeof body === "string" ? Reply.jsonText(200, body) : Reply.jsonStream(body), tag);
}

/** What a dataset page depends on besides the dataset: every parameter of the read as sent, and its format. */
function rowsRequest(query: RowsQuery, format: string): Record<string, unknown> {
  const { maxRows, offset, columns, filters, where, sort, cursor } = query;
  return {
    read: "dataset-rows",
    maxRows: maxRows ?? null,
    offset,
    columns: columns ?? null,
    filters: filters ?? null,
    where: where ?? null,
    sort: sort ?? null,
    cursor: cursor ?? null,
    format,
  };
}

/** What a read checks and describes of a dataset's columns: their names (a set and in order) and types. */
interface ColumnFacts {
  known: ReadonlySet<string>;
  names: readonly string[];
  columnTypes: Readonly<Record<string, string | null>>;
  /** The metadata text of a read of every column, around its page's numbers. */
  metadataAround: MetadataAround;
}

/**
 * A page's `metadata` as JSON text, but for the page's numbers and cursor:
 * `head` + totalRows + returnedRows, offset, hasMore + `tail` + nextCursor,
 * the keys in the order JSON.stringify of the metadata object gives them.
 */
interface MetadataAround {
  head: string;
  tail: string;
}

function metadataAround(
  dataset: DatasetRecord,
  columns: readonly string[],
  columnTypes: Readonly<Record<string, string | null>>,
): MetadataAround {
  return {
    head: `{"datasetId":${JSON.stringify(dataset.id)},"datasetName":${JSON.stringify(dataset.name)},"totalRows":`,
    tail: `,"columns":${JSON.stringify(columns)},"columnTypes":${JSON.stringify(columnTypes)},"lastUpdated":${JSON.stringify(dataset.lastRefreshedAt ?? dataset.updatedAt)}`,
  };
}

/**
 * A store that remembers dataset records (SQLite) hands the same frozen
 * record to every read until it changes: its column facts are worked out
 * once per record. A fresh record (other stores) is worked out each time.
 */
const factsByRecord = new WeakMap<DatasetRecord, ColumnFacts>();

function columnFacts(dataset: DatasetRecord): ColumnFacts {
  const known = factsByRecord.get(dataset);
  if (known) return known;
  const columnTypes: Record<string, string | null> = Object.create(null);
  for (const c of dataset.columns) columnTypes[c.name] = c.type;
  const names = dataset.columns.map((c) => c.name);
  const facts: ColumnFacts = {
    known: new Set(names),
    names,
    columnTypes,
    metadataAround: metadataAround(dataset, names, columnTypes),
  };
  if (Object.isFrozen(dataset) && Object.isFrozen(dataset.columns)) factsByRecord.set(dataset, facts);
  return facts;
}
