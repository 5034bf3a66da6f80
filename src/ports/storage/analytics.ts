import type { ApiCallRecord, DashboardRecord, RefreshRun, Row } from "../../domain/model.js";

/** An inclusive window of UTC days, `YYYY-MM-DD`. */
export interface DayWindow {
  fromDay: string;
  toDay: string;
}

export interface DayViews {
  day: string;
  views: number;
  uniqueVisitors: number;
}

export interface ViewerDayViews {
  day: string;
  /** User id; null for public-link (anonymous) viewers, who form one row per day. */
  viewerId: string | null;
  /** The user's email, or `Anonymous`. */
  viewer: string;
  views: number;
}

/** The space objects of GET /space/{object}. */
export type SpaceObject = "dashboard-usage" | "refresh-history" | "credit-usage" | "api-usage" | "dataset-usage";

/**
 * Dashboards, view statistics, refresh runs, credit usage and the API usage
 * log. Every aggregate is computed by storage (GROUP BY in SQL stores); the
 * handlers never pull raw events to count them. Editor views are excluded
 * from every view figure.
 */
export interface AnalyticsStore {
  /** Dashboards of the teams with all versions. */
  listDashboards(teamIds: readonly string[]): Promise<DashboardRecord[]>;
  getDashboard(id: string): Promise<DashboardRecord | null>;
  /** Only days that have views, oldest first. */
  viewsByDay(dashboardId: string, window: DayWindow): Promise<DayViews[]>;
  /** Only rows with views, oldest day first, then by viewer. */
  viewsByViewer(dashboardId: string, window: DayWindow): Promise<ViewerDayViews[]>;
  /** Rows of a space object, sorted by day descending where there is a day. */
  spaceRows(object: SpaceObject, query: { teamId: string } & DayWindow): Promise<Row[]>;
  recordRefreshRun(run: RefreshRun): Promise<void>;
  /** Append to the API usage log. Never throws into a request (the caller does not await it on the critical path). */
  recordApiCall(call: ApiCallRecord): Promise<void>;
}
