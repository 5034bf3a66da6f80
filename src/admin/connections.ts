import type { Ports } from "../context/ports.js";
import { eventId } from "../domain/crypto.js";
import { inferColumns } from "../domain/columns.js";
import type { Row } from "../domain/model.js";
import { connectionSecrets, scrubUpstreamText } from "../connectors/scrub.js";
import { ApiError, notFound } from "../base/api-error.js";
import { checkId } from "./change.js";
import { parseBody, refreshBody } from "./schemas.js";
import {
  type ConnectorResult,
  InvalidQueryError,
  UpstreamThrottledError,
  UpstreamUnavailableError,
} from "../ports/connector.js";

/** Rows one refresh may pull when the caller sets no `maxRows`. */
export const DEFAULT_REFRESH_MAX_ROWS = 100_000;

export interface RefreshResult {
  datasetId: string;
  /** Whether the new rows were stored. On failure the previous rows stay in place. */
  ok: boolean;
  startedAt: string;
  durationMs: number;
  /** Rows stored (0 on failure). */
  rowsProcessed: number;
  error: string | null;
}

/** Connection-backed datasets. */
export interface ConnectionAdmin {
  /**
   * Pull a connection dataset from its upstream into storage (replacing its
   * rows, columns, rowCount and lastRefreshedAt in one storage operation)
   * and record the run for `refresh-history`. An upstream failure, or more
   * than `maxRows` rows (default 100,000), records a failed run, leaves the
   * previous rows in place and resolves with `ok: false`; an unknown id is
   * 404 and a dataset that is not backed by a queryable connection is 400.
   */
  refreshDataset(id: string, options?: { maxRows?: number }): Promise<RefreshResult>;
}

export function connectionAdmin(ports: Ports): ConnectionAdmin {
  const { storage, clock, connectors } = ports;
  return {
    async refreshDataset(id, options = {}) {
      checkId(id);
      // Checked before anything is read or written: a maxRows that is not a positive integer is 422, never an empty
      // refresh.
      const { maxRows = DEFAULT_REFRESH_MAX_ROWS } = parseBody(refreshBody, options);
      const dataset = await storage.catalog.getDataset(id);
      if (!dataset) throw notFound("dataset");
      const connection =
        dataset.type === "connection" && dataset.connectionId
          ? await storage.catalog.getConnection(dataset.connectionId)
          : null;
      const connector =
        connection && Object.hasOwn(connectors, connection.type) ? connectors[connection.type] : undefined;
      if (!connection || !connector) {
        throw new ApiError(
          400,
          "invalid_parameter",
          `dataset ${id} is not backed by a connection that can be queried`,
          {
            details: { parameter: "id" },
          },
        );
      }
      const startedAt = new Date(clock.now()).toISOString();
      // A duration, not a point in time: the monotonic timer, like the API's latency log.
      const t0 = performance.now();
      let rows: Row[] = [];
      let error: string | null = null;
      try {
        rows = await pullAll(maxRows, (offset, limit) =>
          connector.query(connection, {
            source: dataset.source,
            limit,
            offset,
            filters: null,
            orderBy: null,
            orderDirection: "ASC",
            format: "rows",
            params: null,
          }),
        );
        await storage.rows.replaceDatasetRows(id, { rows, columns: inferColumns(rows), refreshedAt: startedAt });
      } catch (caught) {
        // Shown by refresh-history: never the connection's secrets or an upstream URL's query.
        error = scrubUpstreamText(describe(caught), connectionSecrets(connection.config));
        rows = [];
      }
      const durationMs = Math.round(performance.now() - t0);
      const run = { datasetId: id, startedAt, durationMs, rowsProcessed: rows.length, error };
      await storage.usage.recordRefreshRun(run);
      await storage.audit.appendAuditEvent(
        {
          id: eventId(),
          time: new Date(clock.now()).toISOString(),
          teamId: dataset.teamId,
          category: "audit",
          action: "dataset.refreshed",
          actor: { type: "system", id: "refresh", name: "dataset refresh" },
          target: { type: "dataset", id },
          outcome: error === null ? "success" : "failure",
          ip: null,
          userAgent: null,
          details: { connectionId: connection.id, rowsProcessed: run.rowsProcessed, durationMs, error },
        },
        clock.now(),
      );
      return { ...run, ok: error === null };
    },
  };
}

/**
 * Page through the source: one call asks for everything allowed (SQL and
 * memory sources answer in one go); a capped upstream (ArcGIS) says
 * `hasMore` and is asked again from where it stopped.
 */
async function pullAll(
  maxRows: number,
  page: (offset: number, limit: number) => Promise<ConnectorResult>,
): Promise<Row[]> {
  const rows: Row[] = [];
  for (;;) {
    const result = await page(rows.length, maxRows + 1 - rows.length);
    if (result.kind !== "rows") throw new Error("the connector answered GeoJSON to a tabular read");
    rows.push(...result.rows);
    if (rows.length > maxRows) throw new Error(`the source holds more than ${maxRows} rows`);
    if (!result.hasMore || result.rows.length === 0) return rows;
  }
}

function describe(error: unknown): string {
  if (
    error instanceof UpstreamUnavailableError ||
    error instanceof UpstreamThrottledError ||
    error instanceof InvalidQueryError
  ) {
    return error.message;
  }
  return error instanceof Error ? error.message : "refresh failed";
}
