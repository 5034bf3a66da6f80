import type { DashboardRecord, DashboardVersion, Row } from "../domain/model.js";
import type { AnalyticsStore, SpaceObject } from "../ports/storage/analytics.js";
import { type Db, dayOf, num } from "./db.js";
import { millis } from "./identity.js";

/** Dashboards, views, refresh runs, credits and the API usage log. Every figure is a GROUP BY in SQL. */
export function postgresAnalytics(db: Db, log: (message: string, error: unknown) => void): AnalyticsStore {
  const { t } = db;
  return {
    async listDashboards(teamIds) {
      if (teamIds.length === 0) return [];
      const rows = await db.query<DashboardRow>(`select * from ${t("dashboards")} where team_id = any($1) order by id collate "C"`, [[...teamIds]]);
      return rows.map(toDashboard);
    },
    async getDashboard(id) {
      const [row] = await db.query<DashboardRow>(`select * from ${t("dashboards")} where id = $1`, [id]);
      return row ? toDashboard(row) : null;
    },
    async viewsByDay(dashboardId, window) {
      const rows = await db.query<{ day: string; views: string; unique_visitors: string }>(
        `select day, count(*) as views, count(distinct ${visitor}) as unique_visitors
           from ${t("dashboard_views")}
          where dashboard_id = $1 and not editor and day between $2 and $3
          group by day order by day`,
        [dashboardId, window.fromDay, window.toDay],
      );
      return rows.map((r) => ({ day: r.day, views: num(r.views), uniqueVisitors: num(r.unique_visitors) }));
    },
    async viewsByViewer(dashboardId, window) {
      const rows = await db.query<{ day: string; viewer_id: string | null; viewer: string; views: string }>(
        `select * from (
           select v.day, v.user_id as viewer_id, case when v.user_id is null then 'Anonymous' else coalesce(u.email, v.user_id) end as viewer,
                  count(*) as views
             from ${t("dashboard_views")} v left join ${t("users")} u on u.id = v.user_id
            where v.dashboard_id = $1 and not v.editor and v.day between $2 and $3
            group by v.day, v.user_id, u.email) x
          order by day, viewer collate "C", viewer_id collate "C" nulls first`,
        [dashboardId, window.fromDay, window.toDay],
      );
      return rows.map((r) => ({ day: r.day, viewerId: r.viewer_id, viewer: r.viewer, views: num(r.views) }));
    },
    async spaceRows(object, query) {
      const params = [query.teamId, query.fromDay, query.toDay];
      const sql = SPACE_SQL[object](t);
      const rows = await db.query(sql, object === "dataset-usage" ? [query.teamId] : params);
      return rows.map((r) => SPACE_ROW[object](r));
    },
    async recordRefreshRun(run) {
      await db.query(
        `insert into ${t("refresh_runs")} (dataset_id, started_at, started_ms, day, duration_ms, rows_processed, error) values ($1, $2, $3, $4, $5, $6, $7)`,
        [run.datasetId, run.startedAt, millis(run.startedAt), dayOf(run.startedAt), run.durationMs, run.rowsProcessed, run.error],
      );
    },
    async recordApiCall(call) {
      try {
        await db.query(
          `insert into ${t("api_calls")} (at, day, team_id, credential_kind, credential_id, credential_name, method, route, status, latency_ms)
           values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
          [call.at, dayOf(call.at), call.teamId, call.credentialKind, call.credentialId, call.credentialName, call.method, call.route, call.status, call.latencyMs],
        );
      } catch (error) {
        // The usage log never fails a request.
        log("recording an API call failed", error);
      }
    },
  };
}

/** A distinct viewer: the signed-in user, else the visitor. */
const visitor = `coalesce('u:' || user_id, 'v:' || visitor_id)`;

type Sql = (t: Db["t"]) => string;

/** One query per space object; $1 team, $2 first day, $3 last day (inclusive). */
const SPACE_SQL: Record<SpaceObject, Sql> = {
  "dashboard-usage": (t) => `
    select v.day, d.id as dashboard_id, d.name as dashboard, count(*) as views,
           count(distinct ${visitor}) as unique_viewers,
           count(*) filter (where v.user_id is null) as anonymous_views
      from ${t("dashboard_views")} v join ${t("dashboards")} d on d.id = v.dashboard_id
     where d.team_id = $1 and not v.editor and v.day between $2 and $3
     group by v.day, d.id, d.name
     order by v.day desc, d.name collate "C", d.id collate "C"`,
  "refresh-history": (t) => `
    select d.id as dataset_id, d.name as dataset, c.name as connection, r.day, count(*) as runs,
           count(*) filter (where r.error is not null) as failures,
           sum(r.rows_processed) as rows_processed, round(avg(r.duration_ms)) as avg_duration_ms,
           (array_agg(r.error order by r.started_ms desc, r.seq desc) filter (where r.error is not null))[1] as last_error
      from ${t("refresh_runs")} r join ${t("datasets")} d on d.id = r.dataset_id
      left join ${t("connections")} c on c.id = d.connection_id
     where d.team_id = $1 and r.day between $2 and $3
     group by r.day, d.id, d.name, c.name
     order by r.day desc, d.name collate "C", d.id collate "C"`,
  "credit-usage": (t) => `
    select day, category, sum(credits) as credits, count(*) as events, count(distinct user_id) as users
      from ${t("credit_usage")}
     where team_id = $1 and day between $2 and $3
     group by day, category
     order by day desc, category collate "C"`,
  "api-usage": (t) => `
    select day, method, route, credential_kind, credential_name as credential, count(*) as calls,
           count(*) filter (where status >= 400) as errors, count(*) filter (where status >= 500) as server_errors,
           round(avg(latency_ms)) as avg_latency_ms
      from ${t("api_calls")}
     where team_id = $1 and day between $2 and $3
     group by day, method, route, credential_kind, credential_name
     order by day desc, route collate "C", method collate "C", credential_name collate "C"`,
  "dataset-usage": (t) => `
    select d.id as dataset_id, d.name as dataset, d.type, d.row_count, d.last_refreshed_at, d.updated_at,
           coalesce((select json_agg(b.name order by b.name collate "C") from ${t("dashboards")} b
                      where b.team_id = d.team_id and (b.dataset_ids::jsonb) ? d.id), '[]'::json) as dashboards,
           (select count(*) from ${t("audit_events")} a
             where a.team_id = d.team_id and a.category = 'data_access' and a.event -> 'target' ->> 'id' = d.id) as api_reads
      from (select id, team_id, name, type, row_count, last_refreshed_at, updated_at from ${t("datasets")}
            union all
            select id, team_id, name, 'input_table', row_count, null, updated_at from ${t("input_tables")}) d
     where d.team_id = $1
     order by d.name collate "C", d.id collate "C"`,
};

/** Typed rows with a fixed field order (counts arrive as strings from int8). */
const SPACE_ROW: Record<SpaceObject, (r: Record<string, unknown>) => Row> = {
  "dashboard-usage": (r) => ({
    day: r.day,
    dashboard_id: r.dashboard_id,
    dashboard: r.dashboard,
    views: num(r.views),
    unique_viewers: num(r.unique_viewers),
    anonymous_views: num(r.anonymous_views),
  }),
  "refresh-history": (r) => ({
    dataset_id: r.dataset_id,
    dataset: r.dataset,
    connection: r.connection ?? null,
    day: r.day,
    runs: num(r.runs),
    failures: num(r.failures),
    rows_processed: num(r.rows_processed),
    avg_duration_ms: num(r.avg_duration_ms),
    last_error: r.last_error ?? null,
  }),
  "credit-usage": (r) => ({ day: r.day, category: r.category, credits: num(r.credits), events: num(r.events), users: num(r.users) }),
  "api-usage": (r) => ({
    day: r.day,
    method: r.method,
    route: r.route,
    credential_kind: r.credential_kind,
    credential: r.credential ?? null,
    calls: num(r.calls),
    errors: num(r.errors),
    server_errors: num(r.server_errors),
    avg_latency_ms: num(r.avg_latency_ms),
  }),
  "dataset-usage": (r) => ({
    dataset_id: r.dataset_id,
    dataset: r.dataset,
    type: r.type,
    row_count: num(r.row_count),
    last_refreshed_at: r.last_refreshed_at ?? null,
    updated_at: r.updated_at,
    dashboards: r.dashboards,
    api_reads: num(r.api_reads),
  }),
};

interface DashboardRow {
  id: string;
  team_id: string;
  name: string;
  description: string | null;
  versions: DashboardVersion[];
  dataset_ids: string[];
}

function toDashboard(r: DashboardRow): DashboardRecord {
  return { id: r.id, teamId: r.team_id, name: r.name, description: r.description, versions: r.versions, datasetIds: r.dataset_ids };
}
