import { reachable } from "../core/access.js";
import { actorOf } from "../core/auth.js";
import type { AuthedContext } from "../context/handler.js";
import type { ConnectionRecord, DatasetRecord, Row } from "../domain/model.js";
import { ApiError, invalidParameter } from "../base/api-error.js";
import type { GuardAnswer } from "../core/guard.js";
import type { HeaderReader } from "../base/headers.js";
import { connectionSecrets, scrubUpstreamText } from "../connectors/scrub.js";
import {
  type Connector,
  type ConnectorQuery,
  InvalidQueryError,
  UpstreamThrottledError,
  UpstreamUnavailableError,
} from "../ports/connector.js";

/** Paging bounds of GET /connections/{id}/query. */
export const QUERY_LIMIT = { default: 100, max: 1000 } as const;

export interface ConnectionQueryInput {
  limit: number;
  offset: number;
  filters?: Record<string, unknown>;
  orderBy?: string;
  orderDirection: "ASC" | "DESC";
  datasetId?: string;
  format: "json" | "geojson";
  params?: Record<string, unknown>;
}

/** GET /connections/{id}/query: a live query through the guard (cache, single-flight, rate limit, stale). */
export async function queryConnection(
  ctx: AuthedContext,
  id: string,
  input: ConnectionQueryInput,
  headers: HeaderReader,
) {
  const { credential, storage } = ctx;
  const connection = await reachable(
    credential,
    ["connections"],
    await storage.catalog.getConnection(id),
    "connection",
    storage,
  );
  const connector = connectorOf(ctx, connection);
  const dataset = await datasetOf(ctx, connection, input.datasetId);
  const query = normalise(connector, connection, dataset, input);

  let answer: GuardAnswer;
  try {
    answer = await ctx.guard.query({
      connection,
      connector,
      datasetId: dataset.id,
      query,
      noCache: wantsNoCache(headers),
      timeoutMs: ctx.settings.upstreamTimeoutMs,
      metrics: ctx.operations.metrics,
    });
  } catch (error) {
    throw toApiError(error, connectionSecrets(connection.config));
  }

  await ctx.audit({
    teamId: connection.teamId,
    category: "data_access",
    action: "connection.query",
    actor: actorOf(credential),
    target: { type: "connection", id: connection.id },
    outcome: "success",
    ip: ctx.clientAddress,
    userAgent: ctx.userAgent,
    details: { datasetId: dataset.id, format: query.format, cached: answer.cached, stale: answer.stale },
  });

  const stale = answer.stale ? { stale: true as const } : {};
  const { result } = answer;
  if (result.kind === "geojson") {
    return {
      success: true,
      geojson: result.featureCollection,
      metadata: {
        connectionId: connection.id,
        datasetId: dataset.id,
        sourceType: connection.type,
        truncated: result.truncated,
      },
      cached: answer.cached,
      ...stale,
    };
  }
  return {
    success: true,
    data: result.rows,
    cached: answer.cached,
    ...stale,
    metadata: {
      connectionId: connection.id,
      connectionName: connection.name,
      datasetId: dataset.id,
      datasetName: dataset.name,
      sourceType: connection.type,
      returnedRows: result.rows.length,
      offset: query.offset,
      limit: query.limit,
      hasMore: result.hasMore,
      columns: columnsOf(result.rows, dataset),
      orderBy: query.orderBy,
      orderDirection: query.orderDirection,
      fetchedAt: new Date(result.fetchedAt).toISOString(),
    },
  };
}

function connectorOf(ctx: AuthedContext, connection: ConnectionRecord): Connector {
  const connector = Object.hasOwn(ctx.connectors, connection.type) ? ctx.connectors[connection.type] : undefined;
  if (!connector) {
    throw invalidParameter(
      "id",
      connection.type === "webhook"
        ? `connection ${connection.id} receives webhooks and has no upstream to query; read its dataset with GET /api/v1/datasets/{id}/rows`
        : `connection ${connection.id} is of type ${connection.type}, which this server cannot query`,
    );
  }
  return connector;
}

/** The dataset to query: `datasetId` when sent (a dataset of this connection), else the connection's only one. */
async function datasetOf(
  ctx: AuthedContext,
  connection: ConnectionRecord,
  datasetId: string | undefined,
): Promise<DatasetRecord> {
  const datasets = (await ctx.storage.catalog.listDatasets({ teamId: connection.teamId })).filter(
    (d) => d.connectionId === connection.id,
  );
  if (datasetId !== undefined) {
    const found = datasets.find((d) => d.id === datasetId);
    if (!found)
      throw invalidParameter("datasetId", `dataset ${datasetId} is not a dataset of connection ${connection.id}`);
    return found;
  }
  if (datasets.length === 1) return datasets[0]!;
  if (datasets.length === 0) throw invalidParameter("datasetId", `connection ${connection.id} has no dataset to query`);
  throw invalidParameter(
    "datasetId",
    `connection ${connection.id} carries ${datasets.length} datasets; send datasetId`,
    {
      datasetIds: datasets.map((d) => d.id).sort(),
    },
  );
}

/** The query the connector receives, after the rules that do not need the upstream. */
function normalise(
  connector: Connector,
  connection: ConnectionRecord,
  dataset: DatasetRecord,
  input: ConnectionQueryInput,
): Omit<ConnectorQuery, "signal"> {
  const geojson = input.format === "geojson";
  if (geojson && !connector.isSpatial(connection, dataset.source)) {
    throw invalidParameter("format", `dataset ${dataset.id} is not a spatial source; format=geojson is not available`);
  }
  if (geojson && input.filters !== undefined) {
    throw invalidParameter(
      "filters",
      "filters apply to tabular queries; with format=geojson pass the upstream's own parameters in params",
    );
  }
  if (geojson && input.orderBy !== undefined) {
    throw invalidParameter(
      "orderBy",
      "orderBy applies to tabular queries; with format=geojson pass the upstream's own parameters in params",
    );
  }
  if (!geojson && input.params !== undefined) {
    throw invalidParameter("params", "params are passed to the upstream with format=geojson only");
  }
  // The dataset's known columns are checked here; the connector checks against the source itself.
  const known = new Set(dataset.columns.map((c) => c.name));
  if (known.size > 0) {
    const unknown = Object.keys(input.filters ?? {}).filter((name) => !known.has(name));
    if (unknown.length > 0)
      throw invalidParameter("filters", `unknown column ${unknown[0]} in filters`, { unknownColumns: unknown });
    if (input.orderBy !== undefined && !known.has(input.orderBy)) {
      throw invalidParameter("orderBy", `orderBy names no column: ${input.orderBy}`);
    }
  }
  return {
    source: dataset.source,
    limit: input.limit,
    offset: input.offset,
    filters: input.filters ?? null,
    orderBy: input.orderBy ?? null,
    orderDirection: input.orderDirection,
    format: geojson ? "geojson" : "rows",
    params: input.params ?? null,
  };
}

function wantsNoCache(headers: HeaderReader): boolean {
  const value = headers.get("cache-control");
  return value !== null && value.split(",").some((d) => d.trim().toLowerCase() === "no-cache");
}

/** Column names of the returned rows in first-seen order; the dataset's when no row came back. */
function columnsOf(rows: readonly Row[], dataset: DatasetRecord): string[] {
  if (rows.length === 0) return dataset.columns.map((c) => c.name);
  const names = new Set<string>();
  for (const row of rows) for (const key of Object.keys(row)) names.add(key);
  return [...names];
}

/**
 * A connector's error as the client sees it. Connector text may echo the
 * upstream's request (a URL with its token, a connection string), so it is
 * scrubbed of `secrets` (the connection's) and of credentials and query
 * strings before it becomes a message; an untyped error (a host connector's
 * bug, a 500) is replaced by a scrubbed copy, so the log is clean too.
 */
export function toApiError(error: unknown, secrets: readonly string[] = []): unknown {
  if (error instanceof InvalidQueryError)
    return invalidParameter(error.parameter, scrubUpstreamText(error.message, secrets));
  if (error instanceof UpstreamUnavailableError) {
    return new ApiError(
      502,
      "upstream_unavailable",
      `the upstream of this connection could not answer: ${scrubUpstreamText(error.message, secrets)}`,
    );
  }
  if (error instanceof ApiError || error instanceof UpstreamThrottledError || !(error instanceof Error)) return error;
  const scrubbed = new Error(`connector failed: ${scrubUpstreamText(error.message, secrets)}`);
  scrubbed.stack = error.stack === undefined ? scrubbed.stack : scrubUpstreamText(error.stack, secrets, 4000);
  return scrubbed;
}
