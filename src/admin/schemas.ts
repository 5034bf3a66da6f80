import { z } from "zod";
import { ApiError } from "../errors.js";
import {
  allowlistSchema,
  auditEventSchema,
  businessSchema,
  columnSchema,
  connectionSchema,
  creditUsageSchema,
  dashboardViewSchema,
  datasetSchema,
  planSchema,
  refreshRunSchema,
  roleSchema,
  scopeSchema,
  tableSchema,
  teamSchema,
  userSchema,
} from "../fixture/schema.js";
import { jsonPath } from "../fixture/load.js";

/**
 * Bodies of the admin operations: the fixture's entity schemas (one
 * validation path) without the id, which comes from the path, and strict:
 * an unknown field is refused, never dropped.
 */

/** What an admin id is: 1 to 200 letters, digits, `_`, `-`, `.` or `:` (admin-api.md, Revision 2). */
export const ID_PATTERN = /^[A-Za-z0-9_.:-]{1,200}$/;
const id = z.string().regex(ID_PATTERN, "an id is 1 to 200 letters, digits, '_', '-', '.' or ':'");
const timestamp = z.iso.datetime({ offset: true });

/** Most items one history POST may carry. */
export const MAX_BATCH_ITEMS = 10_000;
/** Longest session an admin may issue: one year. */
export const MAX_SESSION_SECONDS = 366 * 24 * 3600;

export const businessBody = businessSchema.omit({ id: true }).strict();
export const teamBody = teamSchema.omit({ id: true }).strict();
export { planSchema };
export const userBody = userSchema.omit({ id: true }).strict();
export const membershipBody = z.object({ role: roleSchema }).strict();
export const sessionBody = z
  .object({ userId: id, expiresInSeconds: z.number().int().min(1).max(MAX_SESSION_SECONDS).optional() })
  .strict();
export const apiKeyBody = z
  .object({ name: z.string().min(1).max(200), scopes: z.array(scopeSchema), allowlist: allowlistSchema, createdBy: id })
  .strict();
export const connectionBody = connectionSchema.omit({ id: true }).partial({ createdAt: true }).strict();
export const signingSecretBody = z.object({ secret: z.string().nullable() }).strict();
/** Declared columns in a put: omitted keeps the declaration, null removes it. */
const declaredColumns = z.array(columnSchema).nullable().optional();
export const datasetBody = datasetSchema.omit({ id: true, rows: true, updatedAt: true }).extend({ columns: declaredColumns }).strict();
export const tableBody = tableSchema.omit({ id: true, rows: true, updatedAt: true }).extend({ columns: declaredColumns }).strict();
export const dashboardVersionBody = z
  .object({
    teamId: id,
    name: z.string(),
    description: z.string().nullable().default(null),
    published: z.boolean(),
    publishedAt: timestamp.nullable().default(null),
    datasetIds: z.array(id).default([]),
  })
  .strict();
const batch = <T extends z.ZodType>(item: T) => z.array(item).max(MAX_BATCH_ITEMS);
export const dashboardViewsBody = batch(dashboardViewSchema.strict());
export const refreshRunsBody = batch(refreshRunSchema.strict());
export const creditUsageBody = batch(creditUsageSchema.strict());
export const auditEventsBody = batch(auditEventSchema.partial({ id: true }).strict());
export const refreshBody = z.object({ maxRows: z.number().int().min(1).max(1_000_000).optional() }).strict();

/** 422 `validation_failed` naming the JSON path of the problem. */
export function validationFailed(path: string, message: string): ApiError {
  return new ApiError(422, "validation_failed", `${path}: ${message}`, { details: { path } });
}

/** Parse an admin body, or throw 422 `validation_failed` with `details.path` of the first problem. */
export function parseBody<T extends z.ZodType>(schema: T, value: unknown): z.output<T> {
  const parsed = schema.safeParse(value);
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0]!;
  const keys = issue.code === "unrecognized_keys" ? issue.keys : [];
  const path = jsonPath(keys.length > 0 ? [...issue.path, keys[0]!] : issue.path);
  const message = issue.code === "unrecognized_keys" ? "unknown field" : issue.message;
  throw validationFailed(path, message);
}
