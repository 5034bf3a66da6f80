import type { DayWindow } from "../../domain/days.js";
import type { DashboardRecord, DashboardView } from "../../domain/model.js";
import type { IdPage, PutResult } from "./identity.js";

export interface DayViews {
  day: string;
  views: number;
  /** Distinct `visitorId`s that day. */
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

/**
 * Dashboards with their versions, and their page views. Editor views
 * (`editor: true`) are excluded from every view figure. Where rows tie they
 * are ordered by the named text fields in binary (code unit) order, with
 * null before any string.
 * A fault of the store answers 503 `storage_unavailable` (the fault clause on `Storage`).
 */
export interface DashboardStore {
  /** Dashboards of the teams with all versions, in no particular order. */
  listDashboards(teamIds: readonly string[]): Promise<DashboardRecord[]>;
  /** One dashboard with all versions, or null. */
  getDashboard(id: string): Promise<DashboardRecord | null>;
  /** Every dashboard, by id (the admin listing). */
  listAllDashboards(page: IdPage): Promise<DashboardRecord[]>;
  /** Only days of the window that have views, oldest first. */
  viewsByDay(dashboardId: string, window: DayWindow): Promise<DayViews[]>;
  /**
   * Only rows with views, oldest day first, then by `viewer` (binary order),
   * then `viewerId`. A signed-in viewer is grouped by `userId` and named by
   * the user's email (the user id when the user is unknown); all views with
   * `userId` null form one `Anonymous` row per day.
   */
  viewsByViewer(dashboardId: string, window: DayWindow): Promise<ViewerDayViews[]>;
}

/** Dashboards and their views as the host reports them. Each call is atomic and visible to the next read. */
export interface DashboardWrites {
  /** Creates or replaces the dashboard with `dashboard.id`, every version as given. */
  putDashboard(dashboard: DashboardRecord): Promise<PutResult>;
  /**
   * Reads the dashboard `id` (null when there is none), lets `change`
   * compute its new record from it, and stores that record — atomically: no
   * other change of the same dashboard, from any process sharing the store,
   * runs in between, so racing changes each see the one before. When
   * `change` throws, nothing is written and the error is re-thrown.
   * Resolves with the record read and the record stored.
   */
  changeDashboard(
    id: string,
    change: (current: DashboardRecord | null) => DashboardRecord,
  ): Promise<{ before: DashboardRecord | null; after: DashboardRecord }>;
  /** Deletes the dashboard and its views; false when unknown. */
  deleteDashboard(id: string): Promise<boolean>;
  /** Appends page views, all or none. */
  appendDashboardViews(views: readonly DashboardView[]): Promise<void>;
}
