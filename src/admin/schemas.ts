import { z } from "zod";
import { ApiError } from "../base/api-error.js";
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
import { MAX_SECRET_OVERLAP_SECONDS } from "../domain/webhook-config.js";

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

export const businessBody = businessSchema
  .omit({ id: true })
  .strict()
  .meta({ id: "BusinessInput", description: "A business (PUT /businesses/{id})" });
export const teamBody = teamSchema
  .omit({ id: true })
  .strict()
  .meta({ id: "TeamInput", description: "A team (PUT /teams/{id}); a plan change applies to its next call" });
export { planSchema };
export const userBody = userSchema
  .omit({ id: true })
  .strict()
  .meta({ id: "UserInput", description: "A user (PUT /users/{id})" });
export const membershipBody = z
  .object({ role: roleSchema })
  .strict()
  .meta({ id: "MembershipInput", description: "A user's role in a team" });
export const sessionBody = z
  .object({
    userId: id,
    expiresInSeconds: z.number().int().min(1).max(MAX_SESSION_SECONDS).optional().describe("default 30 days"),
  })
  .strict()
  .meta({ id: "SessionInput", description: "A session to issue for a user" });
export const apiKeyBody = z
  .object({ name: z.string().min(1).max(200), scopes: z.array(scopeSchema), allowlist: allowlistSchema, createdBy: id })
  .strict()
  .meta({
    id: "ApiKeyInput",
    description: "An API key to create for the team of the path; createdBy is the user who makes it",
  });
export const connectionBody = connectionSchema.omit({ id: true }).partial({ createdAt: true }).strict().meta({
  id: "ConnectionInput",
  description: "A connection; config by type as in the fixture format (docs/fixture-format.md)",
});
export const signingSecretBody = z
  .object({
    secret: z.string().nullable(),
    overlapSeconds: z
      .number()
      .int()
      .min(0)
      .max(MAX_SECRET_OVERLAP_SECONDS, `overlapSeconds is at most ${MAX_SECRET_OVERLAP_SECONDS} (7 days)`)
      .optional()
      .describe(
        "how long the secret being replaced stays valid too (default 0: from now on only the new one); not with a " +
          "null secret",
      ),
  })
  .strict()
  .meta({ id: "SigningSecretInput", description: "A webhook connection's signing secret; null removes every secret" });
/** Declared columns in a put: omitted keeps the declaration, null removes it. */
const declaredColumns = z.array(columnSchema).nullable().optional();
/** Columns a new declaration may take from stored rows along with their values (admin-api.md, Revision 3). */
const dropColumns = z
  .array(z.string().min(1))
  .optional()
  .describe(
    "columns the new `columns` leave out whose stored values are to be dropped; without them, " +
      "a declaration that would drop values is refused (409, details.dropColumns)",
  );
export const datasetBody = datasetSchema
  .omit({ id: true, rows: true, updatedAt: true })
  .extend({ columns: declaredColumns, dropColumns })
  .strict()
  .meta({
    id: "DatasetInput",
    description: "An upload or connection dataset; its rows are written by the rows operations",
  });
export const tableBody = tableSchema
  .omit({ id: true, rows: true, updatedAt: true })
  .extend({ columns: declaredColumns, dropColumns })
  .strict()
  .meta({
    id: "TableInput",
    description: "An input table; its rows are kept (and converted when its declared columns change)",
  });
export const dashboardVersionBody = z
  .object({
    teamId: id,
    name: z.string(),
    description: z.string().nullable().default(null),
    published: z.boolean(),
    publishedAt: timestamp.nullable().default(null),
    datasetIds: z.array(id).default([]),
  })
  .strict()
  .meta({
    id: "DashboardVersionInput",
    description: "One version of a dashboard; publishedAt defaults to now for a published version",
  });
/**
 * A history batch: at most 10,000 items, all appended or none; each item named `<Item>Input`, the batch `<Item>Batch`.
 */
const batch = <T extends z.ZodType>(item: T, name: string, description: string) =>
  z
    .array(item.meta({ id: `${name}Input`, description }))
    .max(MAX_BATCH_ITEMS)
    .meta({ id: `${name}Batch`, description: "Up to 10,000 items: all appended, or none when one is refused" });
export const dashboardViewsBody = batch(dashboardViewSchema.strict(), "DashboardView", "One dashboard page view");
export const refreshRunsBody = batch(
  refreshRunSchema.strict(),
  "RefreshRun",
  "One refresh of a dataset from its source",
);
export const creditUsageBody = batch(creditUsageSchema.strict(), "CreditUsage", "Credits a team spent");
export const auditEventsBody = batch(
  auditEventSchema.partial({ id: true }).strict(),
  "AuditEvent",
  "An event of the host for the business audit feed; id optional",
);
export const refreshBody = z
  .object({ maxRows: z.number().int().min(1).max(1_000_000).optional().describe("default 100,000") })
  .strict()
  .meta({ id: "RefreshInput", description: "How many rows a refresh may pull at most" });

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

export const webhookReplayBody = z
  .object({
    outcome: z.enum(["stored", "duplicate", "refused"]).optional(),
    reason: z
      .enum([
        "signature_missing",
        "signature_invalid",
        "timestamp_out_of_tolerance",
        "rate_limited",
        "body_too_large",
        "unsupported_media_type",
        "invalid_body",
        "too_many_columns",
        "storage_unavailable",
      ])
      .optional(),
    since: z.string().optional().describe("ISO 8601 instant: received at or after it"),
    until: z.string().optional().describe("ISO 8601 instant: received before it"),
  })
  .strict()
  .meta({
    id: "WebhookReplayInput",
    description: "Which kept deliveries to replay, oldest first: every filter given must match",
  });
