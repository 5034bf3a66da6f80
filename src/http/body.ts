import { ApiError, invalidBody, invalidParameter } from "../base/api-error.js";

export const payloadTooLarge = (limit: number) =>
  new ApiError(413, "payload_too_large", `request body is larger than ${limit} bytes`, { details: { limit } });

/** Concatenate chunks, refusing more than `limit` bytes. */
export async function readLimited(
  chunks: AsyncIterable<Uint8Array>,
  limit: number,
  onTooLarge?: () => void,
): Promise<Uint8Array> {
  const parts: Uint8Array[] = [];
  let size = 0;
  for await (const chunk of chunks) {
    size += chunk.byteLength;
    if (size > limit) {
      onTooLarge?.();
      throw payloadTooLarge(limit);
    }
    parts.push(chunk);
  }
  if (parts.length === 1) return parts[0]!;
  const out = new Uint8Array(size);
  let at = 0;
  for (const part of parts) {
    out.set(part, at);
    at += part.byteLength;
  }
  return out;
}

/** Largest JSON body of an admin route (a batch of 10,000 history items), unless `maxBodyBytes` is larger: 32 MiB. */
export const ADMIN_BODY_BYTES = 32 * 1024 * 1024;

/** The largest JSON body a route takes: `maxBodyBytes`, and on the admin API at least ADMIN_BODY_BYTES. */
export function jsonBodyLimit(auth: string, maxBodyBytes: number): number {
  return auth === "admin" ? Math.max(maxBodyBytes, ADMIN_BODY_BYTES) : maxBodyBytes;
}

/** Refuse early on a declared Content-Length over the limit. */
export function checkDeclaredLength(contentLength: string | null, limit: number): void {
  if (contentLength !== null && Number(contentLength) > limit) throw payloadTooLarge(limit);
}

const decoder = new TextDecoder("utf-8", { fatal: true });

/** `application/json` or any `+json` type. */
export function isJsonType(contentType: string | null): boolean {
  if (!contentType) return false;
  if (contentType === "application/json") return true; // what nearly every sender writes: no parsing
  const type = contentType.split(";", 1)[0]!.trim().toLowerCase();
  return type === "application/json" || (type.startsWith("application/") && type.endsWith("+json"));
}

export function isFormType(contentType: string | null): boolean {
  return !!contentType && contentType.split(";", 1)[0]!.trim().toLowerCase() === "application/x-www-form-urlencoded";
}

export function decodeUtf8(bytes: Uint8Array): string {
  try {
    return decoder.decode(bytes);
  } catch {
    throw invalidBody("body is not valid UTF-8");
  }
}

/**
 * Parse a JSON body that must be an object. JSON.parse defines `__proto__`
 * as an own data property, never a prototype, so payload keys are inert.
 */
export function parseJsonObject(bytes: Uint8Array): Record<string, unknown> {
  if (bytes.byteLength === 0) throw invalidBody("body is empty; send a JSON object");
  const value = parseJsonValue(bytes);
  if (value === null || typeof value !== "object" || Array.isArray(value))
    throw invalidBody("body must be a JSON object");
  return value as Record<string, unknown>;
}

/**
 * Parse a JSON body of any shape. Every JSON body goes through here, so every
 * route refuses alike (400 invalid_body): text that is not JSON, nesting past
 * MAX_JSON_DEPTH, NUL or unpaired surrogates in a string or key, numbers that
 * are not finite (see parseJsonText); `details.path` names where.
 */
export function parseJsonValue(bytes: Uint8Array): unknown {
  if (bytes.byteLength === 0) throw invalidBody("body is empty; send JSON");
  const text = decodeUtf8(bytes);
  try {
    return parseJsonText(text);
  } catch (error) {
    if (!(error instanceof JsonRefusal)) throw error;
    if (error.problem === "not_json") throw invalidBody("body is not valid JSON");
    const details = error.at === undefined ? undefined : { path: error.at };
    throw new ApiError(400, "invalid_body", `body: ${error.message}`, details && { details });
  }
}

/**
 * How deep arrays and objects may nest in a JSON body or a JSON query
 * parameter (`filters`, `params`): a top-level object is level 1. Deeper
 * input is refused before it is parsed, so no later step (stringify,
 * validators, a store's JSON functions) meets a value that overflows its stack.
 */
export const MAX_JSON_DEPTH = 64;

/** Why `parseJsonText` refused a text. */
export type JsonProblem = "not_json" | "too_deep" | "bad_text" | "not_finite";

/** What `parseJsonText` throws: the problem, and a message naming where it is (`order.note`). */
export class JsonRefusal extends Error {
  constructor(
    readonly problem: JsonProblem,
    message: string,
    /** Where in the value: dotted keys and indexes; absent for the text as a whole. */
    readonly at?: string,
  ) {
    super(message);
    this.name = "JsonRefusal";
  }
}

/**
 * Parse JSON text under the rules every JSON input follows, whichever store
 * is behind: nesting at most MAX_JSON_DEPTH levels (checked before parsing),
 * no string or key holding NUL (U+0000) or an unpaired UTF-16 surrogate
 * (PostgreSQL's text and jsonb cannot hold them, so no store is given them),
 * and no number too large to be finite (`1e400` would become Infinity, then
 * `null`). Throws JsonRefusal.
 *
 * Cheap on the usual payload: the depth check counts brackets with the
 * engine's indexOf and scans the text only when there are more brackets
 * than the limit; strings are checked only when the text has a backslash
 * (NUL and surrogates can only arrive as `\u` escapes: raw ones are invalid
 * JSON or invalid UTF-8); numbers are checked in one walk of the parsed value.
 */
export function parseJsonText(text: string): unknown {
  if (!bracketsAtMost(text, MAX_JSON_DEPTH) && nestingDepth(text) > MAX_JSON_DEPTH) {
    throw new JsonRefusal("too_deep", `JSON is nested more than ${MAX_JSON_DEPTH} levels deep`);
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new JsonRefusal("not_json", "not valid JSON");
  }
  const found = findRefused(value, text.includes("\\"));
  if (found !== null) throw refusal(found);
  return value;
}

/**
 * Refuse NUL (U+0000) and unpaired UTF-16 surrogates in a path id or query
 * value: 400 invalid_parameter naming `parameter`. The same rule as JSON
 * strings (see parseJsonText).
 */
export function checkText(value: string, parameter: string): void {
  const problem = textProblem(value);
  if (problem !== null) {
    throw invalidParameter(parameter, `${parameter} ${problem}; ${TEXT_RULE}`);
  }
}

/** Whether a string breaks the text rule: a description of what it holds, or null. */
export function textProblem(value: string): string | null {
  if (!SUSPECT.test(value)) return null;
  if (value.includes("\u0000")) return "holds a NUL character (U+0000)";
  return UNPAIRED.test(value) ? "holds an unpaired UTF-16 surrogate" : null;
}

const TEXT_RULE = "text may not contain NUL or unpaired surrogates";
/** NUL or any surrogate half: the rare strings that need the exact check. */
const SUSPECT = /[\u0000\uD800-\uDFFF]/;
const UNPAIRED = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
const REFUSED_CHARS = /\u0000|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;

/** Whether the text holds at most `limit` opening brackets (a bound on its depth), counted by the engine's indexOf. */
function bracketsAtMost(text: string, limit: number): boolean {
  let count = 0;
  for (let i = text.indexOf("{"); i !== -1; i = text.indexOf("{", i + 1)) if (++count > limit) return false;
  for (let i = text.indexOf("["); i !== -1; i = text.indexOf("[", i + 1)) if (++count > limit) return false;
  return true;
}

/**
 * The deepest nesting of arrays and objects in JSON text, brackets inside strings not counted (stops once past the
 * limit).
 */
function nestingDepth(text: string): number {
  let depth = 0;
  let deepest = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x22) {
      // Skip a string: up to the next quote not escaped.
      for (i++; i < text.length; i++) {
        const s = text.charCodeAt(i);
        if (s === 0x5c) i++;
        else if (s === 0x22) break;
      }
    } else if (c === 0x7b || c === 0x5b) {
      if (++depth > deepest && (deepest = depth) > MAX_JSON_DEPTH) return deepest;
    } else if (c === 0x7d || c === 0x5d) {
      depth--;
    }
  }
  return deepest;
}

interface Found {
  problem: "bad_text" | "not_finite";
  what: string;
  path: Array<string | number>;
}

/**
 * The first refused value in a parsed JSON value: a number that is not
 * finite, or (when `strings`) a key or string breaking the text rule. Its
 * path is built only on the way back from a find. Recursion is bounded by
 * MAX_JSON_DEPTH, checked before parsing.
 */
function findRefused(value: unknown, strings: boolean): Found | null {
  if (typeof value === "number")
    return value - value === 0 ? null : { problem: "not_finite", what: "is a number too large to represent", path: [] };
  if (typeof value === "string") {
    const problem = strings ? textProblem(value) : null;
    return problem === null ? null : { problem: "bad_text", what: problem, path: [] };
  }
  if (value === null || typeof value !== "object") return null;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const found = findRefused(value[i], strings);
      if (found !== null) {
        found.path.unshift(i);
        return found;
      }
    }
    return null;
  }
  const object = value as Record<string, unknown>;
  for (const key in object) {
    const keyProblem = strings ? textProblem(key) : null;
    if (keyProblem !== null) return { problem: "bad_text", what: `is a key that ${keyProblem}`, path: [key] };
    const found = findRefused(object[key], strings);
    if (found !== null) {
      found.path.unshift(key);
      return found;
    }
  }
  return null;
}

function refusal(found: Found): JsonRefusal {
  // Shown to the client: the refused characters themselves are replaced.
  const at = found.path.length === 0 ? undefined : found.path.map(String).join(".").replace(REFUSED_CHARS, "\uFFFD");
  const subject = at === undefined ? "the value" : JSON.stringify(at);
  const rule = found.problem === "bad_text" ? TEXT_RULE : "numbers must be finite (at most about 1.8e308)";
  return new JsonRefusal(found.problem, `${subject} ${found.what}; ${rule}`, at);
}
