import { z } from "zod";
import { readAuditFeed } from "../handlers/audit.js";
import { AUDIT_CATEGORIES, type AuditCategory } from "../domain/model.js";
import { intParam } from "../http/query.js";
import { authed } from "./route-def.js";
import { auditPageSchema } from "../schemas/audit.js";
import { teamIdParam } from "../schemas/common.js";

/** `category=data_access&category=error` or `category=data_access,error`. */
const categoryParam = z
  .union([z.string(), z.array(z.string())])
  .transform((value) => (Array.isArray(value) ? value : [value]).flatMap((v) => v.split(",")).map((v) => v.trim()))
  .pipe(
    z.array(
      z.enum(AUDIT_CATEGORIES as [AuditCategory, ...AuditCategory[]], {
        message: "must be audit, data_access or error",
      }),
    ),
  );

/** An ISO 8601 instant (`2026-11-01T00:00:00Z`, with an offset or not) or a UTC date, as `toISOString()`. */
const sinceParam = z
  .union([z.iso.datetime({ offset: true }), z.iso.date()], { message: "must be an ISO 8601 timestamp" })
  .transform((text) => new Date(text).toISOString());

const auditQuery = z.object({
  cursor: z.string().min(1).max(512, "is not a cursor this feed returned").optional(),
  limit: intParam({ min: 1, max: 1000 }).default(200),
  format: z.enum(["ocsf", "raw"], { message: "must be ocsf or raw" }).default("ocsf"),
  category: categoryParam.optional(),
  since: sinceParam.optional(),
  teamId: teamIdParam,
});

export const auditRoutes = [
  authed({
    method: "GET",
    path: "/audit",
    operationId: "readAuditFeed",
    auth: "bearer",
    scope: "audit:read",
    tag: "Audit",
    summary: "The business audit log as an exactly-once polling feed (OCSF 6003 or raw)",
    query: auditQuery,
    responses: { 200: auditPageSchema },
    handle: ({ query }, ctx) => readAuditFeed(ctx, query),
  }),
];
