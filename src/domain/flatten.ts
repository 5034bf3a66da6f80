import type { Row } from "./model.js";
import { emptyRow } from "./rows.js";

/**
 * Objects nested deeper than this are not flattened further: the remaining
 * subtree is stored as JSON text in its dotted column. Recursion is bounded
 * by this constant, whatever the payload.
 */
export const MAX_FLATTEN_DEPTH = 32;

/**
 * Flatten a parsed JSON object into a row: nested objects become dotted
 * columns (`{ user: { name } }` → `user.name`), arrays and empty objects are
 * stored as JSON text, and past `maxDepth` levels the rest of the subtree is
 * JSON text too. Writes into `into` (a null-prototype object by default), so
 * keys such as `__proto__` are plain column names. When two paths produce
 * the same column name (`{"a.b": 1, "a": {"b": 2}}`) the later one wins.
 */
export function flattenPayload(
  payload: Record<string, unknown>,
  into: Row = emptyRow(),
  maxDepth = MAX_FLATTEN_DEPTH,
): Row {
  flattenInto(into, payload, "", 1, maxDepth);
  return into;
}

function flattenInto(out: Row, object: Record<string, unknown>, prefix: string, depth: number, maxDepth: number): void {
  for (const key of Object.keys(object)) {
    const value = object[key];
    const column = prefix === "" ? key : `${prefix}.${key}`;
    if (value === null || typeof value !== "object") {
      out[column] = value;
    } else if (Array.isArray(value) || depth >= maxDepth || isEmpty(value)) {
      out[column] = jsonText(value);
    } else {
      flattenInto(out, value as Record<string, unknown>, column, depth + 1, maxDepth);
    }
  }
}

function isEmpty(object: object): boolean {
  for (const _ in object) return false;
  return true;
}

type Frame =
  | { kind: "array"; items: unknown[]; next: number }
  | { kind: "object"; object: Record<string, unknown>; keys: string[]; next: number; written: number };

/**
 * JSON text of a subtree: the engine's JSON.stringify for the usual shallow
 * value, and the iterative serializer below only when the value is so deep
 * that the engine's recursion overflows the stack.
 */
function jsonText(value: unknown): string {
  try {
    return JSON.stringify(value);
  } catch (error) {
    if (error instanceof RangeError) return toJsonText(value);
    throw error;
  }
}

/**
 * `JSON.stringify` for parsed JSON values of any depth. V8's stringify
 * recurses and overflows the stack on a deeply nested value (which
 * `JSON.parse` accepts), so this walks an explicit stack instead. Output is
 * identical to `JSON.stringify` for values that came from `JSON.parse`.
 */
export function toJsonText(value: unknown): string {
  if (value === null || typeof value !== "object") return JSON.stringify(value) ?? "null";
  const parts: string[] = [];
  const stack: Frame[] = [];
  const open = (v: unknown): void => {
    if (v === null || typeof v !== "object") {
      parts.push(JSON.stringify(v) ?? "null");
    } else if (Array.isArray(v)) {
      parts.push("[");
      stack.push({ kind: "array", items: v, next: 0 });
    } else {
      parts.push("{");
      stack.push({ kind: "object", object: v as Record<string, unknown>, keys: Object.keys(v), next: 0, written: 0 });
    }
  };
  open(value);
  while (stack.length > 0) {
    const frame = stack[stack.length - 1]!;
    if (frame.kind === "array") {
      if (frame.next >= frame.items.length) {
        parts.push("]");
        stack.pop();
        continue;
      }
      if (frame.next > 0) parts.push(",");
      const item = frame.items[frame.next++];
      open(item === undefined ? null : item);
    } else {
      if (frame.next >= frame.keys.length) {
        parts.push("}");
        stack.pop();
        continue;
      }
      const key = frame.keys[frame.next++]!;
      const item = frame.object[key];
      if (item === undefined) continue;
      if (frame.written++ > 0) parts.push(",");
      parts.push(JSON.stringify(key), ":");
      open(item);
    }
  }
  return parts.join("");
}
