import type { AuthedContext } from "../context/handler.js";
import { actorOf } from "../core/auth.js";
import { invalidParameter } from "../base/api-error.js";
import { type AggregateParams, parseAggregateQuery } from "../domain/aggregate-query.js";
import type { DatasetRecord, Row, TableRecord } from "../domain/model.js";
import { Reply } from "../http/reply.js";
import { reachableDataset } from "./datasets.js";
import { rowsTag } from "./entity-tags.js";
import { type ExportFormat, exportFormat, exportReply, type ReadHeaders } from "./rows-common.js";
import { reachableTable, RESERVED_COLUMNS } from "./tables.js";

/** The parameters of an aggregate request (../shared/aggregates.md), `where`, `filters` and `having` JSON-parsed. */
export interface AggregateRequest extends AggregateParams {
  format?: ExportFormat;
}

type Target = { type: "dataset"; record: DatasetRecord } | { type: "table"; record: TableRecord };

/** GET /datasets/{id}/aggregate: an upload or connection dataset's rows, grouped and aggregated in the store. */
export async function aggregateDataset(
  ctx: AuthedContext,
  id: string,
  request: AggregateRequest,
  read: ReadHeaders = { accept: null, ifNoneMatch: null },
): Promise<Reply> {
  const dataset = await reachableDataset(ctx, id);
  if (dataset.type === "input_table") {
    throw invalidParameter(
      "id",
      `dataset ${id} is an input table; aggregate its rows with GET /api/v1/tables/${id}/aggregate`,
    );
  }
  const columns = new Set(dataset.columns.map((c) => c.name));
  return aggregate(ctx, { type: "dataset", record: dataset }, columns, request, read);
}

/** GET /tables/{id}/aggregate: an input table's rows (its stamps too), grouped and aggregated in the store. */
export async function aggregateTable(
  ctx: AuthedContext,
  id: string,
  request: AggregateRequest,
  read: ReadHeaders = { accept: null, ifNoneMatch: null },
): Promise<Reply> {
  const table = await reachableTable(ctx, id);
  // The declared columns and the stamps; a table that declares none takes any name (as its rows' reads do).
  const columns: ReadonlySet<string> =
    table.columns.length > 0
      ? new Set([...table.columns.map((c) => c.name), ...RESERVED_COLUMNS])
      : ({ has: () => true } as unknown as ReadonlySet<string>);
  return aggregate(ctx, { type: "table", record: table }, columns, request, read);
}

/**
 * Parse (every refusal before anything is read), answer from the answers
 * remembered for this version of the target or from the store, audit, and
 * reply as JSON, CSV or NDJSON.
 */
async function aggregate(
  ctx: AuthedContext,
  target: Target,
  columns: ReadonlySet<string>,
  request: AggregateRequest,
  read: ReadHeaders,
): Promise<Reply> {
  const { format: asked, ...params } = request;
  const query = parseAggregateQuery(params, columns);
  const format = exportFormat(asked, read.accept);
  const { record } = target;
  // A target's record changes with every write of its rows: the same key is the same aggregate over the same rows.
  // A record written too recently to be told apart from the next write's has no key, and is not remembered.
  const key = rowsTag(record, { read: `${target.type}-aggregate`, query }, ctx.clock.now());
  let answer = key === null ? undefined : ctx.caches.aggregates.get(key);
  if (answer === undefined) {
    answer =
      target.type === "dataset"
        ? await ctx.storage.rows.aggregateDatasetRows(record.id, query)
        : await ctx.storage.tables.aggregateTableRows(record.id, query);
    if (key !== null) ctx.caches.aggregates.set(key, answer);
  }
  await auditAggregate(ctx, target, request, format, answer.groups.length);
  const names = [...query.groupBy.map((k) => k.name), ...query.metrics.map((m) => m.name)];
  if (format !== "json") {
    const csv = { escapeFormulas: ctx.settings.csvEscapeFormulas };
    return exportReply(format, record.id, names, listed(answer.groups), undefined, csv);
  }
  const dataset = record as Partial<DatasetRecord> & TableRecord;
  return Reply.json(200, {
    success: true,
    data: answer.groups,
    metadata: {
      datasetId: record.id,
      datasetName: record.name,
      groupBy: query.groupBy.map((k) => k.name),
      metrics: query.metrics.map((m) => m.name),
      matchedRows: answer.matchedRows,
      totalGroups: answer.totalGroups,
      returnedGroups: answer.groups.length,
      offset: query.offset,
      hasMore: query.offset + answer.groups.length < answer.totalGroups,
      totals: answer.totals,
      lastUpdated: dataset.lastRefreshedAt ?? record.updatedAt,
    },
  });
}

/**
 * An aggregate in the audit feed: `data_access`, `dataset.rows.aggregated`
 * or `table.rows.aggregated`, with its parameters as sent and the groups it
 * returns. Awaited before the answer, as a rows read's is.
 */
function auditAggregate(
  ctx: AuthedContext,
  target: Target,
  request: AggregateRequest,
  format: ExportFormat,
  returnedGroups: number,
): Promise<void> {
  const { groupBy, metrics, where, filters, having, sort, maxRows, offset } = request;
  const parameters = { groupBy, metrics, where, filters, having, sort, maxRows, offset };
  const given = Object.fromEntries(Object.entries(parameters).filter(([, value]) => value !== undefined));
  return ctx.audit({
    teamId: target.record.teamId,
    category: "data_access",
    action: `${target.type}.rows.aggregated`,
    actor: actorOf(ctx.credential),
    target: { type: target.type, id: target.record.id },
    outcome: "success",
    ip: ctx.clientAddress,
    userAgent: ctx.userAgent,
    details: {
      requestId: ctx.requestId,
      ...given,
      returnedGroups,
      ...(format !== "json" && { format }),
    },
  });
}

/** The groups, as the export takes rows. */
async function* listed(groups: readonly Row[]): AsyncGenerator<Row> {
  yield* groups;
}
