import type { DashboardRecord, DashboardVersion } from "./model.js";

/** The current version of a dashboard: the highest `version`. */
export function currentVersion(dashboard: DashboardRecord): DashboardVersion {
  return dashboard.versions.reduce((a, b) => (b.version > a.version ? b : a));
}
