import { utcDay } from "../domain/days.js";
import type { PoolClient } from "pg";
import type { DashboardRecord, DashboardVersion, DashboardView } from "../domain/model.js";
import type { StorageAreas } from "../ports/storage.js";
import { type Db, idPageSql, json, num, PUT_RESULT, putResult } from "./db.js";

/**
 * Dashboards with their versions, and their page views: every figure a GROUP BY in SQL, text ties ordered `COLLATE "C"`
 * (binary, as the port asks) with nulls first.
 */
export function postgresDashboards(db: Db): StorageAreas["dashboards"] {
  const { t } = db;
  return {
    async listDashboards(teamIds) {
      if (teamIds.length === 0) return [];
      const rows = await db.query<DashboardRow>(
        `select ${DASHBOARD_COLUMNS} from ${t("dashboards")} where team_id = any($1)`,
        [[...teamIds]],
      );
      return rows.map(toDashboard);
    },
    async getDashboard(id) {
      const [row] = await db.query<DashboardRow>(`select ${DASHBOARD_COLUMNS} from ${t("dashboards")} where id = $1`, [
        id,
      ]);
      return row ? toDashboard(row) : null;
    },
    async viewsByDay(dashboardId, window) {
      const rows = await db.query<{ day: string; views: string; unique_visitors: string }>(
        `select day, count(*) as views, count(distinct visitor_id) as unique_visitors
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
    async listAllDashboards(page) {
      const params: unknown[] = [];
      const rows = await db.query<DashboardRow>(
        `select ${DASHBOARD_COLUMNS} from ${t("dashboards")}${idPageSql(page, params)}`,
        params,
      );
      return rows.map(toDashboard);
    },
    async putDashboard(dashboard) {
      return putResult(await upsertDashboard(db.pool, t, dashboard));
    },
    async changeDashboard(id, change) {
      return db.transaction(async (client) => {
        // Changes of one dashboard, from every instance, one at a time (the row may not exist yet to lock).
        await client.query("select pg_advisory_xact_lock(hashtextextended($1, 0))", [
          `dataport:dashboard:${db.schema}:${id}`,
        ]);
        const found = await client.query<DashboardRow>(
          `select ${DASHBOARD_COLUMNS} from ${t("dashboards")} where id = $1`,
          [id],
        );
        const before = found.rows[0] ? toDashboard(found.rows[0]) : null;
        const after = change(found.rows[0] ? toDashboard(found.rows[0]) : null);
        await upsertDashboard(client, t, after);
        return { before, after };
      });
    },
    async deleteDashboard(id) {
      return db.transaction(async (client) => {
        const deleted = await client.query(`delete from ${t("dashboards")} where id = $1`, [id]);
        if (deleted.rowCount === 0) return false;
        await client.query(`delete from ${t("dashboard_views")} where dashboard_id = $1`, [id]);
        return true;
      });
    },
    // Each append is one INSERT statement: all or none.
    async appendDashboardViews(views) {
      await insertDashboardViews(db.pool, t, views);
    },
  };
}

/** A pool or a client in a transaction. */
type Queryable = Pick<PoolClient, "query">;

/** Creates or replaces a dashboard; `created` tells which. */
export async function upsertDashboard(
  client: Queryable,
  t: Db["t"],
  d: DashboardRecord,
): Promise<Array<{ created: boolean }>> {
  const result = await client.query<{ created: boolean }>(
    `insert into ${t("dashboards")} (${DASHBOARD_COLUMNS}) values ($1, $2, $3, $4, $5, $6)
     on conflict (id) do update set team_id = excluded.team_id, name = excluded.name, description = excluded.description,
       versions = excluded.versions, dataset_ids = excluded.dataset_ids
     returning ${PUT_RESULT}`,
    [d.id, d.teamId, d.name, d.description, json(d.versions), json(d.datasetIds)],
  );
  return result.rows;
}

/**
 * The append statements: one INSERT each (atomic on its own), rows in the
 * given order (json_to_recordset yields them in array order, so `seq`
 * follows it: "the one stored last" of refresh-history).
 */
export async function insertDashboardViews(
  client: Queryable,
  t: Db["t"],
  views: readonly DashboardView[],
): Promise<void> {
  if (views.length === 0) return;
  await client.query(
    `insert into ${t("dashboard_views")} (dashboard_id, at, day, visitor_id, user_id, editor)
     select "dashboardId", at, day, "visitorId", "userId", coalesce(editor, false) from json_to_recordset($1)
       as x("dashboardId" text, at text, day text, "visitorId" text, "userId" text, editor boolean)`,
    [json(views.map((v) => ({ ...v, day: utcDay(v.at) })))],
  );
}

const DASHBOARD_COLUMNS = "id, team_id, name, description, versions, dataset_ids";

interface DashboardRow {
  id: string;
  team_id: string;
  name: string;
  description: string | null;
  versions: DashboardVersion[];
  dataset_ids: string[];
}

function toDashboard(r: DashboardRow): DashboardRecord {
  return {
    id: r.id,
    teamId: r.team_id,
    name: r.name,
    description: r.description,
    versions: r.versions,
    datasetIds: r.dataset_ids,
  };
}
