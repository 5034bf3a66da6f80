import type { DayWindow } from "../../domain/days.js";
import type { DayViews, ViewerDayViews } from "../../ports/storage/dashboards.js";
import type { StorageAreas } from "../../ports/storage.js";
import { pageById } from "./order.js";
import { appendAll, compare, distinct, groupBy, viewsIn } from "./aggregate.js";
import { cloneJson, type MemoryState } from "./state.js";

/** Dashboards with their versions, and their view statistics, computed over the state's arrays. */
export function memoryDashboards(state: MemoryState): StorageAreas["dashboards"] {
  const viewsOf = (dashboardIds: ReadonlySet<string>, window: DayWindow) => viewsIn(state, dashboardIds, window);
  return {
    async listDashboards(teamIds) {
      const teams = new Set(teamIds);
      return [...state.dashboards.values()].filter((d) => teams.has(d.teamId)).map((d) => cloneJson(d));
    },
    async getDashboard(id) {
      const dashboard = state.dashboards.get(id);
      return dashboard ? cloneJson(dashboard) : null;
    },
    async listAllDashboards(page) {
      return pageById(state.dashboards.values(), page).map(cloneJson);
    },
    async viewsByDay(dashboardId, window) {
      const days = groupBy(viewsOf(new Set([dashboardId]), window), ({ day }) => [day]);
      return [...days.values()]
        .map((group): DayViews => ({
          day: group[0]!.day,
          views: group.length,
          uniqueVisitors: distinct(group, ({ view }) => view.visitorId),
        }))
        .sort((a, b) => compare(a.day, b.day));
    },
    async viewsByViewer(dashboardId, window) {
      const groups = groupBy(viewsOf(new Set([dashboardId]), window), ({ view, day }) => [day, view.userId]);
      return [...groups.values()]
        .map((group): ViewerDayViews => {
          const { view, day } = group[0]!;
          const viewer = view.userId === null ? "Anonymous" : (state.users.get(view.userId)?.email ?? view.userId);
          return { day, viewerId: view.userId, viewer, views: group.length };
        })
        .sort((a, b) => compare(a.day, b.day) || compare(a.viewer, b.viewer) || compare(a.viewerId, b.viewerId));
    },
    async putDashboard(dashboard) {
      const result = state.dashboards.has(dashboard.id) ? "updated" : "created";
      state.dashboards.set(dashboard.id, cloneJson(dashboard));
      return result;
    },
    async changeDashboard(id, change) {
      // One call runs to its end before another starts: nothing comes between the read and the write.
      const stored = state.dashboards.get(id);
      const before = stored ? cloneJson(stored) : null;
      const after = change(before === null ? null : cloneJson(before));
      state.dashboards.set(id, cloneJson(after));
      return { before, after: cloneJson(after) };
    },
    async deleteDashboard(id) {
      if (!state.dashboards.delete(id)) return false;
      state.dashboardViews = state.dashboardViews.filter((view) => view.dashboardId !== id);
      return true;
    },
    // Each append copies everything first, then stores it in one step: all or none.
    async appendDashboardViews(views) {
      appendAll(state.dashboardViews, views.map(cloneJson));
    },
  };
}
