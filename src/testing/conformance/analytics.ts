import type { ConformanceOptions, StorageFactory } from "./harness.js";
import { describeDashboardsConformance } from "./dashboards.js";
import { describeUsageConformance } from "./usage.js";

/** The dashboards and usage areas together (what was one `analytics` area): both suites. */
export function describeAnalyticsConformance(name: string, factory: StorageFactory, options: ConformanceOptions = {}): void {
  describeDashboardsConformance(name, factory, options);
  describeUsageConformance(name, factory, options);
}
