import { z } from "zod";
import type { ErrorCode } from "../base/api-error.js";

/**
 * Response schemas shared by routes. They feed the OpenAPI document, where a
 * schema given an `id` (`.meta({ id })`) becomes a named component
 * (`#/components/schemas/<id>`) that code generators turn into a type.
 */

export const COLUMN_TYPES = ["string", "number", "boolean", "date", "datetime", "json"] as const;

export const columnSchema = z
  .object({
    name: z.string(),
    type: z.enum(COLUMN_TYPES).nullable(),
  })
  .meta({ id: "Column", description: "A column: its name and type (null: not known)" });

/** Every code the error envelope carries (`ErrorCode` in src/base/api-error.ts; a type test keeps the two equal). */
export const ERROR_CODES = [
  "invalid_parameter",
  "invalid_body",
  "team_required",
  "unauthorized",
  "invalid_signature",
  "plan_required",
  "insufficient_scope",
  "forbidden",
  "not_found",
  "method_not_allowed",
  "conflict",
  "precondition_failed",
  "idempotency_key_in_use",
  "payload_too_large",
  "unsupported_media_type",
  "validation_failed",
  "idempotency_key_reused",
  "cursor_expired",
  "rate_limited",
  "upstream_unavailable",
  "storage_unavailable",
  "rate_limiter_unavailable",
  "upstream_timeout",
  "internal",
] as const satisfies readonly ErrorCode[];

export const errorCodeSchema = z
  .enum(ERROR_CODES)
  .meta({ id: "ErrorCode", description: "What went wrong, for programs (the message is for people)" });

export const errorEnvelopeSchema = z
  .object({
    error: z.object({
      code: errorCodeSchema,
      message: z.string(),
      details: z.record(z.string(), z.unknown()).optional(),
      requestId: z.string(),
    }),
  })
  .meta({ id: "Error", description: "The error envelope of every error response" });

/** A row of data: column name to value. */
export const rowSchema = z
  .record(z.string(), z.unknown())
  .meta({ id: "Row", description: "A row: column name to value" });

export const isoTimestamp = z.string().describe("ISO 8601 timestamp");

/** `teamId`: required for a session token. */
export const teamIdParam = z
  .string()
  .min(1)
  .optional()
  .describe(
    "the team (space) to read: required for a session token; with an API key optional, and another team than the " +
      "key's is 404",
  );
