import { utcDay } from "../../domain/days.js";
import { tableAsDataset } from "../../domain/rows.js";
import { currentVersion } from "../../domain/dashboards.js";
import type { DashboardView } from "../../domain/model.js";
import type { DayWindow } from "../../domain/days.js";
import {
  type ApiUsageRow,
  countCall,
  type CreditUsageRow,
  type DashboardUsageRow,
  type DatasetUsageRow,
  isDatasetRead,
  type RefreshHistoryRow,
  usageCounterFor,
} from "../../ports/storage/usage.js";
import type { StorageAreas } from "../../ports/storage.js";
import { appendAll, compare, distinct, groupBy, sum, viewsIn } from "./aggregate.js";
import { cloneJson, type MemoryState } from "./state.js";

/** The space aggregates, refresh runs, credit usage and the API usage log, computed over the state's arrays. */
export function memoryUsage(state: MemoryState): StorageAreas["usage"] {
  const viewsOf = (dashboardIds: ReadonlySet<string>, window: DayWindow) => viewsIn(state, dashboardIds, window);
  const teamDatasets = (teamId: string) => {
    const out = new Map<string, { name: string; connectionId: string | null }>();
    for (const d of state.datasets.values()) if (d.teamId === teamId) out.set(d.id, d);
    for (const t of state.tables.values()) if (t.teamId === teamId) out.set(t.id, tableAsDataset(t));
    return out;
  };
  const connectionName = (id: string | null) => (id ? (state.connections.get(id)?.name ?? null) : null);
  return {
    async spaceDashboardUsage({ teamId, ...window }) {
      const dashboards = new Map(
        [...state.dashboards.values()].filter((d) => d.teamId === teamId).map((d) => [d.id, d]),
      );
      const groups = groupBy(viewsOf(new Set(dashboards.keys()), window), ({ view, day }) => [day, view.dashboardId]);
      return [...groups.values()]
        .map((group): DashboardUsageRow => {
          const { view, day } = group[0]!;
          const dashboard = dashboards.get(view.dashboardId)!;
          const views = group.map((g) => g.view);
          return {
            day,
            dashboard_id: dashboard.id,
            dashboard: dashboard.name,
            published: currentVersion(dashboard).published,
            views: views.length,
            unique_visitors: distinct(views, (v) => v.visitorId),
            signed_in_viewers: distinct(
              views.filter((v) => v.userId !== null),
              (v) => v.userId,
            ),
            anonymous_views: views.filter((v: DashboardView) => v.userId === null).length,
          };
        })
        .sort(
          (a, b) =>
            compare(b.day, a.day) || compare(a.dashboard, b.dashboard) || compare(a.dashboard_id, b.dashboard_id),
        );
    },
    async spaceRefreshHistory({ teamId, ...window }) {
      const datasets = teamDatasets(teamId);
      const runs = state.refreshRuns.flatMap((run, position) => {
        if (!datasets.has(run.datasetId)) return [];
        const day = utcDay(run.startedAt);
        return day >= window.fromDay && day <= window.toDay ? [{ run, day, position }] : [];
      });
      return [...groupBy(runs, ({ run, day }) => [day, run.datasetId]).values()]
        .map((group): RefreshHistoryRow => {
          const { run, day } = group[0]!;
          const dataset = datasets.get(run.datasetId)!;
          const failed = group.filter((g) => g.run.error !== null);
          const last = failed.reduce<(typeof failed)[number] | null>(
            (latest, g) => (latest && later(latest, g) ? latest : g),
            null,
          );
          return {
            dataset_id: run.datasetId,
            dataset: dataset.name,
            connection: connectionName(dataset.connectionId),
            day,
            runs: group.length,
            failures: failed.length,
            rows_processed: sum(group.map((g) => g.run.rowsProcessed)),
            avg_duration_ms: Math.round(sum(group.map((g) => g.run.durationMs)) / group.length),
            last_error: last?.run.error ?? null,
          };
        })
        .sort((a, b) => compare(b.day, a.day) || compare(a.dataset, b.dataset) || compare(a.dataset_id, b.dataset_id));
    },
    async spaceCreditUsage({ teamId, ...window }) {
      const uses = state.creditUsage.flatMap((use) => {
        if (use.teamId !== teamId) return [];
        const day = utcDay(use.at);
        return day >= window.fromDay && day <= window.toDay ? [{ use, day }] : [];
      });
      return [...groupBy(uses, ({ use, day }) => [day, use.category]).values()]
        .map((group): CreditUsageRow => ({
          day: group[0]!.day,
          category: group[0]!.use.category,
          credits: sum(group.map((g) => g.use.credits)),
          uses: group.length,
          users: distinct(
            group.filter((g) => g.use.userId !== null),
            (g) => g.use.userId,
          ),
        }))
        .sort((a, b) => compare(b.day, a.day) || compare(a.category, b.category));
    },
    async spaceApiUsage({ teamId, ...window }) {
      return [...state.apiUsage.values()]
        .flatMap((byCredential) => [...byCredential.values()].flat())
        .filter((u) => u.teamId === teamId && u.day >= window.fromDay && u.day <= window.toDay)
        .map((u): ApiUsageRow => ({
          day: u.day,
          method: u.method,
          route: u.route,
          credential_kind: u.credentialKind,
          credential_id: u.credentialId,
          credential: u.credentialName,
          calls: u.calls,
          errors: u.errors,
          server_errors: u.serverErrors,
          avg_latency_ms: Math.round(u.latencySum / u.calls),
        }))
        .sort(
          (a, b) =>
            compare(b.day, a.day) ||
            compare(a.route, b.route) ||
            compare(a.method, b.method) ||
            compare(a.credential_kind, b.credential_kind) ||
            compare(a.credential, b.credential) ||
            compare(a.credential_id, b.credential_id),
        );
    },
    async spaceDatasetUsage({ teamId }) {
      const dashboards = [...state.dashboards.values()].filter((d) => d.teamId === teamId);
      const latestRun = new Map<string, { startedAt: number; error: string | null }>();
      for (const run of state.refreshRuns) {
        const startedAt = Date.parse(run.startedAt);
        const seen = latestRun.get(run.datasetId);
        if (!seen || startedAt >= seen.startedAt) latestRun.set(run.datasetId, { startedAt, error: run.error });
      }
      const rows = [
        ...[...state.datasets.values()].filter((d) => d.teamId === teamId),
        ...[...state.tables.values()].filter((t) => t.teamId === teamId).map(tableAsDataset),
      ].map((d): DatasetUsageRow => {
        const reads = state.datasetReads.get(d.id);
        return {
          dataset_id: d.id,
          dataset: d.name,
          type: d.type,
          connection: connectionName(d.connectionId),
          row_count: d.rowCount,
          column_count: d.columns.length,
          last_refreshed_at: d.lastRefreshedAt,
          updated_at: d.updatedAt,
          last_refresh_error: latestRun.get(d.id)?.error ?? null,
          dashboards: dashboards
            .filter((b) => b.datasetIds.includes(d.id))
            .map((b) => b.name)
            .sort(compare),
          api_reads: reads?.count ?? 0,
          last_api_read_at: reads?.lastAt ?? null,
        };
      });
      return rows.sort((a, b) => compare(a.dataset, b.dataset) || compare(a.dataset_id, b.dataset_id));
    },
    async recordRefreshRun(run) {
      state.refreshRuns.push(cloneJson(run));
    },
    // The log is kept as per-day counters (what api-usage and dataset-usage
    // report), so a long-running memory store does not grow with every call.
    // Counted at once: the promise is already settled.
    recordApiCall(call) {
      const day = utcDay(call.at);
      let byCredential = state.apiUsage.get(call.route);
      if (!byCredential) state.apiUsage.set(call.route, (byCredential = new Map()));
      let counters = byCredential.get(call.credentialId);
      if (!counters) byCredential.set(call.credentialId, (counters = []));
      let usage = counters.findLast(
        (c) =>
          c.day === day &&
          c.teamId === call.teamId &&
          c.method === call.method &&
          c.credentialKind === call.credentialKind &&
          c.credentialName === call.credentialName,
      );
      if (!usage) {
        usage = usageCounterFor(call, day);
        counters.push(usage);
      }
      countCall(usage, call);
      if (isDatasetRead(call)) {
        const reads = state.datasetReads.get(call.objectId) ?? { count: 0, lastAt: null };
        reads.count++;
        if (reads.lastAt === null || Date.parse(call.at) >= Date.parse(reads.lastAt)) reads.lastAt = call.at;
        state.datasetReads.set(call.objectId, reads);
      }
      return COUNTED;
    },
    async appendRefreshRuns(runs) {
      appendAll(state.refreshRuns, runs.map(cloneJson));
    },
    async appendCreditUsage(items) {
      appendAll(state.creditUsage, items.map(cloneJson));
    },
  };
}

/** Whether run `a` is later than `b` (by start, then by stored position). */
function later(
  a: { run: { startedAt: string }; position: number },
  b: { run: { startedAt: string }; position: number },
): boolean {
  const diff = Date.parse(a.run.startedAt) - Date.parse(b.run.startedAt);
  return diff !== 0 ? diff > 0 : a.position > b.position;
}

/** What `recordApiCall` answers: the call is counted before it returns. */
const COUNTED: Promise<void> = Promise.resolve();
