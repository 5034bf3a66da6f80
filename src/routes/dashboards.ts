import { z } from "zod";
import { dashboardViews, listDashboards } from "../handlers/dashboards.js";
import { spaceActivity } from "../handlers/space.js";
import { intParam } from "../http/query.js";
import { authed } from "./route-def.js";
import { teamIdParam } from "../schemas/common.js";
import {
  dashboardListSchema,
  dashboardSchema,
  dashboardViewsSchema,
  spaceObjectPageSchema,
} from "../schemas/dashboards.js";

export { dashboardSchema };

const viewsQuery = z.object({
  days: intParam({ min: 1, max: 365 }).default(30),
  by: z.enum(["day", "viewer"]).default("day"),
});

const spaceQuery = z.object({
  days: intParam({ min: 1, max: 365 }).default(90),
  teamId: teamIdParam,
});

export const dashboardRoutes = [
  authed({
    method: "GET",
    path: "/dashboards",
    operationId: "listDashboards",
    auth: "bearer",
    scope: "dashboards:read",
    tag: "Dashboards",
    summary: "Dashboards of the team, current versions only, newest first",
    query: z.object({ teamId: teamIdParam }),
    responses: { 200: dashboardListSchema },
    handle: ({ query }, ctx) => listDashboards(ctx, query.teamId),
  }),
  authed({
    method: "GET",
    path: "/dashboards/:id/views",
    operationId: "getDashboardViews",
    auth: "bearer",
    scope: "dashboards:read",
    tag: "Dashboards",
    summary: "View statistics of a dashboard by day or by viewer (editor sessions excluded)",
    query: viewsQuery,
    responses: { 200: dashboardViewsSchema },
    handle: ({ params, query }, ctx) => dashboardViews(ctx, params.id!, query),
  }),
  authed({
    method: "GET",
    path: "/space/:object",
    operationId: "getSpaceObject",
    auth: "bearer",
    scope: "dashboards:read",
    tag: "Space activity",
    summary:
      "Aggregated space activity: dashboard-usage, refresh-history, credit-usage, api-usage, dataset-usage, " +
      "webhook-deliveries",
    query: spaceQuery,
    responses: { 200: spaceObjectPageSchema },
    handle: ({ params, query }, ctx) => spaceActivity(ctx, params.object!, query),
  }),
];
