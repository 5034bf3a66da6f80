import type * as Database from "./driver.js";
import { currentVersion } from "../domain/dashboards.js";
import { utcDay } from "../domain/days.js";
import type { ApiCallRecord, CreditUsage, DashboardRecord, RefreshRun } from "../domain/model.js";
import type { StorageAreas } from "../ports/storage.js";
import {
  type ApiUsageRow,
  type CreditUsageRow,
  sumCall,
  type UsageSums,
  usageSums,
  type DashboardUsageRow,
  type DatasetUsageRow,
  type RefreshHistoryRow,
  type UsageWrites,
} from "../ports/storage/usage.js";
import { parseJson, type SqliteHandle, writeTransaction } from "./db.js";
import type { RecordWrites } from "./records.js";
import { reportsOwnFaults } from "../sql/store-calls.js";

/**
 * The space's usage objects, refresh runs, credit usage and the API usage
 * log. Every figure is a GROUP BY over an index on (owner, day); days are UTC
 * days computed once when a record is stored. Editor views are excluded
 * through the partial index's own condition. Ties are broken in BINARY
 * collation order, NULL first, as the port asks.
 */
export function sqliteUsage({ db }: SqliteHandle, group: RecordWrites): StorageAreas["usage"] {
  const dashboardUsage = db.prepare<
    [string, string, string],
    Omit<DashboardUsageRow, "published"> & { versions: string }
  >(
    `SELECT v.day, v.dashboard_id, d.name AS dashboard, d.versions, count(*) AS views,
            count(DISTINCT v.visitor_id) AS unique_visitors,
            count(DISTINCT v.user_id) AS signed_in_viewers,
            sum(v.user_id IS NULL) AS anonymous_views
     FROM dashboards d JOIN dashboard_views v ON v.dashboard_id = d.id
     WHERE d.team_id = ? AND v.editor = 0 AND v.day BETWEEN ? AND ?
     GROUP BY v.day, v.dashboard_id
     ORDER BY v.day DESC, dashboard, v.dashboard_id`,
  );
  const refreshHistory = db.prepare<[string, string, string], RefreshHistoryRow>(
    `SELECT r.dataset_id, d.name AS dataset, c.name AS connection, r.day,
            count(*) AS runs, sum(r.error IS NOT NULL) AS failures,
            sum(r.rows_processed) AS rows_processed, avg(r.duration_ms) AS avg_duration_ms,
            (SELECT l.error FROM refresh_runs l
              WHERE l.dataset_id = r.dataset_id AND l.day = r.day AND l.error IS NOT NULL
              ORDER BY l.started_ms DESC, l.seq DESC LIMIT 1) AS last_error
     FROM datasets d JOIN refresh_runs r ON r.dataset_id = d.id LEFT JOIN connections c ON c.id = d.connection_id
     WHERE d.team_id = ? AND r.day BETWEEN ? AND ?
     GROUP BY r.dataset_id, r.day
     ORDER BY r.day DESC, dataset, r.dataset_id`,
  );
  const creditUsage = db.prepare<[string, string, string], CreditUsageRow>(
    `SELECT day, category, sum(credits) AS credits, count(*) AS uses, count(DISTINCT user_id) AS users
     FROM credit_usage WHERE team_id = ? AND day BETWEEN ? AND ?
     GROUP BY day, category ORDER BY day DESC, category`,
  );
  const apiUsage = db.prepare<[string, string, string], ApiUsageRow>(
    `SELECT day, method, route, credential_kind, credential_id, credential_name AS credential,
            sum(calls) AS calls, sum(errors) AS errors, sum(server_errors) AS server_errors,
            sum(latency_sum) / sum(calls) AS avg_latency_ms
     FROM api_usage WHERE team_id = ? AND day BETWEEN ? AND ?
     GROUP BY day, method, route, credential_kind, credential_id, credential_name
     ORDER BY day DESC, route, method, credential_kind, credential, credential_id`,
  );
  const datasetUsage = db.prepare<
    [string, string, string],
    Omit<DatasetUsageRow, "dashboards"> & { dashboards: string }
  >(
    `SELECT x.id AS dataset_id, x.name AS dataset, x.type, c.name AS connection,
            x.row_count, json_array_length(x.columns) AS column_count,
            x.last_refreshed_at, x.updated_at,
            (SELECT r.error FROM refresh_runs r WHERE r.dataset_id = x.id ORDER BY r.started_ms DESC, r.seq DESC LIMIT 1) AS last_refresh_error,
            (SELECT json_group_array(name) FROM (
               SELECT b.name FROM dashboard_datasets dd JOIN dashboards b ON b.id = dd.dashboard_id
               WHERE dd.dataset_id = x.id AND b.team_id = ? ORDER BY b.name)) AS dashboards,
            coalesce(reads.reads, 0) AS api_reads, reads.last_at AS last_api_read_at
     FROM (
       SELECT id, name, type, connection_id, next_position - first_position AS row_count, columns, last_refreshed_at, updated_at
         FROM datasets WHERE team_id = ?
       UNION ALL
       SELECT id, name, 'input_table', NULL, row_count, columns, NULL, updated_at FROM input_tables WHERE team_id = ?
     ) AS x
     LEFT JOIN connections c ON c.id = x.connection_id
     LEFT JOIN dataset_reads reads ON reads.dataset_id = x.id
     ORDER BY dataset, dataset_id`,
  );
  const insertRun = writeTransaction(db, refreshRunStatement(db));
  const usage = usageLog(db, group);
  const usageHistory = usageWrites(db);
  return {
    async spaceDashboardUsage({ teamId, fromDay, toDay }) {
      return dashboardUsage.all(teamId, fromDay, toDay).map(({ versions, ...row }) => ({
        day: row.day,
        dashboard_id: row.dashboard_id,
        dashboard: row.dashboard,
        published: currentVersion({ versions: parseJson(versions) } as DashboardRecord).published,
        views: row.views,
        unique_visitors: row.unique_visitors,
        signed_in_viewers: row.signed_in_viewers,
        anonymous_views: row.anonymous_views,
      }));
    },
    async spaceRefreshHistory({ teamId, fromDay, toDay }) {
      return refreshHistory
        .all(teamId, fromDay, toDay)
        .map((r) => ({ ...r, avg_duration_ms: roundHalfUp(r.avg_duration_ms) }));
    },
    async spaceCreditUsage({ teamId, fromDay, toDay }) {
      return creditUsage.all(teamId, fromDay, toDay);
    },
    async spaceApiUsage({ teamId, fromDay, toDay }) {
      usage.settle();
      return apiUsage.all(teamId, fromDay, toDay).map((r) => ({ ...r, avg_latency_ms: roundHalfUp(r.avg_latency_ms) }));
    },
    async spaceDatasetUsage({ teamId }) {
      usage.settle();
      return datasetUsage
        .all(teamId, teamId, teamId)
        .map((r) => ({ ...r, dashboards: parseJson<string[]>(r.dashboards) }));
    },
    async recordRefreshRun(run) {
      await insertRun(run);
    },
    // Settles once its group commits, and never rejects (a failure is the group's to report).
    recordApiCall: reportsOwnFaults((call: ApiCallRecord) => usage.record(call)),
    ...usageHistory,
  };
}

/** Math.round is half up for the non-negative means reported here. */
function roundHalfUp(value: number): number {
  return Math.round(value);
}

/**
 * The usage log as per-day counters, written by the store's group commit:
 * the calls recorded in one turn of the event loop are summed per counter
 * in memory and written as one UPSERT per counter (a turn of reads by one
 * key is two statements, not two per read), in the same transaction as
 * that turn's audit events, so logging a read costs the read no commit of
 * its own. Never rejects: a lost counter is the price of a failing write,
 * never a failed request.
 */
function usageLog(db: Database.Database, group: RecordWrites) {
  const count = db.prepare(
    `INSERT INTO api_usage (key, day, team_id, method, route, credential_kind, credential_id, credential_name, calls, errors, server_errors, latency_sum)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
     ON CONFLICT (key) DO UPDATE SET calls = calls + excluded.calls, errors = errors + excluded.errors,
       server_errors = server_errors + excluded.server_errors, latency_sum = latency_sum + excluded.latency_sum`,
  );
  const read = db.prepare(
    `INSERT INTO dataset_reads (dataset_id, reads, last_at, last_ms) VALUES (?, ?, ?, ?)
     ON CONFLICT (dataset_id) DO UPDATE SET reads = reads + excluded.reads,
       last_at = CASE WHEN excluded.last_ms >= last_ms THEN excluded.last_at ELSE last_at END,
       last_ms = max(last_ms, excluded.last_ms)`,
  );
  /** The calls of the turn not yet handed to the group commit, and the promise of their commit. */
  let turn: { sums: UsageSums; committed: Promise<void> } | null = null;
  const write = (sums: UsageSums) => {
    if (turn?.sums === sums) turn = null; // later calls start the next group
    for (const [key, c] of sums.calls)
      count.run(
        key,
        c.day,
        c.teamId,
        c.method,
        c.route,
        c.credentialKind,
        c.credentialId,
        c.credentialName,
        c.calls,
        c.errors,
        c.serverErrors,
        c.latencySum,
      );
    for (const [datasetId, r] of sums.reads) read.run(datasetId, r.reads, r.lastAt, r.lastMs);
  };
  return {
    record(call: ApiCallRecord): Promise<void> {
      if (turn === null) {
        const sums = usageSums();
        turn = { sums, committed: group.add(() => write(sums)).catch(() => {}) };
      }
      sumCall(turn.sums, call);
      return turn.committed;
    },
    /** Commits everything recorded so far (before a read of the counters). */
    settle(): void {
      group.flush();
    },
  };
}

/** The usage history as the host reports it: each append one IMMEDIATE transaction, all or none. */
function usageWrites(db: Database.Database): UsageWrites {
  const run = refreshRunStatement(db);
  const credit = creditUsageStatement(db);
  const all = <T>(write: (item: T) => void) =>
    writeTransaction(db, (items: readonly T[]) => {
      for (const item of items) write(item);
    });
  const runs = all(run);
  const credits = all(credit);
  return {
    async appendRefreshRuns(items) {
      await runs(items);
    },
    async appendCreditUsage(items) {
      await credits(items);
    },
  };
}

export function refreshRunStatement(db: Database.Database): (run: RefreshRun) => void {
  const insert = db.prepare(
    "INSERT INTO refresh_runs (dataset_id, day, started_at, started_ms, duration_ms, rows_processed, error) VALUES " +
      "(?, ?, ?, ?, ?, ?, ?)",
  );
  return (r) => {
    const started = Date.parse(r.startedAt);
    insert.run(
      r.datasetId,
      utcDay(r.startedAt),
      r.startedAt,
      Number.isNaN(started) ? 0 : started,
      r.durationMs,
      r.rowsProcessed,
      r.error,
    );
  };
}

export function creditUsageStatement(db: Database.Database): (usage: CreditUsage) => void {
  const insert = db.prepare(
    "INSERT INTO credit_usage (team_id, day, at, category, credits, user_id) VALUES (?, ?, ?, ?, ?, ?)",
  );
  return (c) => {
    insert.run(c.teamId, utcDay(c.at), c.at, c.category, c.credits, c.userId);
  };
}
