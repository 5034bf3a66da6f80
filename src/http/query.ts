import { z } from "zod";
import { invalidParameter } from "../base/api-error.js";
import { checkText, JsonRefusal, parseJsonText } from "./body.js";

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

/**
 * Validate a raw query with a schema; the first problem becomes 400
 * invalid_parameter naming the parameter. Every value first passes the text
 * rule of JSON bodies (no NUL, no unpaired surrogate: see checkText).
 */
export function parseQuery<T>(schema: z.ZodType<T>, query: RawQuery): T {
  for (const key in query) {
    checkText(key, "query");
    const value = query[key]!;
    if (typeof value === "string") checkText(value, key);
    else for (const item of value) checkText(item, key);
  }
  const result = schema.safeParse(query);
  if (result.success) return result.data;
  const issue = result.error.issues[0]!;
  const parameter = String(issue.path[0] ?? "query");
  throw invalidParameter(parameter, `${parameter}: ${issue.message}`);
}

/**
 * The largest value of an integer parameter that names no maximum (an
 * `offset`): 2^31 - 1, which every store can address; larger is 400.
 */
export const MAX_INT_PARAM = 2_147_483_647;

/** An integer parameter within [min, max]; `max` defaults to MAX_INT_PARAM. */
export function intParam(options: { min: number; max?: number }) {
  const max = options.max ?? MAX_INT_PARAM;
  const number = z
    .number()
    .int()
    .min(options.min, `must be at least ${options.min}`)
    .max(max, `must be at most ${max}`);
  const schema = z
    .string()
    .regex(/^-?\d{1,15}$/, "must be an integer")
    .transform(Number)
    .pipe(number);
  queryParamDocs.add(schema, { openapi: { type: "integer", minimum: options.min, maximum: max } });
  return schema;
}

/**
 * A URL-encoded JSON object parameter (`filters`, `params`). Arrays and
 * scalars are refused, and so is what a JSON body may not hold (nesting past
 * MAX_JSON_DEPTH, NUL or unpaired surrogates, numbers that are not finite).
 */
export function jsonObjectParam() {
  const schema = z.string().transform((text, ctx): Record<string, unknown> => {
    let value: unknown;
    try {
      value = parseJsonText(text);
    } catch (error) {
      if (!(error instanceof JsonRefusal)) throw error;
      ctx.addIssue({
        code: "custom",
        message: error.problem === "not_json" ? "must be a URL-encoded JSON object" : error.message,
      });
      return z.NEVER;
    }
    if (value === null || typeof value !== "object" || Array.isArray(value)) {
      ctx.addIssue({ code: "custom", message: "must be a JSON object" });
      return z.NEVER;
    }
    return value as Record<string, unknown>;
  });
  // A plain string, not `contentMediaType: application/json`: interactive references (Swagger UI) render that as a
  // file picker, so no condition could be typed in.
  queryParamDocs.add(schema, { openapi: { type: "string", description: "a URL-encoded JSON object" } });
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
