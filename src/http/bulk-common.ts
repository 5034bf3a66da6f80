import type { Column, ColumnType } from "../domain/model.js";
import { ApiError } from "../base/api-error.js";

/**
 * Bounds and refusals shared by the bulk row parsers (bulk-rows.ts). Every
 * refusal is a 422 naming the line of the body (1-based, lines counted by
 * LF) where the offending row starts.
 */

/** Largest value of one field: a CSV cell, a JSON string, or a nested array/object kept as JSON text. */
export const MAX_FIELD_BYTES = 1024 * 1024;
/** Deepest nesting of a JSON row (the row object itself is level 1). */
export const MAX_NESTING = 64;
/**
 * Largest text of one row (a JSON element, an NDJSON line, a CSV record), in
 * characters. Bounds what a parser holds while it waits for a row's end: a
 * stray quote in a CSV cannot make it buffer the rest of the body.
 */
export const MAX_ROW_CHARS = 16 * 1024 * 1024;

/** 422 validation_failed naming the line (and the column when there is one). */
export function refusal(line: number, message: string, column?: string): ApiError {
  const details: Record<string, unknown> = { line };
  if (column !== undefined) details.column = column;
  return new ApiError(422, "validation_failed", `line ${line}: ${message}`, { details });
}

/** Whether a string takes more than MAX_FIELD_BYTES as UTF-8 (counted only when its length leaves a doubt). */
export function fieldTooLarge(value: string): boolean {
  if (value.length <= MAX_FIELD_BYTES / 3) return false;
  if (value.length > MAX_FIELD_BYTES) return true;
  let bytes = 0;
  for (let i = 0; i < value.length; i++) {
    const c = value.charCodeAt(i);
    if (c < 0x80) bytes += 1;
    else if (c < 0x800) bytes += 2;
    else if (c >= 0xd800 && c <= 0xdbff) {
      bytes += 4; // a surrogate pair: 4 bytes for both halves
      i++;
    } else bytes += 3;
  }
  return bytes > MAX_FIELD_BYTES;
}

/** The declared columns of a dataset by name; null when it declares none (types are inferred). */
export type DeclaredTypes = ReadonlyMap<string, ColumnType | null>;

export function declaredTypes(columns: readonly Column[] | null | undefined): DeclaredTypes | null {
  if (!columns || columns.length === 0) return null;
  return new Map(columns.map((c) => [c.name, c.type] as const));
}

export function undeclaredMessage(name: string, declared: DeclaredTypes): string {
  const names = [...declared.keys()];
  const shown = names
    .slice(0, 20)
    .map((n) => JSON.stringify(n))
    .join(", ");
  return `column ${JSON.stringify(name)} is not declared by the dataset (it declares ${shown}${names.length > 20 ? ", …" : ""})`;
}

/**
 * Offset of the first byte of `bytes` that is not part of valid UTF-8, or -1.
 * Used only to say where a body that failed to decode went wrong. When
 * `continued` (the chunk may begin inside a character the previous chunk
 * began), up to three leading continuation bytes are passed over. An
 * incomplete character at the end is not an error (the next chunk may
 * complete it).
 */
export function utf8ErrorOffset(bytes: Uint8Array, continued: boolean): number {
  let i = 0;
  while (continued && i < 3 && i < bytes.length && (bytes[i]! & 0xc0) === 0x80) i++;
  while (i < bytes.length) {
    const b = bytes[i]!;
    if (b < 0x80) {
      i++;
      continue;
    }
    let need: number;
    let min: number;
    if (b >= 0xc2 && b <= 0xdf) [need, min] = [1, 0x80];
    else if (b >= 0xe0 && b <= 0xef) [need, min] = [2, 0x800];
    else if (b >= 0xf0 && b <= 0xf4) [need, min] = [3, 0x10000];
    else return i;
    if (i + need >= bytes.length) {
      // Runs past the end: valid so far if every byte present continues it.
      for (let j = i + 1; j < bytes.length; j++) if ((bytes[j]! & 0xc0) !== 0x80) return i;
      return -1;
    }
    let code = b & (0x3f >> need);
    for (let j = 1; j <= need; j++) {
      const c = bytes[i + j]!;
      if ((c & 0xc0) !== 0x80) return i;
      code = (code << 6) | (c & 0x3f);
    }
    if (code < min || code > 0x10ffff || (code >= 0xd800 && code <= 0xdfff)) return i;
    i += need + 1;
  }
  return -1;
}

/** Number of LF bytes in `bytes[from, to)`. */
export function countLineFeeds(bytes: Uint8Array, from = 0, to = bytes.length): number {
  let count = 0;
  for (let i = from; i < to; i++) if (bytes[i] === 10) count++;
  return count;
}

/** Whether JSON text nests arrays/objects deeper than `max` levels (a scan of brackets outside strings). */
export function jsonNestedDeeperThan(text: string, max: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 92 /* \\ */) i++;
      else if (c === 34 /* " */) inString = false;
    } else if (c === 34) inString = true;
    else if (c === 123 || c === 91) {
      if (++depth > max) return true;
    } else if (c === 125 || c === 93) depth--;
  }
  return false;
}
