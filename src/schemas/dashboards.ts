import { z } from "zod";
import { SPACE_OBJECTS, type SpaceObject } from "../ports/storage/usage.js";
import { columnSchema, isoTimestamp, rowSchema } from "./common.js";

const day = z.string().describe("UTC day, YYYY-MM-DD");

export const dashboardSchema = z
  .object({
    id: z.string(),
    name: z.string(),
    description: z.string().nullable(),
    published: z.boolean(),
    publishedUrl: z.string().nullable().describe("{viewUrl}/d/{id} when the current version is published"),
    version: z.number().int(),
    createdAt: isoTimestamp,
    updatedAt: isoTimestamp,
    publishedAt: isoTimestamp.nullable(),
  })
  .meta({ id: "Dashboard", description: "A dashboard as its current version shows it" });

export const dashboardListSchema = z.object({ dashboards: z.array(dashboardSchema) }).meta({ id: "DashboardList" });

const viewTotals = z.object({
  views: z.number().int(),
  uniqueVisitorsByDay: z.number().int().describe("distinct visitors summed over the days"),
});

export const dashboardViewsByDaySchema = z
  .object({
    dashboardId: z.string(),
    name: z.string(),
    days: z.number().int(),
    totals: viewTotals,
    series: z
      .array(z.object({ day, views: z.number().int(), uniqueVisitors: z.number().int() }))
      .describe("every day of the window, oldest first, zeros included"),
  })
  .meta({ id: "DashboardViewsByDay", description: "View statistics by day (by=day, the default)" });

export const dashboardViewsByViewerSchema = z
  .object({
    dashboardId: z.string(),
    name: z.string(),
    days: z.number().int(),
    by: z.literal("viewer"),
    totals: viewTotals,
    series: z
      .array(
        z.object({
          day,
          viewerId: z.string().nullable().describe("null: an anonymous visitor"),
          viewer: z.string(),
          views: z.number().int(),
        }),
      )
      .describe("rows with views only"),
  })
  .meta({ id: "DashboardViewsByViewer", description: "View statistics by day and viewer (by=viewer)" });

export const dashboardViewsSchema = z
  .union([dashboardViewsByDaySchema, dashboardViewsByViewerSchema])
  .meta({ id: "DashboardViews", description: "View statistics of a dashboard (editor sessions excluded)" });

export const spaceObjectNameSchema = z
  .enum(SPACE_OBJECTS as [SpaceObject, ...SpaceObject[]])
  .meta({ id: "SpaceObjectName" });

export const spaceObjectPageSchema = z
  .object({
    object: spaceObjectNameSchema,
    days: z.number().int(),
    columns: z.array(columnSchema),
    rows: z.array(rowSchema),
  })
  .meta({ id: "SpaceObjectPage", description: "Aggregated space activity: a table of columns and rows" });
