import type * as Database from "./driver.js";
import { utcDay } from "../domain/days.js";
import type { DashboardRecord, DashboardView } from "../domain/model.js";
import type { StorageAreas } from "../ports/storage.js";
import type { DashboardWrites, DayViews, ViewerDayViews } from "../ports/storage/dashboards.js";
import type { PutResult } from "../ports/storage/identity.js";
import { parseJson, type SqliteHandle, writeTransaction } from "./db.js";
import { idPageQuery } from "./identity.js";

/**
 * Dashboards with their versions, and their page views. Every figure is a
 * GROUP BY over an index on (dashboard, day); days are UTC days computed once
 * when a view is stored, and editor views are excluded through the partial
 * index's own condition. Ties are broken in BINARY collation order, NULL
 * first, as the port asks.
 */
export function sqliteDashboards({ db }: SqliteHandle): StorageAreas["dashboards"] {
  const dashboards = db.prepare<[string], DashboardRow>(
    "SELECT * FROM dashboards WHERE team_id IN (SELECT value FROM json_each(?))",
  );
  const dashboard = db.prepare<[string], DashboardRow>("SELECT * FROM dashboards WHERE id = ?");
  const byDay = db.prepare<[string, string, string], DayViews>(
    `SELECT day, count(*) AS views, count(DISTINCT visitor_id) AS uniqueVisitors
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
  const dashboardPage = idPageQuery<DashboardRow>(db, "SELECT * FROM dashboards");
  const writes = dashboardWrites(db);
  return {
    async listDashboards(teamIds) {
      return dashboards.all(JSON.stringify(teamIds)).map(toDashboard);
    },
    async getDashboard(id) {
      const row = dashboard.get(id);
      return row ? toDashboard(row) : null;
    },
    async listAllDashboards(page) {
      return dashboardPage(page).map(toDashboard);
    },
    async viewsByDay(dashboardId, { fromDay, toDay }) {
      return byDay.all(dashboardId, fromDay, toDay);
    },
    async viewsByViewer(dashboardId, { fromDay, toDay }) {
      return byViewer.all(dashboardId, fromDay, toDay);
    },
    ...writes,
  };
}

interface DashboardRow {
  id: string;
  team_id: string;
  name: string;
  description: string | null;
  versions: string;
  dataset_ids: string;
}

/** Dashboards and their views: each call one IMMEDIATE transaction. */
function dashboardWrites(db: Database.Database): DashboardWrites {
  const exists = db.prepare<[string], number>("SELECT 1 FROM dashboards WHERE id = ?").pluck();
  const removeDashboard = db.prepare<[string]>("DELETE FROM dashboards WHERE id = ?");
  const removeLinks = db.prepare<[string]>("DELETE FROM dashboard_datasets WHERE dashboard_id = ?");
  const removeViews = db.prepare<[string]>("DELETE FROM dashboard_views WHERE dashboard_id = ?");
  const insertDashboard = insertDashboardStatement(db);
  const view = dashboardViewStatement(db);
  const put = writeTransaction(db, (d: DashboardRecord): PutResult => {
    const created = exists.get(d.id) === undefined;
    removeDashboard.run(d.id);
    removeLinks.run(d.id);
    insertDashboard(d);
    return created ? "created" : "updated";
  });
  const read = db.prepare<[string], DashboardRow>("SELECT * FROM dashboards WHERE id = ?");
  // One IMMEDIATE transaction: the write lock is held from the read on, in every process on the file.
  const change = writeTransaction(db, (id: string, compute: (current: DashboardRecord | null) => DashboardRecord) => {
    const row = read.get(id);
    const before = row ? toDashboard(row) : null;
    const after = compute(before === null ? null : toDashboard(row!));
    removeDashboard.run(id);
    removeLinks.run(id);
    insertDashboard(after);
    return { before, after };
  });
  const remove = writeTransaction(db, (id: string): boolean => {
    if (removeDashboard.run(id).changes === 0) return false;
    removeLinks.run(id);
    removeViews.run(id);
    return true;
  });
  const views = writeTransaction(db, (items: readonly DashboardView[]) => {
    for (const item of items) view(item);
  });
  return {
    async putDashboard(dashboard) {
      return put(dashboard);
    },
    async changeDashboard(id, compute) {
      return change(id, compute);
    },
    async deleteDashboard(id) {
      return remove(id);
    },
    async appendDashboardViews(items) {
      await views(items);
    },
  };
}

export function insertDashboardStatement(db: Database.Database): (dashboard: DashboardRecord) => void {
  const insert = db.prepare(
    "INSERT INTO dashboards (id, team_id, name, description, versions, dataset_ids) VALUES (?, ?, ?, ?, ?, ?)",
  );
  const link = db.prepare("INSERT OR IGNORE INTO dashboard_datasets (dashboard_id, dataset_id) VALUES (?, ?)");
  return (d) => {
    insert.run(d.id, d.teamId, d.name, d.description, JSON.stringify(d.versions), JSON.stringify(d.datasetIds));
    for (const datasetId of d.datasetIds) link.run(d.id, datasetId);
  };
}

export function dashboardViewStatement(db: Database.Database): (view: DashboardView) => void {
  const insert = db.prepare(
    "INSERT INTO dashboard_views (dashboard_id, day, at, visitor_id, user_id, editor) VALUES (?, ?, ?, ?, ?, ?)",
  );
  return (v) => {
    insert.run(v.dashboardId, utcDay(v.at), v.at, v.visitorId, v.userId, v.editor ? 1 : 0);
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
