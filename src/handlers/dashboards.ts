import { resolveTeam } from "../core/access.js";
import { planRequired } from "../core/auth.js";
import type { AuthedContext } from "../context/handler.js";
import { currentVersion } from "../domain/dashboards.js";
import { dayWindow, daysOf } from "../domain/days.js";
import type { DashboardRecord } from "../domain/model.js";
import { notFound } from "../base/api-error.js";

/** A dashboard as the API shows it: its current version only. */
export function dashboardView(dashboard: DashboardRecord, viewUrl: string) {
  const current = currentVersion(dashboard);
  return {
    id: dashboard.id,
    name: dashboard.name,
    description: dashboard.description,
    published: current.published,
    publishedUrl: current.published ? `${viewUrl}/d/${encodeURIComponent(dashboard.id)}` : null,
    version: current.version,
    createdAt: current.createdAt,
    updatedAt: current.updatedAt,
    publishedAt: current.publishedAt,
  };
}

/**
 * GET /dashboards: the team's dashboards, current versions only, newest
 * first (by the current version's `createdAt`, then id). Dashboards are not
 * in key allowlists: a key sees its own team's.
 */
export async function listDashboards(ctx: AuthedContext, teamId: string | undefined) {
  const team = await resolveTeam(ctx.credential, teamId, ctx.storage);
  const dashboards = (await ctx.storage.dashboards.listDashboards([team.id])).map((d) =>
    dashboardView(d, ctx.settings.viewUrl),
  );
  dashboards.sort(
    (a, b) => Date.parse(b.createdAt) - Date.parse(a.createdAt) || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0),
  );
  return { dashboards };
}

/**
 * A dashboard in the credential's boundary (a key's own team, a session's
 * memberships), or the same 404 as an unknown id. A session on a Free-plan
 * team: 403.
 */
export async function reachableDashboard(ctx: AuthedContext, id: string): Promise<DashboardRecord> {
  const { credential, storage } = ctx;
  const dashboard = await storage.dashboards.getDashboard(id);
  const inBoundary =
    dashboard !== null &&
    (credential.kind === "api-key"
      ? dashboard.teamId === credential.team.id
      : credential.memberships.some((m) => m.teamId === dashboard.teamId));
  if (!dashboard || !inBoundary) throw notFound("dashboard");
  if (credential.kind === "session-token" && (await storage.identity.getTeam(dashboard.teamId))?.plan === "free")
    throw planRequired();
  return dashboard;
}

export interface ViewsQuery {
  days: number;
  by: "day" | "viewer";
}

/**
 * GET /dashboards/{id}/views: aggregates from storage over the N UTC days
 * ending today. `by=day` fills every day of the window (zeros included);
 * `by=viewer` lists only rows with views.
 */
export async function dashboardViews(ctx: AuthedContext, id: string, query: ViewsQuery) {
  const dashboard = await reachableDashboard(ctx, id);
  const window = dayWindow(ctx.clock.now(), query.days);
  const [byDay, byViewer] = await Promise.all([
    ctx.storage.dashboards.viewsByDay(dashboard.id, window),
    query.by === "viewer" ? ctx.storage.dashboards.viewsByViewer(dashboard.id, window) : null,
  ]);
  const totals = {
    views: byDay.reduce((n, d) => n + d.views, 0),
    uniqueVisitorsByDay: byDay.reduce((n, d) => n + d.uniqueVisitors, 0),
  };
  const head = { dashboardId: dashboard.id, name: dashboard.name, days: query.days };
  if (byViewer) {
    return {
      ...head,
      by: "viewer" as const,
      totals,
      series: byViewer.map(({ day, viewerId, viewer, views }) => ({ day, viewerId, viewer, views })),
    };
  }
  const found = new Map(byDay.map((d) => [d.day, d]));
  const series = daysOf(window).map((day) => {
    const d = found.get(day);
    return { day, views: d?.views ?? 0, uniqueVisitors: d?.uniqueVisitors ?? 0 };
  });
  return { ...head, totals, series };
}
