import { z } from "zod";

export const livenessSchema = z.object({ status: z.literal("ok") }).meta({ id: "Liveness" });

const checkState = z.enum(["ok", "error"]);
export const readinessSchema = z
  .object({
    status: z.enum(["ok", "unavailable", "draining"]),
    checks: z.object({ storage: checkState, rateLimiter: checkState, cache: checkState }),
    details: z
      .object({
        auditFeed: z.object({
          heldBackSeconds: z.number().int().describe("how long an audit append still open has held the feed back"),
          stalled: z.boolean().describe("heldBackSeconds is past auditStallSeconds (readiness still passes)"),
        }),
      })
      .optional()
      .describe("what the checks do not fail on; present while the audit feed is held back a second or more"),
  })
  .meta({ id: "Readiness", description: "Each dependency's check; 503 when one fails or the API is draining" });

export const openApiDocumentSchema = z
  .object({ openapi: z.literal("3.1.0") })
  .loose()
  .meta({ id: "OpenApiDocument", description: "An OpenAPI 3.1 document" });
