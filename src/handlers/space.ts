import { resolveTeam } from "../core/access.js";
import type { Credential } from "../core/auth.js";
import type { AuthedContext } from "../context/handler.js";
import { dayWindow } from "../domain/days.js";
import { type DeliveryDayRow, deliveryDayRows } from "../domain/webhook-inbox.js";
import type { ColumnType } from "../domain/model.js";
import { notFound } from "../base/api-error.js";
import type { Storage } from "../ports/storage.js";
import type {
  ApiUsageRow,
  CreditUsageRow,
  DashboardUsageRow,
  DatasetUsageRow,
  RefreshHistoryRow,
  SpaceObject,
  SpaceQuery,
} from "../ports/storage/usage.js";

interface SpaceSource<R> {
  /** Every field of the rows, in order, with its type (integers are `number`). */
  columns: ReadonlyArray<{ name: keyof R & string; type: ColumnType }>;
  rows(storage: Storage, query: SpaceQuery): Promise<R[]>;
  /**
   * The field naming the dataset a row is about, for objects listed per dataset: an API key sees only rows of its
   * allowlist.
   */
  datasetField?: keyof R & string;
}

const dashboardUsage: SpaceSource<DashboardUsageRow> = {
  columns: [
    { name: "day", type: "date" },
    { name: "dashboard_id", type: "string" },
    { name: "dashboard", type: "string" },
    { name: "published", type: "boolean" },
    { name: "views", type: "number" },
    { name: "unique_visitors", type: "number" },
    { name: "signed_in_viewers", type: "number" },
    { name: "anonymous_views", type: "number" },
  ],
  rows: (storage, query) => storage.usage.spaceDashboardUsage(query),
};

const refreshHistory: SpaceSource<RefreshHistoryRow> = {
  columns: [
    { name: "dataset_id", type: "string" },
    { name: "dataset", type: "string" },
    { name: "connection", type: "string" },
    { name: "day", type: "date" },
    { name: "runs", type: "number" },
    { name: "failures", type: "number" },
    { name: "rows_processed", type: "number" },
    { name: "avg_duration_ms", type: "number" },
    { name: "last_error", type: "string" },
  ],
  rows: (storage, query) => storage.usage.spaceRefreshHistory(query),
  datasetField: "dataset_id",
};

const creditUsage: SpaceSource<CreditUsageRow> = {
  columns: [
    { name: "day", type: "date" },
    { name: "category", type: "string" },
    { name: "credits", type: "number" },
    { name: "uses", type: "number" },
    { name: "users", type: "number" },
  ],
  rows: (storage, query) => storage.usage.spaceCreditUsage(query),
};

const apiUsage: SpaceSource<ApiUsageRow> = {
  columns: [
    { name: "day", type: "date" },
    { name: "method", type: "string" },
    { name: "route", type: "string" },
    { name: "credential_kind", type: "string" },
    { name: "credential_id", type: "string" },
    { name: "credential", type: "string" },
    { name: "calls", type: "number" },
    { name: "errors", type: "number" },
    { name: "server_errors", type: "number" },
    { name: "avg_latency_ms", type: "number" },
  ],
  rows: (storage, query) => storage.usage.spaceApiUsage(query),
};

/** Current state: the window does not apply. */
const datasetUsage: SpaceSource<DatasetUsageRow> = {
  columns: [
    { name: "dataset_id", type: "string" },
    { name: "dataset", type: "string" },
    { name: "type", type: "string" },
    { name: "connection", type: "string" },
    { name: "row_count", type: "number" },
    { name: "column_count", type: "number" },
    { name: "last_refreshed_at", type: "datetime" },
    { name: "updated_at", type: "datetime" },
    { name: "last_refresh_error", type: "string" },
    { name: "dashboards", type: "json" },
    { name: "api_reads", type: "number" },
    { name: "last_api_read_at", type: "datetime" },
  ],
  rows: (storage, query) => storage.usage.spaceDatasetUsage({ teamId: query.teamId }),
  datasetField: "dataset_id",
};

/**
 * Deliveries per webhook connection per UTC day, refusals by reason (webhook-inbox.md); suppressed refusals count too.
 */
const webhookDeliveries: SpaceSource<DeliveryDayRow> = {
  columns: [
    { name: "connection_id", type: "string" },
    { name: "connection", type: "string" },
    { name: "day", type: "date" },
    { name: "received", type: "number" },
    { name: "stored", type: "number" },
    { name: "duplicates", type: "number" },
    { name: "refused", type: "number" },
    { name: "refused_by_reason", type: "json" },
  ],
  rows: async (storage, query) => deliveryDayRows(await storage.webhooks.webhookDeliveryCounts(query)),
};

/** The space objects: what GET /space/{object} serves. */
export const SPACE_SOURCES: Readonly<Record<SpaceObject, SpaceSource<any>>> = {
  "dashboard-usage": dashboardUsage,
  "refresh-history": refreshHistory,
  "credit-usage": creditUsage,
  "api-usage": apiUsage,
  "dataset-usage": datasetUsage,
  "webhook-deliveries": webhookDeliveries,
};

const isSpaceObject = (name: string): name is SpaceObject => Object.hasOwn(SPACE_SOURCES, name);

/**
 * GET /space/{object}: rows aggregated by storage over the N UTC days ending
 * today, each row's fields in the order `columns` declares them.
 */
export async function spaceActivity(
  ctx: AuthedContext,
  object: string,
  query: { days: number; teamId?: string | undefined },
) {
  if (!isSpaceObject(object)) throw notFound("space object");
  const team = await resolveTeam(ctx.credential, query.teamId, ctx.storage);
  const source = SPACE_SOURCES[object];
  const all: Record<string, unknown>[] = await source.rows(ctx.storage, {
    teamId: team.id,
    ...dayWindow(ctx.clock.now(), query.days),
  });
  const reachable = reachableDatasets(ctx.credential);
  const field = source.datasetField;
  const rows = reachable === null || field === undefined ? all : all.filter((row) => reachable.has(String(row[field])));
  return {
    object,
    days: query.days,
    columns: source.columns.map(({ name, type }) => ({ name, type })),
    rows: rows.map((row) => {
      const out: Record<string, unknown> = {};
      for (const { name } of source.columns) out[name] = row[name] ?? null;
      return out;
    }),
  };
}

/**
 * The datasets an API key reaches (its allowlist's datasets and input
 * tables, as GET /datasets lists them); null for a session, whose boundary
 * is its team.
 */
function reachableDatasets(credential: Credential): ReadonlySet<string> | null {
  if (credential.kind !== "api-key") return null;
  return new Set([...credential.key.allowlist.datasets, ...credential.key.allowlist.tables]);
}
