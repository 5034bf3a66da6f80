import { z } from "zod";
import { dashboardViews, listDashboards } from "../handlers/dashboards.js";
import { spaceActivity } from "../handlers/space.js";
import { intParam } from "../http/query.js";
import { SPACE_OBJECTS, type SpaceObject } from "../ports/storage/analytics.js";
import { authed } from "../routing.js";
import { columnSchema, isoTimestamp, teamIdParam } from "../schemas/common.js";

const day = z.string().describe("UTC day, YYYY-MM-DD");

export const dashboardSchema = z.object({
  id: z.string(),
  name: z.string(),
  description: z.string().nullable(),
  published: z.boolean(),
  publishedUrl: z.string().nullable().describe("{viewUrl}/d/{id} when the current version is published"),
  version: z.number().int(),
  createdAt: isoTimestamp,
  updatedAt: isoTimestamp,
  publishedAt: isoTimestamp.nullable(),
});

const viewsQuery = z.object({
  days: intParam({ min: 1, max: 365 }).default(30),
  by: z.enum(["day", "viewer"]).default("day"),
});

const viewsResponse = z.object({
  dashboardId: z.string(),
  name: z.string(),
  days: z.number().int(),
  by: z.literal("viewer").optional().describe("present with by=viewer"),
  totals: z.object({ views: z.number().int(), uniqueVisitorsByDay: z.number().int() }),
  series: z.union([
    z.array(z.object({ day, views: z.number().int(), uniqueVisitors: z.number().int() })),
    z.array(z.object({ day, viewerId: z.string().nullable(), viewer: z.string(), views: z.number().int() })),
  ]),
});

const spaceQuery = z.object({
  days: intParam({ min: 1, max: 365 }).default(90),
  teamId: teamIdParam,
});

const spaceResponse = z.object({
  object: z.enum(SPACE_OBJECTS as [SpaceObject, ...SpaceObject[]]),
  days: z.number().int(),
  columns: z.array(columnSchema),
  rows: z.array(z.record(z.string(), z.unknown())),
});

export const dashboardRoutes = [
  authed({
    method: "GET",
    path: "/dashboards",
    auth: "bearer",
    scope: "dashboards:read",
    tag: "Dashboards",
    summary: "Dashboards of the team, current versions only, newest first",
    query: z.object({ teamId: teamIdParam }),
    responses: { 200: z.object({ dashboards: z.array(dashboardSchema) }) },
    handle: ({ query }, ctx) => listDashboards(ctx, query.teamId),
  }),
  authed({
    method: "GET",
    path: "/dashboards/:id/views",
    auth: "bearer",
    scope: "dashboards:read",
    tag: "Dashboards",
    summary: "View statistics of a dashboard by day or by viewer (editor sessions excluded)",
    query: viewsQuery,
    responses: { 200: viewsResponse },
    handle: ({ params, query }, ctx) => dashboardViews(ctx, params.id!, query),
  }),
  authed({
    method: "GET",
    path: "/space/:object",
    auth: "bearer",
    scope: "dashboards:read",
    tag: "Space activity",
    summary: "Aggregated space activity: dashboard-usage, refresh-history, credit-usage, api-usage, dataset-usage",
    query: spaceQuery,
    responses: { 200: spaceResponse },
    handle: ({ params, query }, ctx) => spaceActivity(ctx, params.object!, query),
  }),
];
