import { z } from "zod";
import { ocsfApiActivitySchema } from "../domain/ocsf.js";

export const actorSchema = z
  .discriminatedUnion("type", [
    z.object({ type: z.literal("api-key"), id: z.string(), name: z.string() }),
    z.object({ type: z.literal("user"), id: z.string(), email: z.string() }),
    z.object({ type: z.literal("system"), id: z.string(), name: z.string() }),
  ])
  .meta({ id: "Actor", description: "Who acted: an API key, a person or the system" });

export const auditEventSchema = z
  .object({
    id: z.string(),
    teamId: z.string(),
    time: z.string().describe("the writer's timestamp (ISO 8601)"),
    category: z.enum(["audit", "data_access", "error"]),
    action: z.string(),
    actor: actorSchema.nullable(),
    target: z.object({ type: z.string(), id: z.string() }).nullable(),
    outcome: z.string().describe("success, failure or the writer's own word"),
    ip: z.string().nullable(),
    userAgent: z.string().nullable(),
    details: z.record(z.string(), z.unknown()).optional(),
  })
  .meta({ id: "AuditEvent", description: "A business audit event as its writer stored it (format=raw)" });

export const ocsfEventSchema = ocsfApiActivitySchema.meta({
  id: "OcsfApiActivity",
  description:
    "An audit event as OCSF 1.3.0 API Activity (class 6003), the raw event kept under `unmapped` (format=ocsf, the " +
    "default)",
});

export const auditPageSchema = z
  .object({
    events: z
      .array(z.union([ocsfEventSchema, auditEventSchema]))
      .describe("OCSF events (format=ocsf) or raw events (format=raw), oldest first"),
    cursor: z.string().describe("opaque; send it back to continue"),
    hasMore: z.boolean().describe("more events are ready: read on at once"),
    lagSeconds: z
      .number()
      .int()
      .describe("events stored less than this long ago are held back; polling faster gains nothing"),
  })
  .meta({ id: "AuditPage", description: "One page of the business audit feed" });
