import { z } from "zod";
import { invalidParameter } from "../errors.js";

/**
 * How the OpenAPI document describes a query helper. Query schemas take
 * strings and transform them, so their JSON Schema "input" view would say
 * only `type: string`; each helper registers the parameter as a client sees it.
 */
export const queryParamDocs = z.registry<{ openapi: Record<string, unknown> }>();

/** Raw query: a single value as a string, a repeated one as an array. */
export type RawQuery = Record<string, string | string[]>;

export function rawQuery(search: URLSearchParams): RawQuery {
  const out: RawQuery = Object.create(null);
  for (const [key, value] of search) {
    const prev = out[key];
    out[key] = prev === undefined ? value : Array.isArray(prev) ? [...prev, value] : [prev, value];
  }
  return out;
}

/** Validate a raw query with a schema; the first problem becomes 400 invalid_parameter naming the parameter. */
export function parseQuery<T>(schema: z.ZodType<T>, query: RawQuery): T {
  const result = schema.safeParse(query);
  if (result.success) return result.data;
  const issue = result.error.issues[0]!;
  const parameter = String(issue.path[0] ?? "query");
  throw invalidParameter(parameter, `${parameter}: ${issue.message}`);
}

/** An integer parameter within [min, max]. */
export function intParam(options: { min: number; max?: number }) {
  let number = z.number().int().min(options.min, `must be at least ${options.min}`);
  if (options.max !== undefined) number = number.max(options.max, `must be at most ${options.max}`);
  const schema = z
    .string()
    .regex(/^-?\d{1,15}$/, "must be an integer")
    .transform(Number)
    .pipe(number);
  queryParamDocs.add(schema, { openapi: { type: "integer", minimum: options.min, ...(options.max !== undefined && { maximum: options.max }) } });
  return schema;
}

/** A URL-encoded JSON object parameter (`filters`, `params`). Arrays and scalars are refused. */
export function jsonObjectParam() {
  const schema = z.string().transform((text, ctx): Record<string, unknown> => {
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch {
      ctx.addIssue({ code: "custom", message: "must be a URL-encoded JSON object" });
      return z.NEVER;
    }
    if (value === null || typeof value !== "object" || Array.isArray(value)) {
      ctx.addIssue({ code: "custom", message: "must be a JSON object" });
      return z.NEVER;
    }
    return value as Record<string, unknown>;
  });
  queryParamDocs.add(schema, {
    openapi: { type: "string", contentMediaType: "application/json", description: "a URL-encoded JSON object" },
  });
  return schema;
}

/** A comma-separated list of non-empty names. */
export function listParam() {
  const schema = z.string().transform((text, ctx) => {
    const names = text.split(",").map((s) => s.trim());
    if (names.some((n) => n === "")) {
      ctx.addIssue({ code: "custom", message: "must be a comma-separated list of names" });
      return z.NEVER;
    }
    return names;
  });
  queryParamDocs.add(schema, { openapi: { type: "string", description: "comma-separated names" } });
  return schema;
}

/** A value that may be repeated: always an array. */
export function repeatable<T extends z.ZodType<string>>(item: T) {
  const schema = z.union([item.transform((v) => [v]), z.array(item)]);
  const { $schema: _dialect, ...items } = z.toJSONSchema(item, { io: "input", unrepresentable: "any" });
  queryParamDocs.add(schema, { openapi: { type: "array", items } });
  return schema;
}
