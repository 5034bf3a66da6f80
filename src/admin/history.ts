import type { z } from "zod";
import { eventId } from "../domain/crypto.js";
import type { AuditEvent, CreditUsage, DashboardView, RefreshRun } from "../domain/model.js";
import { assertWritable } from "../storage/mount.js";
import { type AdminDeps, actorFor, type ChangeOptions, checkId, recordChange } from "./change.js";
import {
  auditEventsBody,
  creditUsageBody,
  dashboardViewsBody,
  parseBody,
  refreshRunsBody,
  validationFailed,
} from "./schemas.js";

export type DashboardViewInput = z.input<typeof dashboardViewsBody>[number];
export type RefreshRunInput = z.input<typeof refreshRunsBody>[number];
export type CreditUsageInput = z.input<typeof creditUsageBody>[number];
export type AuditEventInput = z.input<typeof auditEventsBody>[number];

/**
 * The history behind the activity endpoints, as the host reports it: each
 * call appends all its items or none (at most 10,000), every reference
 * checked first.
 */
export interface HistoryAdmin {
  /** Counted by `/dashboards/{id}/views` and `/space/dashboard-usage`. */
  recordDashboardViews(items: DashboardViewInput[], options?: ChangeOptions): Promise<{ stored: number }>;
  /** What `/space/refresh-history` reports. */
  recordRefreshRuns(items: RefreshRunInput[], options?: ChangeOptions): Promise<{ stored: number }>;
  /** What `/space/credit-usage` reports. */
  recordCreditUsage(items: CreditUsageInput[], options?: ChangeOptions): Promise<{ stored: number }>;
  /**
   * Host-written audit events; an id already stored is skipped, so a retried batch is delivered by `/audit` exactly
   * once.
   */
  recordAuditEvents(items: AuditEventInput[]): Promise<{ stored: number; skipped: number }>;
}

export function historyAdmin(deps: AdminDeps): HistoryAdmin {
  const { storage, clock } = deps.ports;

  /** Check each distinct referenced id once; 422 names the first item that misses. */
  async function checkRefs<T>(
    items: readonly T[],
    field: keyof T & string,
    what: string,
    exists: (id: string) => Promise<unknown>,
  ): Promise<void> {
    const known = new Map<string, boolean>();
    for (let i = 0; i < items.length; i++) {
      const value = items[i]![field] as unknown;
      if (typeof value !== "string") continue;
      if (!known.has(value)) known.set(value, !!(await exists(value)));
      if (!known.get(value)) throw validationFailed(`$[${i}].${field}`, `unknown ${what} ${value}`);
    }
  }

  return {
    async recordDashboardViews(input, options) {
      assertWritable(storage.dashboards, "appendDashboardViews");
      const views: DashboardView[] = parseBody(dashboardViewsBody, input);
      const teams = new Map<string, string>();
      await checkRefs(views, "dashboardId", "dashboard", async (id) => {
        const dashboard = await storage.dashboards.getDashboard(id);
        if (dashboard) teams.set(id, dashboard.teamId);
        return dashboard;
      });
      await checkRefs(views, "userId", "user", (id) => storage.identity.getUser(id));
      const actor = await actorFor(storage, options);
      await storage.dashboards.appendDashboardViews(views);
      await recordBatch(
        deps,
        "dashboard_view",
        views.map((v) => teams.get(v.dashboardId)!),
        actor,
      );
      return { stored: views.length };
    },

    async recordRefreshRuns(input, options) {
      assertWritable(storage.usage, "appendRefreshRuns");
      const runs: RefreshRun[] = parseBody(refreshRunsBody, input);
      const teams = new Map<string, string>();
      await checkRefs(runs, "datasetId", "dataset", async (id) => {
        const dataset = await storage.catalog.getDataset(id);
        if (dataset && dataset.type !== "input_table") teams.set(id, dataset.teamId);
        return teams.has(id);
      });
      const actor = await actorFor(storage, options);
      await storage.usage.appendRefreshRuns(runs);
      await recordBatch(
        deps,
        "refresh_run",
        runs.map((r) => teams.get(r.datasetId)!),
        actor,
      );
      return { stored: runs.length };
    },

    async recordCreditUsage(input, options) {
      assertWritable(storage.usage, "appendCreditUsage");
      const items: CreditUsage[] = parseBody(creditUsageBody, input);
      await checkRefs(items, "teamId", "team", (id) => storage.identity.getTeam(id));
      await checkRefs(items, "userId", "user", (id) => storage.identity.getUser(id));
      const actor = await actorFor(storage, options);
      await storage.usage.appendCreditUsage(items);
      await recordBatch(
        deps,
        "credit_usage",
        items.map((c) => c.teamId),
        actor,
      );
      return { stored: items.length };
    },

    async recordAuditEvents(input) {
      assertWritable(storage.audit, "appendAuditEvents");
      const items = parseBody(auditEventsBody, input);
      await checkRefs(items, "teamId", "team", (id) => storage.identity.getTeam(id));
      const seen = new Set<string>();
      const events: AuditEvent[] = [];
      items.forEach((item, i) => {
        if (item.id !== undefined) checkId(item.id, `$[${i}].id`);
        const event = { ...item, id: item.id ?? eventId() } as AuditEvent;
        if (seen.has(event.id)) throw validationFailed(`$[${i}].id`, `id ${event.id} appears twice in this batch`);
        seen.add(event.id);
        events.push(event);
      });
      const stored = await storage.audit.appendAuditEvents(events, clock.now());
      return { stored, skipped: events.length - stored };
    },
  };
}

/** One audit event per team a batch touched, with how many items it carried there. */
async function recordBatch(
  deps: AdminDeps,
  object: string,
  teamIds: readonly string[],
  actor: Awaited<ReturnType<typeof actorFor>>,
): Promise<void> {
  const counts = new Map<string, number>();
  for (const teamId of teamIds) counts.set(teamId, (counts.get(teamId) ?? 0) + 1);
  for (const [teamId, count] of counts) {
    await recordChange(deps, {
      teamIds: [teamId],
      action: `${object}.created`,
      actor,
      target: { type: object, id: teamId },
      details: { count },
    });
  }
}
