import { typeOfValue, valueFitsType } from "./columns.js";
import type { ColumnType } from "./model.js";

/**
 * Values of text cells (CSV fields), which carry no type of their own.
 *
 * - An empty cell is null: CSV has no other way to write one.
 * - Inferred (no declared type): a number written as JSON writes it (`-12`,
 *   `0.5`, `1e3`; no leading zeros, no `+`, no spaces, an integer within
 *   2^53) becomes a number; `true`/`false` in any case a boolean; anything
 *   else stays the text it is (`007`, `12345678901234567890`, ` 12` and
 *   dates are strings, and a date's column is typed `date` by inference).
 * - Declared: the text must convert to the column's type, else the cell is
 *   refused (`undefined`).
 */

const JSON_NUMBER = /^-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?$/;
/** A declared number column also takes what a spreadsheet writes: leading zeros, `+`, `.5`, `5.`. */
const LOOSE_NUMBER = /^[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?$/;

/** The value of a cell whose column declares no type. */
export function inferCell(text: string): string | number | boolean | null {
  if (text === "") return null;
  const first = text.charCodeAt(0);
  if (first === 45 /* - */ || (first >= 48 && first <= 57)) return numberOrText(text);
  if (text.length === 4 || text.length === 5) {
    const lower = text.toLowerCase();
    if (lower === "true") return true;
    if (lower === "false") return false;
  }
  return text;
}

function numberOrText(text: string): string | number {
  if (!JSON_NUMBER.test(text)) return text;
  const value = Number(text);
  if (!Number.isFinite(value)) return text;
  // An integer past 2^53 would not read back as written (an id, an account number): keep its text.
  if (Number.isInteger(value) && !Number.isSafeInteger(value) && !/[.eE]/.test(text)) return text;
  return value;
}

/**
 * The value of a cell in a column of the declared type, or undefined when
 * the text does not convert (the caller refuses the row). A column declared
 * without a type (null) infers.
 */
export function convertCell(text: string, type: ColumnType | null): unknown {
  if (text === "") return null;
  switch (type) {
    case null:
      return inferCell(text);
    case "string":
      return text;
    case "number": {
      if (!LOOSE_NUMBER.test(text)) return undefined;
      const value = Number(text);
      return Number.isFinite(value) ? value : undefined;
    }
    case "boolean": {
      const lower = text.length === 4 || text.length === 5 ? text.toLowerCase() : "";
      return lower === "true" ? true : lower === "false" ? false : undefined;
    }
    case "date":
      return typeOfValue(text) === "date" && isCalendarDate(text) ? text : undefined;
    case "datetime": {
      const actual = typeOfValue(text);
      if (actual === "date") return isCalendarDate(text) ? text : undefined;
      return actual === "datetime" && isCalendarDate(text.slice(0, 10)) && Number.isFinite(Date.parse(text))
        ? text
        : undefined;
    }
    case "json":
      try {
        return JSON.parse(text) as unknown;
      } catch {
        return undefined;
      }
  }
}

/** `YYYY-MM-DD` naming a day that exists (not 2026-02-30). */
function isCalendarDate(text: string): boolean {
  const year = Number(text.slice(0, 4));
  const month = Number(text.slice(5, 7));
  const day = Number(text.slice(8, 10));
  const date = new Date(0);
  date.setUTCFullYear(year, month - 1, day); // Date.UTC would read years 0-99 as 1900-1999
  return date.getUTCFullYear() === year && date.getUTCMonth() === month - 1 && date.getUTCDate() === day;
}

/** What a refused cell was expected to be, for the message. */
export function describeType(type: ColumnType): string {
  switch (type) {
    case "number":
      return "a number";
    case "boolean":
      return "true or false";
    case "date":
      return "a date (YYYY-MM-DD)";
    case "datetime":
      return "a date-time (ISO 8601)";
    case "json":
      return "JSON text";
    case "string":
      return "text";
  }
}

/**
 * A stored value moved under a column of the declared type (a column
 * declared anew, or its type changed): the value itself when it fits
 * (`valueFitsType`), converted when it converts — text as a CSV cell of
 * that type converts (`"12"` → 12), a number or boolean to its text, an
 * object or array to its JSON text for a string column — and undefined
 * when it does not (the caller refuses the change). null stays null.
 */
export function conformValue(value: unknown, type: ColumnType | null): unknown {
  if (value === null || value === undefined) return null;
  if (valueFitsType(value, type)) return value;
  if (typeof value === "string") return convertCell(value, type);
  if (type === "string") return typeof value === "object" ? JSON.stringify(value) : String(value);
  return undefined;
}
