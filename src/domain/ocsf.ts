import { z } from "zod";
import type { AuditEvent } from "./model.js";

/** The OCSF schema version every mapped event declares. */
export const OCSF_VERSION = "1.3.0";
export const OCSF_PRODUCT = { name: "Dataport", vendor_name: "Dataport" } as const;

const API_ACTIVITY = 6003;
const ACTIVITY_NAMES = { 1: "Create", 2: "Read", 3: "Update", 4: "Delete", 99: "Other" } as const;
type ActivityId = keyof typeof ACTIVITY_NAMES;
const SEVERITY_NAMES = { 1: "Informational", 2: "Low", 3: "Medium" } as const;
type SeverityId = keyof typeof SEVERITY_NAMES;
const STATUS_NAMES = { 1: "Success", 2: "Failure", 99: "Other" } as const;
type StatusId = keyof typeof STATUS_NAMES;

/**
 * The verb of an action (`table.row.created`, `api_key.revoked`,
 * `dataset.rows.read`) decides the CRUD activity; a data read is a Read
 * whatever its verb; anything else is Other (99).
 */
const VERBS: ReadonlyArray<[ActivityId, RegExp]> = [
  [1, /^(create|created|add|added|insert|inserted|invite|invited)$/],
  [2, /^(read|get|list|listed|query|queried|view|viewed|export|exported|download|downloaded)$/],
  [
    3,
    /^(update|updated|change|changed|edit|edited|publish|published|unpublish|unpublished|rotate|rotated|set|rename|renamed|refresh|refreshed)$/,
  ],
  [4, /^(delete|deleted|remove|removed|revoke|revoked|destroy|destroyed)$/],
];

export function activityOf(event: Pick<AuditEvent, "action" | "category">): ActivityId {
  const verb = event.action.split(".").at(-1)!.toLowerCase();
  for (const [id, pattern] of VERBS) if (pattern.test(verb)) return id;
  return event.category === "data_access" ? 2 : 99;
}

function severityOf(event: AuditEvent): SeverityId {
  if (event.category === "error") return 3;
  return event.outcome === "failure" ? 2 : 1;
}

function statusOf(event: AuditEvent): StatusId {
  if (event.outcome === "success") return 1;
  if (event.outcome === "failure") return 2;
  return 99;
}

function actorOf(event: AuditEvent): OcsfApiActivity["actor"] {
  const actor = event.actor;
  if (!actor) return { app_name: OCSF_PRODUCT.name };
  switch (actor.type) {
    case "user":
      return {
        app_name: OCSF_PRODUCT.name,
        user: { uid: actor.id, email_addr: actor.email, name: actor.email, type_id: 1, type: "User" },
      };
    case "api-key":
      return { app_name: OCSF_PRODUCT.name, user: { uid: actor.id, name: actor.name, type_id: 99, type: "API Key" } };
    case "system":
      return { app_name: OCSF_PRODUCT.name, user: { uid: actor.id, name: actor.name, type_id: 3, type: "System" } };
  }
}

/**
 * Map a stored audit event to OCSF 1.3.0 class 6003 (API Activity), category
 * 6 (Application Activity). The raw event is kept whole under `unmapped`, so
 * nothing is lost when a field has no OCSF home.
 */
export function toOcsf(event: AuditEvent, storedAt: number): OcsfApiActivity {
  const activityId = activityOf(event);
  const severityId = severityOf(event);
  const statusId = statusOf(event);
  const requestId = typeof event.details?.requestId === "string" ? event.details.requestId : undefined;
  const written = Date.parse(event.time);
  // A seeded event is stored at 0 (readable at any horizon): it was logged when its writer logged it.
  const loggedAt = storedAt > 0 ? storedAt : Number.isNaN(written) ? null : written;
  return {
    class_uid: API_ACTIVITY,
    class_name: "API Activity",
    category_uid: 6,
    category_name: "Application Activity",
    activity_id: activityId,
    activity_name: ACTIVITY_NAMES[activityId],
    type_uid: API_ACTIVITY * 100 + activityId,
    type_name: `API Activity: ${ACTIVITY_NAMES[activityId]}`,
    // A host-written time that does not parse falls back to when the event was stored.
    time: Number.isNaN(written) ? storedAt : written,
    severity_id: severityId,
    severity: SEVERITY_NAMES[severityId],
    status_id: statusId,
    status: STATUS_NAMES[statusId],
    ...(statusId === 99 ? { status_detail: event.outcome } : {}),
    message: event.action,
    actor: actorOf(event),
    api: {
      operation: event.action,
      service: { name: OCSF_PRODUCT.name },
      ...(requestId ? { request: { uid: requestId } } : {}),
    },
    // Without a client address the source is unknown, and left out rather than invented.
    ...(event.ip ? { src_endpoint: { ip: event.ip } } : {}),
    ...(event.userAgent ? { http_request: { user_agent: event.userAgent } } : {}),
    ...(event.target ? { resources: [{ uid: event.target.id, type: event.target.type }] } : {}),
    metadata: {
      version: OCSF_VERSION,
      product: { ...OCSF_PRODUCT },
      uid: event.id,
      original_time: event.time,
      ...(loggedAt !== null && { logged_time: loggedAt }),
      tenant_uid: event.teamId,
    },
    unmapped: event,
  };
}

const userSchema = z.object({
  uid: z.string(),
  name: z.string(),
  email_addr: z.string().optional(),
  type_id: z.union([z.literal(1), z.literal(3), z.literal(99)]),
  type: z.string(),
});

/**
 * The OCSF fields this project emits, as a zod schema: the response schema
 * of `GET /audit?format=ocsf` and the check the tests run on every mapped event.
 */
export const ocsfApiActivitySchema = z
  .object({
    class_uid: z.literal(API_ACTIVITY),
    class_name: z.literal("API Activity"),
    category_uid: z.literal(6),
    category_name: z.literal("Application Activity"),
    activity_id: z.union([z.literal(1), z.literal(2), z.literal(3), z.literal(4), z.literal(99)]),
    activity_name: z.enum(["Create", "Read", "Update", "Delete", "Other"]),
    type_uid: z.number().int(),
    type_name: z.string(),
    time: z.number().int().nonnegative().describe("epoch milliseconds (the writer's timestamp)"),
    severity_id: z.union([z.literal(1), z.literal(2), z.literal(3)]),
    severity: z.enum(["Informational", "Low", "Medium"]),
    status_id: z.union([z.literal(1), z.literal(2), z.literal(99)]),
    status: z.enum(["Success", "Failure", "Other"]),
    status_detail: z.string().optional(),
    message: z.string(),
    actor: z.object({ app_name: z.string(), user: userSchema.optional() }),
    api: z.object({
      operation: z.string().min(1),
      service: z.object({ name: z.string() }),
      request: z.object({ uid: z.string() }).optional(),
    }),
    src_endpoint: z
      .object({ ip: z.string().min(1) })
      .optional()
      .describe("the client address; absent when the event has none"),
    http_request: z.object({ user_agent: z.string() }).optional(),
    resources: z.array(z.object({ uid: z.string(), type: z.string() })).optional(),
    metadata: z.object({
      version: z.literal(OCSF_VERSION),
      product: z.object({ name: z.string(), vendor_name: z.string() }),
      uid: z.string(),
      original_time: z.string(),
      logged_time: z
        .number()
        .int()
        .positive()
        .optional()
        .describe("epoch ms at which the event was stored (a seeded event: its own time); absent when unknown"),
      tenant_uid: z.string(),
    }),
    unmapped: z.record(z.string(), z.unknown()).describe("the raw stored event"),
  })
  .refine((e) => e.type_uid === e.class_uid * 100 + e.activity_id, {
    message: "type_uid must be class_uid * 100 + activity_id",
  })
  .refine((e) => e.activity_name === ACTIVITY_NAMES[e.activity_id], { message: "activity_name must match activity_id" })
  .refine((e) => e.type_name === `API Activity: ${e.activity_name}`, { message: "type_name must match the activity" })
  .refine((e) => e.severity === SEVERITY_NAMES[e.severity_id] && e.status === STATUS_NAMES[e.status_id], {
    message: "severity and status must match their ids",
  });

export interface OcsfApiActivity {
  class_uid: 6003;
  class_name: "API Activity";
  category_uid: 6;
  category_name: "Application Activity";
  activity_id: ActivityId;
  activity_name: (typeof ACTIVITY_NAMES)[ActivityId];
  type_uid: number;
  type_name: string;
  time: number;
  severity_id: SeverityId;
  severity: (typeof SEVERITY_NAMES)[SeverityId];
  status_id: StatusId;
  status: (typeof STATUS_NAMES)[StatusId];
  status_detail?: string;
  message: string;
  actor: {
    app_name: string;
    user?: { uid: string; name: string; email_addr?: string; type_id: 1 | 3 | 99; type: string };
  };
  api: { operation: string; service: { name: string }; request?: { uid: string } };
  src_endpoint?: { ip: string };
  http_request?: { user_agent: string };
  resources?: Array<{ uid: string; type: string }>;
  metadata: {
    version: typeof OCSF_VERSION;
    product: { name: string; vendor_name: string };
    uid: string;
    original_time: string;
    logged_time?: number;
    tenant_uid: string;
  };
  unmapped: AuditEvent;
}
