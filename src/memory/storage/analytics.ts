import type { AnalyticsStore } from "../../ports/storage/analytics.js";
import { cloneJson, type MemoryState } from "./state.js";

// TODO(issue 3): dashboards, views and space aggregates.
export function memoryAnalytics(state: MemoryState): AnalyticsStore {
  const pending = (): never => {
    throw new Error("dashboards and space activity are not implemented yet");
  };
  return {
    listDashboards: pending,
    getDashboard: pending,
    viewsByDay: pending,
    viewsByViewer: pending,
    spaceRows: pending,
    async recordRefreshRun(run) {
      state.refreshRuns.push(cloneJson(run));
    },
    async recordApiCall(call) {
      state.apiCalls.push(call);
    },
  };
}
