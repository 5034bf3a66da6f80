import { z } from "zod";
import {
  businessSchema,
  connectionSchema,
  dashboardSchema,
  datasetSchema,
  fixtureSchema,
  refreshRunSchema,
  roleSchema,
  tableSchema,
  teamSchema,
  userSchema,
} from "../fixture/schema.js";
import { rowSchema } from "./common.js";

/**
 * What the admin HTTP API answers (`/api/admin/v1`): the fixture's entity
 * shapes (src/fixture/schema.ts) as stored, each named after the TypeScript
 * type the admin function answers (`Team`, `DatasetRecord`, `ApiKeyInfo`…),
 * so a client generated from the admin OpenAPI document has the types a
 * TypeScript host has. The request bodies are the schemas that validate them
 * (src/admin/schemas.ts, named `<Object>Input`).
 */

const id = z.string().min(1);

export const businessRecordSchema = businessSchema.meta({
  id: "Business",
  description: "A business: the teams it groups share a business-wide audit feed",
});

export const teamRecordSchema = teamSchema.meta({
  id: "Team",
  description: "A team (space): its plan decides what its keys and members may do",
});

export const userRecordSchema = userSchema.meta({
  id: "User",
  description: "A person; businessAdmin reads the audit feed of the whole business",
});

export const membershipSchema = z
  .object({ userId: id, teamId: id, role: roleSchema })
  .meta({ id: "Membership", description: "A user's role in a team" });

export const sessionInfoSchema = z
  .object({
    id,
    userId: id,
    expiresAt: z.iso.datetime({ offset: true }).nullable().describe("null: never expires (fixture sessions)"),
  })
  .meta({ id: "SessionInfo", description: "A session, never its token (only its SHA-256 is kept)" });

export const issuedSessionSchema = sessionInfoSchema
  .extend({ token: z.string().describe("the bearer token, shown only here") })
  .meta({ id: "IssuedSession", description: "A new session with its token, shown once" });

/** The fixture's API key: the key with its plaintext token. */
const fixtureApiKeySchema = fixtureSchema.shape.apiKeys.unwrap().element;

export const apiKeyInfoSchema = fixtureApiKeySchema
  .omit({ token: true })
  .meta({ id: "ApiKeyInfo", description: "An API key, never its token or hash; revokedAt set: it answers 401" });

export const issuedApiKeySchema = fixtureApiKeySchema.meta({
  id: "IssuedApiKey",
  description: "A new API key with its token (dp_live_…), shown once",
});

export const connectionViewSchema = connectionSchema
  .extend({ endpointUrl: z.string().optional().describe("a webhook connection's receiver: where its sender POSTs") })
  .meta({
    id: "ConnectionView",
    description:
      "A connection, secrets never echoed: a webhook's signing secret becomes config.signed, a URL's password ***",
  });

export const datasetRecordSchema = datasetSchema
  .omit({ rows: true })
  .extend({
    columnsDeclared: z
      .boolean()
      .optional()
      .describe("columns were declared by the host: uploads convert values to them and refuse other columns"),
    rowCount: z.number().int().nonnegative(),
  })
  .meta({
    id: "DatasetRecord",
    description: "An upload or connection dataset as stored (its rows are read through /api/v1)",
  });

export const tableRecordSchema = tableSchema
  .omit({ rows: true })
  .extend({ rowCount: z.number().int().nonnegative() })
  .meta({ id: "TableRecord", description: "An input table as stored; columns [] accepts any shape" });

export const dashboardRecordSchema = dashboardSchema.meta({
  id: "DashboardRecord",
  description: "A dashboard with every version; its name, description and datasets are those of its highest version",
});

export const refreshResultSchema = refreshRunSchema
  .extend({ ok: z.boolean().describe("the new rows were stored; on failure the previous rows stay") })
  .meta({ id: "RefreshResult", description: "One refresh run, as recorded for /space/refresh-history" });

export const storedItemsSchema = z
  .object({ stored: z.number().int().nonnegative() })
  .meta({ id: "StoredItems", description: "How many history items were appended (all of the batch)" });

export const storedAuditEventsSchema = z
  .object({
    stored: z.number().int().nonnegative(),
    skipped: z.number().int().nonnegative().describe("items whose id was already stored"),
  })
  .meta({
    id: "StoredAuditEvents",
    description: "How many audit events were appended, and how many were already there",
  });

/** One page of a collection in id order (`ListPage<T>`): pass `nextCursor` back as `cursor` until it is null. */
function listPageOf<T extends z.ZodType>(item: T, name: string) {
  return z
    .object({
      data: z.array(item),
      hasMore: z.boolean(),
      nextCursor: z.string().nullable().describe("pass back as cursor for the next page; null on the last one"),
    })
    .meta({ id: `${name}Page`, description: `One page of ${name} items, in id order` });
}

export const businessPageSchema = listPageOf(businessRecordSchema, "Business");
export const teamPageSchema = listPageOf(teamRecordSchema, "Team");
export const userPageSchema = listPageOf(userRecordSchema, "User");
export const connectionPageSchema = listPageOf(connectionViewSchema, "ConnectionView");
export const datasetPageSchema = listPageOf(datasetRecordSchema, "DatasetRecord");
export const tablePageSchema = listPageOf(tableRecordSchema, "TableRecord");
export const dashboardPageSchema = listPageOf(dashboardRecordSchema, "DashboardRecord");

export const membershipListSchema = z
  .object({ data: z.array(membershipSchema) })
  .meta({ id: "MembershipList", description: "Every membership of a user" });

export const apiKeyListSchema = z
  .object({ data: z.array(apiKeyInfoSchema) })
  .meta({ id: "ApiKeyList", description: "A team's API keys, newest first" });

/** A bulk upload's body: `application/json`, or NDJSON and CSV as text. */
export const rowsUploadSchema = z
  .array(rowSchema)
  .meta({ id: "RowsUpload", description: "Rows: a JSON array of objects; nested objects flatten to dotted columns" });

export const rowsTextSchema = z.string().meta({
  id: "RowsText",
  description: "Rows as text: NDJSON (one JSON object per line) or CSV (RFC 4180, a header row naming the columns)",
});

const deliveryOutcome = z.enum(["stored", "duplicate", "refused"]);
const refusalReason = z.enum([
  "signature_missing",
  "signature_invalid",
  "timestamp_out_of_tolerance",
  "rate_limited",
  "body_too_large",
  "unsupported_media_type",
  "invalid_body",
  "too_many_columns",
  "storage_unavailable",
]);

const webhookDeliveryFields = {
  id: z.string(),
  connectionId: z.string(),
  receivedAt: z.string().describe("ISO 8601, UTC"),
  sourceIp: z.string().nullable(),
  outcome: deliveryOutcome,
  reason: refusalReason.nullable().describe("why it was refused; null unless outcome is refused"),
  status: z.number().int().describe("the HTTP status the sender was answered"),
  deliveryKey: z.string().nullable().describe("the de-duplication key used, if any"),
  rowId: z.string().nullable().describe("the stored row (for a duplicate, the first delivery's)"),
  verifiedBy: z
    .enum(["current", "previous"])
    .nullable()
    .describe("which secret verified it; null when unsigned, refused or replayed"),
  suppressed: z
    .number()
    .int()
    .nonnegative()
    .describe("refusals before this one that were counted but not kept (a flood)"),
  replayOf: z.string().nullable().describe("the delivery this one replays"),
  contentType: z.string().nullable(),
  bodyEncoding: z.enum(["utf8", "base64"]).nullable(),
  bodyTruncated: z
    .boolean()
    .describe("whether the kept body was cut at inboxBodyBytes (or not read: over the request limit)"),
};

export const webhookDeliverySummarySchema = z.object(webhookDeliveryFields).meta({
  id: "WebhookDeliverySummary",
  description: "One delivery of an endpoint's log, without its headers and body",
});

export const webhookDeliveryRecordSchema = z
  .object({
    ...webhookDeliveryFields,
    headers: z
      .record(z.string(), z.string())
      .describe("request headers, lower-case; Authorization, Cookie and Proxy-Authorization values [redacted]"),
    body: z
      .string()
      .nullable()
      .describe("a refused delivery's raw body as received (base64 when not UTF-8), up to inboxBodyBytes"),
  })
  .meta({
    id: "WebhookDeliveryRecord",
    description: "One delivery of an endpoint's log, with its headers and kept body",
  });

export const webhookDeliveryPageSchema = z
  .object({
    data: z.array(webhookDeliverySummarySchema),
    hasMore: z.boolean(),
    nextCursor: z.string().nullable().describe("pass back as cursor for the next page; null on the last one"),
  })
  .meta({ id: "WebhookDeliveryPage", description: "One page of an endpoint's delivery log, newest first" });

export const webhookReplaySummarySchema = z
  .object({
    matched: z.number().int().nonnegative(),
    replayed: z.number().int().nonnegative(),
    stored: z.number().int().nonnegative(),
    duplicate: z.number().int().nonnegative(),
    refused: z.number().int().nonnegative(),
    skipped: z.number().int().nonnegative().describe("matches without a complete kept body: not replayed"),
  })
  .meta({
    id: "WebhookReplaySummary",
    description: "What a bulk replay did: the matches and the outcome of each replay",
  });

export const webhookDeliveryQuerySchema = z.object({
  outcome: deliveryOutcome.optional(),
  reason: refusalReason.optional(),
  since: z.string().max(40).optional().describe("ISO 8601 instant: deliveries received at or after it"),
});
