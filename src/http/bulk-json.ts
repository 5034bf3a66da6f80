import { JsonRefusal, parseJsonText } from "./body.js";
import { describeType } from "../domain/cell-values.js";
import { MAX_DATASET_COLUMNS, valueFitsType } from "../domain/columns.js";
import { flattenPayload, MAX_FLATTEN_DEPTH, toJsonText } from "../domain/flatten.js";
import type { Row } from "../domain/model.js";
import { emptyRow } from "../domain/rows.js";
import type { ApiError } from "../base/api-error.js";
import {
  countLineFeeds,
  type DeclaredTypes,
  fieldTooLarge,
  MAX_FIELD_BYTES,
  MAX_NESTING,
  MAX_ROW_CHARS,
  refusal,
  undeclaredMessage,
  utf8ErrorOffset,
} from "./bulk-common.js";

/**
 * Rows of a JSON array of objects (`[{…},{…}]`) or of NDJSON (one object
 * per line, blank lines skipped), read as the body arrives. A scanner finds
 * where each top-level object ends (tracking strings and nesting only); each
 * object's text is then parsed by JSON.parse, which is the judge of its
 * syntax. Nothing but the row being read is held. Nested objects flatten
 * into dotted columns and arrays become JSON text, as webhook rows do.
 */
export async function* jsonRows(
  chunks: AsyncIterable<Uint8Array>,
  format: "json" | "ndjson",
  declared: DeclaredTypes | null,
): AsyncGenerator<Row> {
  const decoder = new TextDecoder("utf-8", { fatal: true });
  const scanner = new JsonScanner(format === "ndjson");
  const shaper = new RowShaper(declared);
  for await (const chunk of chunks) {
    let text: string;
    try {
      text = decoder.decode(chunk, { stream: true });
    } catch {
      throw notUtf8(scanner.line + countLineFeeds(chunk, 0, Math.max(0, utf8ErrorOffset(chunk, true))));
    }
    scanner.feed(text);
    yield* shaper.rowsOf(scanner);
    if (scanner.error) throw scanner.error;
  }
  let rest: string;
  try {
    rest = decoder.decode();
  } catch {
    throw notUtf8(scanner.line);
  }
  scanner.feed(rest);
  scanner.end();
  yield* shaper.rowsOf(scanner);
  if (scanner.error) throw scanner.error;
}

const notUtf8 = (line: number) => refusal(line, "the body is not valid UTF-8");

const LF = 10;
const CR = 13;
const TAB = 9;
const SPACE = 32;
const QUOTE = 34;
const COMMA = 44;
const BACKSLASH = 92;
const OPEN_BRACKET = 91;
const CLOSE_BRACKET = 93;
const OPEN_BRACE = 123;
const CLOSE_BRACE = 125;

/** Where the scanner is, outside strings and nesting. */
const BEFORE_ARRAY = 0; // array: before `[`
const FIRST = 1; // array: after `[` (an object or `]`)
const NEXT = 2; // array: after `,` (an object)
const AFTER = 3; // array: after an object (`,` or `]`)
const DONE = 4; // array: after `]` (whitespace only)
const LINE_START = 5; // NDJSON: an object or a blank line
const LINE_REST = 6; // NDJSON: after an object (whitespace to the end of the line)
const IN_OBJECT = 7; // inside a row object, either format

/**
 * Splits JSON text into its row objects, chunk by chunk (the text of one
 * object may span any number of chunks). Completed objects collect in
 * `texts`/`lines` until taken; the first problem stops the scan and is left
 * in `error`, after the objects that came before it.
 */
class JsonScanner {
  /** The line the scan has reached (1-based). */
  line = 1;
  /** Completed row objects, and the line each starts on. */
  texts: string[] = [];
  lines: number[] = [];
  error: ApiError | null = null;
  private phase: number;
  private depth = 0;
  private inString = false;
  private escaped = false;
  /** Text of the object being read that came in earlier chunks. */
  private parts: string[] = [];
  private partsLength = 0;
  private objectLine = 0;

  constructor(private readonly ndjson: boolean) {
    this.phase = ndjson ? LINE_START : BEFORE_ARRAY;
  }

  feed(text: string): void {
    if (this.error) return;
    const n = text.length;
    let { phase, depth, inString, escaped, line } = this;
    let start = phase === IN_OBJECT ? 0 : -1;
    let i = 0;
    for (; i < n; i++) {
      const c = text.charCodeAt(i);
      if (phase === IN_OBJECT) {
        if (inString) {
          if (escaped) escaped = false;
          else if (c === BACKSLASH) escaped = true;
          else if (c === QUOTE) inString = false;
          else if (c === LF) {
            if (this.ndjson)
              return this.fail(
                refusal(this.objectLine, "the JSON object does not end on its line (NDJSON holds one object per line)"),
              );
            line++;
          }
        } else if (c === QUOTE) inString = true;
        else if (c === OPEN_BRACE || c === OPEN_BRACKET) {
          if (++depth > MAX_NESTING)
            return this.fail(refusal(this.objectLine, `the row is nested deeper than ${MAX_NESTING} levels`));
        } else if (c === CLOSE_BRACE || c === CLOSE_BRACKET) {
          if (--depth === 0) {
            if (!this.complete(text.slice(start, i + 1))) return;
            phase = this.ndjson ? LINE_REST : AFTER;
          }
        } else if (c === LF) {
          if (this.ndjson)
            return this.fail(
              refusal(this.objectLine, "the JSON object does not end on its line (NDJSON holds one object per line)"),
            );
          line++;
        }
        continue;
      }
      if (c === LF) {
        line++;
        if (phase === LINE_REST) phase = LINE_START;
        continue;
      }
      if (c === SPACE || c === TAB || c === CR) continue;
      if (c === OPEN_BRACE && (phase === FIRST || phase === NEXT || phase === LINE_START)) {
        phase = IN_OBJECT;
        depth = 1;
        inString = false;
        escaped = false;
        start = i;
        this.objectLine = line;
        continue;
      }
      if (phase === BEFORE_ARRAY && c === OPEN_BRACKET) phase = FIRST;
      else if (phase === FIRST && c === CLOSE_BRACKET) phase = DONE;
      else if (phase === AFTER && c === COMMA) phase = NEXT;
      else if (phase === AFTER && c === CLOSE_BRACKET) phase = DONE;
      else return this.fail(refusal(line, unexpected(phase, c)));
    }
    if (phase === IN_OBJECT) {
      const rest = start === 0 ? text : text.slice(start);
      this.parts.push(rest);
      this.partsLength += rest.length;
      if (this.partsLength > MAX_ROW_CHARS) return this.fail(tooLong(this.objectLine));
    }
    this.phase = phase;
    this.depth = depth;
    this.inString = inString;
    this.escaped = escaped;
    this.line = line;
  }

  /** The body ended: refuse an unfinished array or object. */
  end(): void {
    if (this.error) return;
    if (this.phase === IN_OBJECT)
      this.fail(refusal(this.objectLine, "the JSON object is not closed (the body ends inside it)"));
    else if (this.phase === BEFORE_ARRAY)
      this.fail(refusal(this.line, "the body is empty; send a JSON array of objects"));
    else if (this.phase !== DONE && !this.ndjson)
      this.fail(refusal(this.line, "the JSON array is not closed (the body ends before `]`)"));
  }

  /** Takes the completed objects. */
  take(): { texts: string[]; lines: number[] } {
    const taken = { texts: this.texts, lines: this.lines };
    this.texts = [];
    this.lines = [];
    return taken;
  }

  private complete(tail: string): boolean {
    let text = tail;
    if (this.parts.length > 0) {
      this.parts.push(tail);
      text = this.parts.join("");
      this.parts = [];
      this.partsLength = 0;
    }
    if (text.length > MAX_ROW_CHARS) {
      this.fail(tooLong(this.objectLine));
      return false;
    }
    this.texts.push(text);
    this.lines.push(this.objectLine);
    return true;
  }

  private fail(error: ApiError): void {
    this.error = error;
  }
}

const tooLong = (line: number) => refusal(line, `the row is longer than ${MAX_ROW_CHARS} characters`);

function unexpected(phase: number, c: number): string {
  const found =
    c === OPEN_BRACKET ? "an array" : c === QUOTE ? "a string" : `${JSON.stringify(String.fromCharCode(c))}`;
  switch (phase) {
    case BEFORE_ARRAY:
      return c === OPEN_BRACE
        ? "the body is one JSON object; send a JSON array of objects (or NDJSON)"
        : "the body must be a JSON array of objects";
    case FIRST:
    case NEXT:
      return `each element of the array must be a JSON object, found ${found}`;
    case AFTER:
      return `expected "," or "]" after an object, found ${found}`;
    case DONE:
      return "text follows the end of the JSON array";
    case LINE_START:
      return `each line must be a JSON object, found ${found}`;
    default:
      return "the line holds more than one JSON value (NDJSON holds one object per line)";
  }
}

/** Parsed objects to rows: flattened, bounded, and checked against the declared columns if any. */
class RowShaper {
  /** Distinct columns so far (inferred schemas only; declared ones are bounded by the declaration). */
  private readonly seen = new Set<string>();

  constructor(private readonly declared: DeclaredTypes | null) {}

  *rowsOf(scanner: JsonScanner): Generator<Row> {
    const { texts, lines } = scanner.take();
    for (let k = 0; k < texts.length; k++) yield this.shape(parse(texts[k]!, lines[k]!), lines[k]!);
  }

  private shape(object: Record<string, unknown>, line: number): Row {
    const declared = this.declared;
    const row = declared ? flattenDeclared(object, declared, emptyRow(), "", 1) : flattenPayload(object, emptyRow());
    const names = Object.keys(row);
    if (names.length > MAX_DATASET_COLUMNS)
      throw refusal(line, `the row has ${names.length} columns; at most ${MAX_DATASET_COLUMNS} are allowed`);
    for (const name of names) {
      const value = row[name];
      if (
        typeof value === "string"
          ? fieldTooLarge(value)
          : declared !== null && typeof value === "object" && value !== null && fieldTooLarge(JSON.stringify(value))
      ) {
        throw refusal(
          line,
          `the value of column ${JSON.stringify(name)} is larger than ${MAX_FIELD_BYTES} bytes`,
          name,
        );
      }
      if (declared) {
        const type = declared.get(name);
        if (type === undefined) throw refusal(line, undeclaredMessage(name, declared), name);
        if (!valueFitsType(value, type))
          throw refusal(line, `column ${JSON.stringify(name)} expects ${describeType(type!)}`, name);
      } else if (!this.seen.has(name)) {
        if (this.seen.size >= MAX_DATASET_COLUMNS)
          throw refusal(line, `the rows have more than ${MAX_DATASET_COLUMNS} distinct columns`, name);
        this.seen.add(name);
      }
    }
    return row;
  }
}

/** One row object's text (it starts with `{`, so a successful parse is an object). */
function parse(text: string, line: number): Record<string, unknown> {
  try {
    // The rules of every JSON input (nesting, NUL and unpaired surrogates, non-finite numbers); plain JSON.parse for
    // its reason on a syntax error.
    return parseJsonText(text) as Record<string, unknown>;
  } catch (refused) {
    if (refused instanceof JsonRefusal && refused.problem !== "not_json") throw refusal(line, refused.message);
  }
  try {
    return JSON.parse(text) as Record<string, unknown>;
  } catch (error) {
    // V8's reason, without the excerpt of the text it quotes or the position within the row.
    const reason = (error instanceof Error ? error.message : "")
      .replace(/, ".*" is not valid JSON$/s, "")
      .replace(/ in JSON at position \d+.*$/s, "")
      .replace(/^Unexpected end of JSON input$/, "the object is cut short");
    throw refusal(line, `not valid JSON${reason ? ` (${reason})` : ""}`);
  }
}

/**
 * flattenPayload for a dataset that declares its columns: a nested object
 * or array under a column declared `json` is kept whole (its value is the
 * JSON), everything else flattens as usual.
 */
function flattenDeclared(
  object: Record<string, unknown>,
  declared: DeclaredTypes,
  out: Row,
  prefix: string,
  depth: number,
): Row {
  for (const key of Object.keys(object)) {
    const value = object[key];
    const name = prefix === "" ? key : `${prefix}.${key}`;
    if (value === null || typeof value !== "object" || declared.get(name) === "json") out[name] = value;
    else if (Array.isArray(value) || depth >= MAX_FLATTEN_DEPTH || Object.keys(value).length === 0)
      out[name] = toJsonText(value);
    else flattenDeclared(value as Record<string, unknown>, declared, out, name, depth + 1);
  }
  return out;
}
