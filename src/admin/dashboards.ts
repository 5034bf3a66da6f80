import type { z } from "zod";
import type { Actor, DashboardRecord, DashboardVersion } from "../domain/model.js";
import { ApiError, notFound } from "../base/api-error.js";
import { assertWritable } from "../storage/mount.js";
import {
  type AdminDeps,
  actorFor,
  type ChangeOptions,
  checkId,
  isoNow,
  type ListOptions,
  type ListPage,
  listPage,
  type Put,
  putAction,
  recordChange,
  requireRef,
} from "./change.js";
import { dashboardVersionBody, parseBody, validationFailed } from "./schemas.js";

export type DashboardVersionInput = z.input<typeof dashboardVersionBody>;

/** Dashboards and their versions; `/dashboards` lists each one's highest version. */
export interface DashboardAdmin {
  /**
   * Create or replace one version of a dashboard. The dashboard's name,
   * description and datasets follow its highest version. `publishedAt`
   * defaults to now for a published version.
   */
  putDashboardVersion(
    id: string,
    version: number,
    input: DashboardVersionInput,
    options?: ChangeOptions,
  ): Promise<Put<DashboardRecord>>;
  getDashboard(id: string): Promise<DashboardRecord>;
  listDashboards(options?: ListOptions): Promise<ListPage<DashboardRecord>>;
  /** Its view history goes with it. */
  deleteDashboard(id: string, options?: ChangeOptions): Promise<void>;
}

export function dashboardAdmin(deps: AdminDeps): DashboardAdmin {
  const { storage } = deps.ports;

  async function existing(id: string): Promise<DashboardRecord> {
    const dashboard = await storage.dashboards.getDashboard(id);
    if (!dashboard) throw notFound("dashboard");
    return dashboard;
  }

  return {
    async putDashboardVersion(id, version, input, options) {
      assertWritable(storage.dashboards, "changeDashboard");
      checkId(id);
      if (!Number.isInteger(version) || version < 1 || version > 1_000_000) {
        throw new ApiError(400, "invalid_parameter", "version is an integer from 1 to 1000000", {
          details: { parameter: "version" },
        });
      }
      const body = parseBody(dashboardVersionBody, input);
      requireRef(await storage.identity.getTeam(body.teamId), "$.teamId", "team", body.teamId);
      const teamDatasets = new Set((await storage.catalog.listDatasets({ teamId: body.teamId })).map((d) => d.id));
      body.datasetIds.forEach((datasetId, i) => {
        if (!teamDatasets.has(datasetId)) throw validationFailed(`$.datasetIds[${i}]`, `unknown dataset ${datasetId}`);
      });
      const actor = await actorFor(storage, options);
      return putVersion(id, version, body, actor);
    },
    getDashboard: existing,
    listDashboards: (options) => listPage(options, (page) => storage.dashboards.listAllDashboards(page)),
    async deleteDashboard(id, options) {
      assertWritable(storage.dashboards, "deleteDashboard");
      const actor = await actorFor(storage, options);
      const dashboard = await existing(id);
      if (!(await storage.dashboards.deleteDashboard(id))) throw notFound("dashboard");
      await recordChange(deps, {
        teamIds: [dashboard.teamId],
        action: "dashboard.deleted",
        actor,
        target: { type: "dashboard", id },
      });
    },
  };

  async function putVersion(
    id: string,
    version: number,
    body: z.output<typeof dashboardVersionBody>,
    actor: Actor,
  ): Promise<Put<DashboardRecord>> {
    const now = isoNow(deps);
    let previous: DashboardVersion | undefined;
    // Read, changed and written back in one atomic step of the store: racing puts of one new version,
    // on any instance, answer created once (and racing versions are all kept).
    const { before: current, after: dashboard } = await storage.dashboards.changeDashboard(id, (current) => {
      if (current && current.teamId !== body.teamId)
        throw validationFailed("$.teamId", "a dashboard cannot move to another team");
      previous = current?.versions.find((v) => v.version === version);
      const entry: DashboardVersion = {
        version,
        published: body.published,
        createdAt: previous?.createdAt ?? now,
        updatedAt: now,
        publishedAt: body.publishedAt ?? (body.published ? (previous?.publishedAt ?? now) : null),
      };
      const versions = [...(current?.versions ?? []).filter((v) => v.version !== version), entry].sort(
        (a, b) => a.version - b.version,
      );
      const highest = versions[versions.length - 1]!.version === version;
      return {
        id,
        teamId: body.teamId,
        name: highest || !current ? body.name : current.name,
        description: highest || !current ? body.description : current.description,
        versions,
        datasetIds: highest || !current ? body.datasetIds : current.datasetIds,
      };
    });
    // 201 when this version is new; the audit action says whether the dashboard is.
    const created = previous === undefined;
    await recordChange(deps, {
      teamIds: [body.teamId],
      action: putAction("dashboard", current === null),
      actor,
      target: { type: "dashboard", id },
      details: { version, published: body.published },
    });
    return { created, value: dashboard };
  }
}
