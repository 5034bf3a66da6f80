import { z } from "zod";

/** Response schemas shared by routes (they also feed the OpenAPI document). */
export const columnSchema = z.object({
  name: z.string(),
  type: z.enum(["string", "number", "boolean", "date", "datetime", "json"]).nullable(),
});

export const errorEnvelopeSchema = z.object({
  error: z.object({
    code: z.string(),
    message: z.string(),
    details: z.record(z.string(), z.unknown()).optional(),
    requestId: z.string(),
  }),
});

export const isoTimestamp = z.string().describe("ISO 8601 timestamp");

/** `teamId`: required for a session token. */
export const teamIdParam = z.string().min(1).optional().describe("the team (space) to read: required for a session token; with an API key optional, and another team than the key's is 404");
