import type { ApiCallRecord, CreditUsage, RefreshRun } from "../../domain/model.js";
import { utcDay } from "../../domain/days.js";
import type { DayWindow } from "../../domain/days.js";

/** A team's window, the query of every day-based space object. */
export interface SpaceQuery extends DayWindow {
  teamId: string;
}

/** The space objects of GET /space/{object}. */
export type SpaceObject =
  "dashboard-usage" | "refresh-history" | "credit-usage" | "api-usage" | "dataset-usage" | "webhook-deliveries";
export const SPACE_OBJECTS: readonly SpaceObject[] = [
  "dashboard-usage",
  "refresh-history",
  "credit-usage",
  "api-usage",
  "dataset-usage",
  "webhook-deliveries",
];

/** `dashboard-usage`: one row per dashboard of the team per UTC day with at least one (non-editor) view. */
export interface DashboardUsageRow {
  day: string;
  dashboard_id: string;
  /** The dashboard's name. */
  dashboard: string;
  /** Whether the dashboard's current (highest) version is published now. */
  published: boolean;
  views: number;
  /** Distinct `visitorId`s that day. */
  unique_visitors: number;
  /** Distinct non-null `userId`s that day. */
  signed_in_viewers: number;
  /** Views with `userId` null (public-link visitors). */
  anonymous_views: number;
}

/** `refresh-history`: one row per dataset of the team per UTC day of the runs' `startedAt`. */
export interface RefreshHistoryRow {
  dataset_id: string;
  dataset: string;
  /** The dataset's connection name; null for a dataset without a connection. */
  connection: string | null;
  day: string;
  runs: number;
  /** Runs whose `error` is not null. */
  failures: number;
  /** Sum of `rowsProcessed` over the day's runs. */
  rows_processed: number;
  /** Mean `durationMs` of the day's runs, rounded half up to an integer. */
  avg_duration_ms: number;
  /**
   * `error` of the day's latest failed run (greatest `startedAt`; on a tie the one stored last); null when none failed.
   */
  last_error: string | null;
}

/** `credit-usage`: one row per category per UTC day of the team's credit usage records. */
export interface CreditUsageRow {
  day: string;
  category: string;
  /** Sum of `credits`. */
  credits: number;
  /** Number of usage records. */
  uses: number;
  /** Distinct non-null `userId`s. */
  users: number;
}

/**
 * `api-usage`: one row per UTC day, route template, method and credential
 * (kind, id, name) among the team's API calls (`ApiCallRecord.teamId`).
 */
export interface ApiUsageRow {
  day: string;
  method: string;
  /** Route template, e.g. `/api/v1/datasets/:id/rows`. */
  route: string;
  credential_kind: ApiCallRecord["credentialKind"];
  /** Key id or user id. */
  credential_id: string | null;
  /** Key name or user email. */
  credential: string | null;
  calls: number;
  /** Calls answered with a status of 400 or more. */
  errors: number;
  /** Calls answered with a status of 500 or more (counted in `errors` too). */
  server_errors: number;
  /** Mean `latencyMs`, rounded half up to an integer. */
  avg_latency_ms: number;
}

/** `dataset-usage`: one row per dataset of the team (input tables included): its current state. */
export interface DatasetUsageRow {
  dataset_id: string;
  dataset: string;
  /** `upload`, `connection` or `input_table`. */
  type: string;
  /** The connection's name; null without one. */
  connection: string | null;
  row_count: number;
  column_count: number;
  last_refreshed_at: string | null;
  updated_at: string;
  /**
   * `error` of the dataset's latest refresh run (greatest `startedAt`) when that run failed; else null (also without
   * runs).
   */
  last_refresh_error: string | null;
  /** Names of the team's dashboards whose `datasetIds` include the dataset, sorted (binary order). */
  dashboards: string[];
  /**
   * API calls that read its rows: method GET, a route in
   * {@link DATASET_READ_ROUTES}, `objectId` equal to the dataset id, status
   * 200–299 or 304 (a page the client already held, revalidated). All
   * recorded time (dataset-usage has no window).
   */
  api_reads: number;
  /** `at` of the latest such call, as recorded (the pipeline records `toISOString()` form); null without one. */
  last_api_read_at: string | null;
}

/** Route templates whose successful GETs count as API reads of the dataset named by `objectId`. */
export const DATASET_READ_ROUTES: readonly string[] = [
  "/api/v1/datasets/:id/rows",
  "/api/v1/tables/:id/rows",
  "/api/v1/datasets/:id/aggregate",
  "/api/v1/tables/:id/aggregate",
  "/api/v1/datasets/:id/changes",
  "/api/v1/tables/:id/changes",
];

/** Whether `call` counts as an API read of the dataset named by its `objectId` (see `api_reads`). */
export function isDatasetRead(call: ApiCallRecord): call is ApiCallRecord & { objectId: string } {
  const served = (call.status >= 200 && call.status <= 299) || call.status === 304;
  return call.method === "GET" && served && !!call.objectId && DATASET_READ_ROUTES.includes(call.route);
}

/** One counter of the API usage log: the calls of one day, team, method, route and credential. */
export interface ApiUsageCounter {
  day: string;
  teamId: string | null;
  method: string;
  route: string;
  credentialKind: ApiCallRecord["credentialKind"];
  credentialId: string | null;
  credentialName: string | null;
  calls: number;
  errors: number;
  serverErrors: number;
  latencySum: number;
}

/** The counter `call` belongs to (on `day`, its UTC day), with nothing counted yet. */
export function usageCounterFor(call: ApiCallRecord, day: string): ApiUsageCounter {
  const { teamId, method, route, credentialKind, credentialId, credentialName } = call;
  return {
    day,
    teamId,
    method,
    route,
    credentialKind,
    credentialId,
    credentialName,
    calls: 0,
    errors: 0,
    serverErrors: 0,
    latencySum: 0,
  };
}

/** `call` counted in `counter`: a call, an error from 400 on, a server error from 500 on, its latency. */
export function countCall(counter: ApiUsageCounter, call: ApiCallRecord): void {
  counter.calls++;
  if (call.status >= 400) counter.errors++;
  if (call.status >= 500) counter.serverErrors++;
  counter.latencySum += call.latencyMs;
}

/**
 * A dataset's API reads summed: how many, and the latest (`lastMs` its epoch ms, 0 when `lastAt` is not an instant).
 */
export interface DatasetReadCounter {
  reads: number;
  lastAt: string;
  lastMs: number;
}

/**
 * API calls summed in memory before a store writes them: the counters by
 * their key (day, team, method, route and credential as a JSON array, the
 * stored `key` of a counter), the successful reads by dataset id.
 */
export interface UsageSums {
  calls: Map<string, ApiUsageCounter>;
  reads: Map<string, DatasetReadCounter>;
}

export function usageSums(): UsageSums {
  return { calls: new Map(), reads: new Map() };
}

/** `call` added to `sums`: its day's counter and, for a successful read of rows, its dataset's reads. */
export function sumCall(sums: UsageSums, call: ApiCallRecord): void {
  const day = utcDay(call.at);
  const key = JSON.stringify([
    day,
    call.teamId,
    call.method,
    call.route,
    call.credentialKind,
    call.credentialId,
    call.credentialName,
  ]);
  let counter = sums.calls.get(key);
  if (!counter) sums.calls.set(key, (counter = usageCounterFor(call, day)));
  countCall(counter, call);
  if (isDatasetRead(call)) {
    const parsed = Date.parse(call.at);
    const ms = Number.isNaN(parsed) ? 0 : parsed;
    const known = sums.reads.get(call.objectId);
    if (!known) sums.reads.set(call.objectId, { reads: 1, lastAt: call.at, lastMs: ms });
    else {
      known.reads++;
      // The latest read wins; of two at the same millisecond, the later recorded (as the stores' UPSERTs' >= do).
      if (ms >= known.lastMs) {
        known.lastAt = call.at;
        known.lastMs = ms;
      }
    }
  }
}

/**
 * The space's usage objects (GET /space/{object}) and the logs behind them:
 * refresh runs, credit usage and the API usage log. Every aggregate is
 * computed by storage (GROUP BY in SQL stores); the handlers never pull raw
 * events to count them. `dashboard-usage` and `dataset-usage` read the
 * dashboards and catalog of the same store. Editor views (`editor: true`)
 * are excluded from every view figure.
 *
 * Ordering: where rows tie on `day` (or have none) they are ordered by the
 * named text fields in binary (code unit) order — `COLLATE "C"` in
 * PostgreSQL, the default BINARY collation in SQLite — with null before
 * any string.
 *
 * `recordRefreshRun` and `recordApiCall` are here, not in `UsageWrites`:
 * the core writes them itself (a refresh, every API call), so a host that
 * supplies this area supplies them too.
 *
 * A fault of the store answers 503 `storage_unavailable` (the fault clause on `Storage`).
 */
export interface UsageStore {
  /** `dashboard-usage` rows: day descending, then `dashboard`, then `dashboard_id`. */
  spaceDashboardUsage(query: SpaceQuery): Promise<DashboardUsageRow[]>;
  /** `refresh-history` rows of the team's datasets: day descending, then `dataset`, then `dataset_id`. */
  spaceRefreshHistory(query: SpaceQuery): Promise<RefreshHistoryRow[]>;
  /** `credit-usage` rows: day descending, then `category`. */
  spaceCreditUsage(query: SpaceQuery): Promise<CreditUsageRow[]>;
  /** `api-usage` rows: day descending, then `route`, `method`, `credential_kind`, `credential`, `credential_id`. */
  spaceApiUsage(query: SpaceQuery): Promise<ApiUsageRow[]>;
  /** `dataset-usage` rows: by `dataset`, then `dataset_id`. */
  spaceDatasetUsage(query: { teamId: string }): Promise<DatasetUsageRow[]>;
  recordRefreshRun(run: RefreshRun): Promise<void>;
  /**
   * Append to the API usage log. Off the critical path: the caller does not
   * await it, and a failure (a thrown error or a rejected promise) is only
   * logged. Resolves once the call counts in this store's `spaceApiUsage`
   * and `spaceDatasetUsage`; a store that writes calls in batches may
   * resolve before its batch is written, when those reads count the calls
   * still pending.
   */
  recordApiCall(call: ApiCallRecord): Promise<void>;
}

/** The usage history as the host reports it. Each call is atomic and visible to the next read. */
export interface UsageWrites {
  /** Appends refresh runs, all or none. */
  appendRefreshRuns(runs: readonly RefreshRun[]): Promise<void>;
  /** Appends credit usage records, all or none. */
  appendCreditUsage(items: readonly CreditUsage[]): Promise<void>;
}
