import { isUtf8 } from "node:buffer";
import { CsvError, Parser } from "csv-parse";
import { convertCell, describeType, inferCell } from "../domain/cell-values.js";
import { MAX_DATASET_COLUMNS } from "../domain/columns.js";
import type { ColumnType, Row } from "../domain/model.js";
import { emptyRow } from "../domain/rows.js";
import { ApiError } from "../base/api-error.js";
import {
  countLineFeeds,
  type DeclaredTypes,
  fieldTooLarge,
  jsonNestedDeeperThan,
  MAX_FIELD_BYTES,
  MAX_NESTING,
  MAX_ROW_CHARS,
  refusal,
  undeclaredMessage,
  utf8ErrorOffset,
} from "./bulk-common.js";

/**
 * Rows of a CSV body (RFC 4180: a header row, fields separated by commas,
 * records by CRLF or LF, quoted fields holding commas, line breaks and
 * doubled quotes), parsed by csv-parse as the body arrives. Every record
 * must have the header's number of fields. Empty lines are skipped. Cells
 * are text: an empty one is null; the rest are inferred (cell-values.ts)
 * unless the dataset declares columns, when each converts to its column's
 * type and a header naming an undeclared column is refused.
 */
export async function* csvRows(chunks: AsyncIterable<Uint8Array>, declared: DeclaredTypes | null): AsyncGenerator<Row> {
  const parser = new RecordCollector({
    bom: true,
    record_delimiter: ["\r\n", "\n"],
    skip_empty_lines: true,
    max_record_size: MAX_ROW_CHARS,
  });
  // Errors are taken from the write callbacks; without a listener the stream's 'error' event would throw.
  parser.on("error", () => {});
  const lines = new LineIndex();
  const utf8 = new Utf8Check();
  const shaper = new CsvShaper(declared, lines);
  try {
    for await (const chunk of chunks) {
      const bytesBefore = lines.size;
      lines.add(chunk);
      const badUtf8 = utf8.check(chunk, bytesBefore);
      const error = await written(parser, chunk);
      yield* shaper.rowsOf(parser.takeRecords(), badUtf8);
      if (badUtf8 !== -1) throw refusal(lines.lineAt(badUtf8), "the body is not valid UTF-8");
      if (error) throw shaper.parseError(error);
      lines.release(shaper.lastEnd);
    }
    if (utf8.unfinished())
      throw refusal(lines.lineAt(lines.size), "the body is not valid UTF-8 (it ends inside a character)");
    const error = await ended(parser);
    yield* shaper.rowsOf(parser.takeRecords(), -1);
    if (error) throw shaper.parseError(error);
    if (!shaper.hasHeader)
      throw refusal(1, "the CSV is empty; send a header row naming the columns, then one row per line");
  } finally {
    parser.destroy();
  }
}

/**
 * A csv-parse stream that hands its records over in batches instead of
 * queueing them for a reader: each record, with the byte offset where it
 * ends, is collected when the parser pushes it, during the write of the
 * chunk that completed it.
 */
class RecordCollector extends Parser {
  private records: string[][] = [];
  private ends: number[] = [];

  override push(record: unknown): boolean {
    if (record === null) return super.push(null);
    this.records.push(record as string[]);
    this.ends.push(this.info.bytes);
    return true;
  }

  takeRecords(): { records: string[][]; ends: number[] } {
    const taken = { records: this.records, ends: this.ends };
    this.records = [];
    this.ends = [];
    return taken;
  }
}

/** Write one chunk; the parser parses it at once, and any error comes back here. */
function written(parser: Parser, chunk: Uint8Array): Promise<Error | null> {
  return new Promise((resolve) => parser.write(chunk, (error) => resolve(error ?? null)));
}

/** End the input: the last record (without a final line break) is parsed now. */
function ended(parser: Parser): Promise<Error | null> {
  return new Promise((resolve) => parser.end((error?: Error | null) => resolve(error ?? null)));
}

/** The header, then records to rows. */
class CsvShaper {
  /** Byte offset where the last record taken ends: the next one starts after it. */
  lastEnd = 0;
  private names: string[] | null = null;
  /** Declared type per header column (null: infer), or null when nothing is declared. */
  private types: Array<ColumnType | null> | null = null;

  constructor(
    private readonly declared: DeclaredTypes | null,
    private readonly lines: LineIndex,
  ) {}

  get hasHeader(): boolean {
    return this.names !== null;
  }

  /** Rows of the records taken, those ending before `stopAt` (a byte offset; -1: all). */
  *rowsOf(batch: { records: string[][]; ends: number[] }, stopAt: number): Generator<Row> {
    const { records, ends } = batch;
    for (let k = 0; k < records.length; k++) {
      if (stopAt !== -1 && ends[k]! > stopAt) return;
      const record = records[k]!;
      if (this.names === null) this.readHeader(record);
      else yield this.row(record);
      this.lastEnd = ends[k]!;
    }
  }

  /** A csv-parse refusal, for the record that starts after the last one taken. */
  parseError(error: Error): Error {
    if (error instanceof ApiError || !(error instanceof CsvError)) return error;
    const line = this.lines.recordLine(this.lastEnd);
    switch (error.code) {
      case "CSV_RECORD_INCONSISTENT_FIELDS_LENGTH": {
        const fields = (error as CsvError & { record?: unknown[] }).record?.length;
        const expected = this.names?.length;
        return refusal(line, `the row has ${fieldCount(fields)}; the header has ${fieldCount(expected)}`);
      }
      case "CSV_QUOTE_NOT_CLOSED":
        return refusal(line, "a quoted field is not closed (the body ends inside quotes)");
      case "CSV_INVALID_CLOSING_QUOTE":
      case "CSV_NON_TRIMABLE_CHAR_AFTER_CLOSING_QUOTE":
        return refusal(line, 'a quoted field has text after its closing quote (inside quotes, write a quote as "")');
      case "INVALID_OPENING_QUOTE":
        return refusal(
          line,
          'a field that does not start with a quote contains one (quote the whole field and write the quote as "")',
        );
      case "CSV_MAX_RECORD_SIZE":
        return refusal(line, `the row is longer than ${MAX_ROW_CHARS} characters (is a quote left open?)`);
      default:
        return refusal(line, `malformed CSV (${error.code})`);
    }
  }

  private readHeader(record: string[]): void {
    const line = this.lines.recordLine(this.lastEnd);
    if (record.length > MAX_DATASET_COLUMNS)
      throw refusal(line, `the header has ${record.length} columns; at most ${MAX_DATASET_COLUMNS} are allowed`);
    const seen = new Set<string>();
    for (let i = 0; i < record.length; i++) {
      const name = record[i]!;
      if (name === "") throw refusal(line, `column ${i + 1} of the header has no name`);
      if (name.includes("\u0000")) throw refusal(line, `column ${i + 1} of the header holds a NUL character (U+0000)`);
      if (seen.has(name)) throw refusal(line, `the header names column ${JSON.stringify(name)} twice`, name);
      seen.add(name);
      if (this.declared && !this.declared.has(name)) throw refusal(line, undeclaredMessage(name, this.declared), name);
    }
    this.names = record;
    const declared = this.declared;
    if (declared) this.types = record.map((name) => declared.get(name) ?? null);
  }

  private row(record: string[]): Row {
    const names = this.names!;
    const types = this.types;
    const row = emptyRow();
    for (let i = 0; i < names.length; i++) {
      const text = record[i]!;
      // Valid UTF-8 cannot carry an unpaired surrogate, but it can carry NUL, which no store is given (see
      // parseJsonText).
      if (text.includes("\u0000"))
        throw refusal(
          this.lines.recordLine(this.lastEnd),
          `the value of column ${JSON.stringify(names[i])} holds a NUL character (U+0000)`,
          names[i],
        );
      if (text.length > MAX_FIELD_BYTES / 3 && fieldTooLarge(text)) {
        throw refusal(
          this.lines.recordLine(this.lastEnd),
          `the value of column ${JSON.stringify(names[i])} is larger than ${MAX_FIELD_BYTES} bytes`,
          names[i],
        );
      }
      if (types === null) {
        row[names[i]!] = inferCell(text);
        continue;
      }
      const type = types[i]!;
      const value = convertCell(text, type);
      if (value === undefined) {
        throw refusal(
          this.lines.recordLine(this.lastEnd),
          `column ${JSON.stringify(names[i])} expects ${describeType(type!)}`,
          names[i],
        );
      }
      if (type === "json" && typeof value === "object" && value !== null && jsonNestedDeeperThan(text, MAX_NESTING)) {
        throw refusal(
          this.lines.recordLine(this.lastEnd),
          `the JSON in column ${JSON.stringify(names[i])} is nested deeper than ${MAX_NESTING} levels`,
          names[i],
        );
      }
      row[names[i]!] = value;
    }
    return row;
  }
}

/**
 * Line numbers of byte offsets in the body, keeping only the bytes from the
 * last record taken on (a record is bounded, so this is too).
 */
class LineIndex {
  /** Bytes seen so far. */
  size = 0;
  private chunks: Uint8Array[] = [];
  private starts: number[] = [];
  /** Line feeds before each kept chunk. */
  private feedsBefore: number[] = [];
  private feeds = 0;

  add(chunk: Uint8Array): void {
    this.chunks.push(chunk);
    this.starts.push(this.size);
    this.feedsBefore.push(this.feeds);
    this.size += chunk.byteLength;
    this.feeds += countLineFeeds(chunk);
  }

  /** Forget the chunks that end at or before `offset`. */
  release(offset: number): void {
    let drop = 0;
    while (drop < this.chunks.length - 1 && this.starts[drop + 1]! <= offset) drop++;
    if (drop === 0) return;
    this.chunks.splice(0, drop);
    this.starts.splice(0, drop);
    this.feedsBefore.splice(0, drop);
  }

  /** The 1-based line of the byte at `offset` (lines end at LF). */
  lineAt(offset: number): number {
    let k = this.chunks.length - 1;
    while (k > 0 && this.starts[k]! > offset) k--;
    const chunk = this.chunks[k];
    if (!chunk) return 1;
    const within = Math.min(Math.max(offset - this.starts[k]!, 0), chunk.byteLength);
    return 1 + this.feedsBefore[k]! + countLineFeeds(chunk, 0, within);
  }

  /**
   * The line where the record after the one ending at `end` starts: the empty lines the parser skips are passed over.
   */
  recordLine(end: number): number {
    let offset = end;
    for (let byte = this.byteAt(offset); byte === 10 || byte === 13; byte = this.byteAt(++offset));
    return this.lineAt(offset);
  }

  private byteAt(offset: number): number | undefined {
    for (let k = this.chunks.length - 1; k >= 0; k--) {
      if (this.starts[k]! <= offset) return this.chunks[k]![offset - this.starts[k]!];
    }
    return undefined;
  }
}

/** UTF-8 validation across chunks (a character may be split between two). */
class Utf8Check {
  private carry: Uint8Array = new Uint8Array(0);

  /** The body offset of the first invalid byte in `chunk` (which starts at body offset `start`), or -1. */
  check(chunk: Uint8Array, start: number): number {
    let bytes = chunk;
    let from = start;
    if (this.carry.byteLength > 0) {
      bytes = new Uint8Array(this.carry.byteLength + chunk.byteLength);
      bytes.set(this.carry);
      bytes.set(chunk, this.carry.byteLength);
      from -= this.carry.byteLength;
    }
    const complete = bytes.byteLength - unfinishedTail(bytes);
    this.carry = bytes.slice(complete);
    const body = bytes.subarray(0, complete);
    if (isUtf8(body)) return -1;
    return from + Math.max(0, utf8ErrorOffset(body, false));
  }

  /** Whether the body ended inside a character. */
  unfinished(): boolean {
    return this.carry.byteLength > 0;
  }
}

/** Bytes at the end that begin a character the chunk does not finish (0 to 3). */
function unfinishedTail(bytes: Uint8Array): number {
  for (let back = 1; back <= 3 && back <= bytes.byteLength; back++) {
    const b = bytes[bytes.byteLength - back]!;
    if ((b & 0xc0) === 0x80) continue;
    const length = b >= 0xf0 ? 4 : b >= 0xe0 ? 3 : b >= 0xc0 ? 2 : 1;
    return length > back ? back : 0;
  }
  return 0;
}

function fieldCount(count: number | undefined): string {
  return count === undefined ? "another number of fields" : count === 1 ? "1 field" : `${count} fields`;
}
