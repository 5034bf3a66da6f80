import type Database from "better-sqlite3";
import type { ApiCallRecord, CreditUsage, DashboardRecord, DashboardView, RefreshRun, Row } from "../domain/model.js";
import type { AnalyticsStore, DayViews, SpaceObject, ViewerDayViews } from "../ports/storage/analytics.js";
import { parseJson, type SqliteHandle, utcDay } from "./db.js";

interface DashboardRow {
  id: string;
  team_id: string;
  name: string;
  description: string | null;
  versions: string;
  dataset_ids: string;
}

type Window = { teamId: string; fromDay: string; toDay: string };

/** A visitor is its user when signed in, else its visitor id (prefixed so the two never collide). */
const VISITOR = "CASE WHEN user_id IS NOT NULL THEN 'u:' || user_id ELSE 'v:' || visitor_id END";

/**
 * Every figure is a GROUP BY over an index on (owner, day); days are UTC
 * days computed once when a record is stored. Editor views are excluded by
 * the partial index's own condition.
 */
export function sqliteAnalytics({ db }: SqliteHandle): AnalyticsStore {
  const dashboards = db.prepare<[string], DashboardRow>(
    "SELECT * FROM dashboards WHERE team_id IN (SELECT value FROM json_each(?)) ORDER BY id",
  );
  const dashboard = db.prepare<[string], DashboardRow>("SELECT * FROM dashboards WHERE id = ?");
  const byDay = db.prepare<[string, string, string], DayViews>(
    `SELECT day, count(*) AS views, count(DISTINCT ${VISITOR}) AS uniqueVisitors
     FROM dashboard_views WHERE dashboard_id = ? AND editor = 0 AND day BETWEEN ? AND ?
     GROUP BY day ORDER BY day`,
  );
  const byViewer = db.prepare<[string, string, string], ViewerDayViews>(
    `SELECT v.day, v.user_id AS viewerId,
            CASE WHEN v.user_id IS NULL THEN 'Anonymous' ELSE coalesce(u.email, v.user_id) END AS viewer,
            count(*) AS views
     FROM dashboard_views v LEFT JOIN users u ON u.id = v.user_id
     WHERE v.dashboard_id = ? AND v.editor = 0 AND v.day BETWEEN ? AND ?
     GROUP BY v.day, v.user_id ORDER BY v.day, viewer, viewerId`,
  );
  const space = spaceQueries(db);
  const insertRun = refreshRunStatement(db);
  const insertCall = apiCallStatement(db);

  return {
    async listDashboards(teamIds) {
      return dashboards.all(JSON.stringify(teamIds)).map(toDashboard);
    },
    async getDashboard(id) {
      const row = dashboard.get(id);
      return row ? toDashboard(row) : null;
    },
    async viewsByDay(dashboardId, { fromDay, toDay }) {
      return byDay.all(dashboardId, fromDay, toDay);
    },
    async viewsByViewer(dashboardId, { fromDay, toDay }) {
      return byViewer.all(dashboardId, fromDay, toDay);
    },
    async spaceRows(object, query) {
      return space[object](query);
    },
    async recordRefreshRun(run) {
      insertRun(run);
    },
    async recordApiCall(call) {
      try {
        insertCall(call);
      } catch {
        // The usage log never fails a request.
      }
    },
  };
}

/** Rows of the five space objects; field names and meaning are documented in docs/readme (space objects). */
function spaceQueries(db: Database.Database): Record<SpaceObject, (query: Window) => Row[]> {
  const refreshHistory = db.prepare<[string, string, string], Row & { avg_duration_ms: number }>(
    `SELECT r.dataset_id, d.name AS dataset, c.name AS connection, r.day,
            count(*) AS runs, sum(r.error IS NOT NULL) AS failures,
            sum(r.rows_processed) AS rows_processed, avg(r.duration_ms) AS avg_duration_ms,
            (SELECT l.error FROM refresh_runs l
              WHERE l.dataset_id = r.dataset_id AND l.day = r.day AND l.error IS NOT NULL
              ORDER BY l.started_ms DESC, l.seq DESC LIMIT 1) AS last_error
     FROM refresh_runs r JOIN datasets d ON d.id = r.dataset_id LEFT JOIN connections c ON c.id = d.connection_id
     WHERE d.team_id = ? AND r.day BETWEEN ? AND ?
     GROUP BY r.dataset_id, r.day
     ORDER BY r.day DESC, dataset, r.dataset_id`,
  );
  const dashboardUsage = db.prepare<[string, string, string], Row>(
    `SELECT v.day, v.dashboard_id, d.name AS dashboard, count(*) AS views,
            count(DISTINCT ${VISITOR}) AS unique_visitors,
            count(DISTINCT v.user_id) AS signed_in_viewers,
            sum(v.user_id IS NULL) AS anonymous_views
     FROM dashboard_views v JOIN dashboards d ON d.id = v.dashboard_id
     WHERE d.team_id = ? AND v.editor = 0 AND v.day BETWEEN ? AND ?
     GROUP BY v.day, v.dashboard_id
     ORDER BY v.day DESC, dashboard, v.dashboard_id`,
  );
  const creditUsage = db.prepare<[string, string, string], Row>(
    `SELECT day, category, sum(credits) AS credits, count(*) AS uses, count(DISTINCT user_id) AS users
     FROM credit_usage WHERE team_id = ? AND day BETWEEN ? AND ?
     GROUP BY day, category ORDER BY day DESC, category`,
  );
  const apiUsage = db.prepare<[string, string, string], Row & { avg_latency_ms: number }>(
    `SELECT day, method, route, credential_kind, credential_name AS credential,
            count(*) AS calls, sum(status >= 400) AS errors, sum(status >= 500) AS server_errors,
            avg(latency_ms) AS avg_latency_ms
     FROM api_calls WHERE team_id = ? AND day BETWEEN ? AND ?
     GROUP BY day, method, route, credential_kind, credential_id
     ORDER BY day DESC, route, method, credential_kind, credential`,
  );
  const datasetUsage = db.prepare<[string, string], Row & { dashboards: string }>(
    `SELECT all_datasets.id AS dataset_id, all_datasets.name AS dataset, all_datasets.type,
            all_datasets.row_count AS rows, all_datasets.last_refreshed_at, all_datasets.updated_at,
            (SELECT json_group_array(name) FROM (
               SELECT db.name FROM dashboard_datasets dd JOIN dashboards db ON db.id = dd.dashboard_id
               WHERE dd.dataset_id = all_datasets.id ORDER BY db.name)) AS dashboards,
            (SELECT count(*) FROM audit_events a WHERE a.target_id = all_datasets.id AND a.category = 'data_access') AS api_reads
     FROM (
       SELECT id, name, type, next_position - first_position AS row_count, last_refreshed_at, updated_at FROM datasets WHERE team_id = ?
       UNION ALL SELECT id, name, 'input_table', row_count, NULL, updated_at FROM input_tables WHERE team_id = ?
     ) AS all_datasets
     ORDER BY dataset, dataset_id`,
  );
  return {
    "refresh-history": ({ teamId, fromDay, toDay }) =>
      refreshHistory.all(teamId, fromDay, toDay).map((r) => ({ ...r, avg_duration_ms: Math.round(r.avg_duration_ms) })),
    "dashboard-usage": ({ teamId, fromDay, toDay }) => dashboardUsage.all(teamId, fromDay, toDay),
    "credit-usage": ({ teamId, fromDay, toDay }) => creditUsage.all(teamId, fromDay, toDay),
    "api-usage": ({ teamId, fromDay, toDay }) =>
      apiUsage.all(teamId, fromDay, toDay).map((r) => ({ ...r, avg_latency_ms: Math.round(r.avg_latency_ms) })),
    "dataset-usage": ({ teamId }) => datasetUsage.all(teamId, teamId).map((r) => ({ ...r, dashboards: parseJson<string[]>(r.dashboards) })),
  };
}

export function insertDashboardStatement(db: Database.Database): (dashboard: DashboardRecord) => void {
  const insert = db.prepare("INSERT INTO dashboards (id, team_id, name, description, versions, dataset_ids) VALUES (?, ?, ?, ?, ?, ?)");
  const link = db.prepare("INSERT OR IGNORE INTO dashboard_datasets (dashboard_id, dataset_id) VALUES (?, ?)");
  return (d) => {
    insert.run(d.id, d.teamId, d.name, d.description, JSON.stringify(d.versions), JSON.stringify(d.datasetIds));
    for (const datasetId of d.datasetIds) link.run(d.id, datasetId);
  };
}

export function dashboardViewStatement(db: Database.Database): (view: DashboardView) => void {
  const insert = db.prepare("INSERT INTO dashboard_views (dashboard_id, day, at, visitor_id, user_id, editor) VALUES (?, ?, ?, ?, ?, ?)");
  return (v) => {
    insert.run(v.dashboardId, utcDay(v.at), v.at, v.visitorId, v.userId, v.editor ? 1 : 0);
  };
}

export function refreshRunStatement(db: Database.Database): (run: RefreshRun) => void {
  const insert = db.prepare(
    "INSERT INTO refresh_runs (dataset_id, day, started_at, started_ms, duration_ms, rows_processed, error) VALUES (?, ?, ?, ?, ?, ?, ?)",
  );
  return (r) => {
    const started = Date.parse(r.startedAt);
    insert.run(r.datasetId, utcDay(r.startedAt), r.startedAt, Number.isNaN(started) ? 0 : started, r.durationMs, r.rowsProcessed, r.error);
  };
}

export function creditUsageStatement(db: Database.Database): (usage: CreditUsage) => void {
  const insert = db.prepare("INSERT INTO credit_usage (team_id, day, at, category, credits, user_id) VALUES (?, ?, ?, ?, ?, ?)");
  return (c) => {
    insert.run(c.teamId, utcDay(c.at), c.at, c.category, c.credits, c.userId);
  };
}

function apiCallStatement(db: Database.Database): (call: ApiCallRecord) => void {
  const insert = db.prepare(
    `INSERT INTO api_calls (team_id, day, at, credential_kind, credential_id, credential_name, method, route, status, latency_ms)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
  );
  return (c) => {
    insert.run(c.teamId, utcDay(c.at), c.at, c.credentialKind, c.credentialId, c.credentialName, c.method, c.route, c.status, c.latencyMs);
  };
}

function toDashboard(row: DashboardRow): DashboardRecord {
  return {
    id: row.id,
    teamId: row.team_id,
    name: row.name,
    description: row.description,
    versions: parseJson(row.versions),
    datasetIds: parseJson(row.dataset_ids),
  };
}
