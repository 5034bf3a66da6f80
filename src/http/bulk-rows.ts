import { MAX_DATASET_COLUMNS, typeOfValue, widenType } from "../domain/columns.js";
import type { Column, ColumnType, Row } from "../domain/model.js";
import { ApiError } from "../base/api-error.js";
import { declaredTypes } from "./bulk-common.js";
import { csvRows } from "./bulk-csv.js";
import { jsonRows } from "./bulk-json.js";

/**
 * Bulk row uploads (`PUT/POST /api/admin/v1/datasets/{id}/rows`): a body in
 * one of three formats becomes rows as it arrives, so a store can write a
 * million of them without the body or the rows ever being held whole.
 *
 * - `application/json`: an array of objects.
 * - `application/x-ndjson` (or `application/ndjson`): one object per line;
 *   blank lines are skipped.
 * - `text/csv`: RFC 4180 with a header row (bulk-csv.ts for the rules).
 *
 * JSON rows flatten as webhook rows do: nested objects become dotted
 * columns (`{"a":{"b":1}}` → `a.b`), arrays become JSON text. Every row is a
 * null-prototype object, so a column named `__proto__` is data. Any refusal
 * is a 422 `validation_failed` whose `details.line` is the line of the body
 * (1-based) where the offending row starts, with `details.column` when one
 * column is at fault; it is thrown by the iteration, so a store that
 * consumes the rows writes nothing. Bounds: a value of at most 1 MiB, at
 * most MAX_DATASET_COLUMNS columns, JSON nested at most 64 levels.
 */
export type BulkRowFormat = "json" | "ndjson" | "csv";

export interface RowStreamOptions {
  /**
   * The dataset's declared columns. When it declares any, a column it does
   * not declare is refused, a CSV cell converts to its column's type (or
   * the row is refused), and a JSON value must already be of that type. A
   * column declared `json` keeps a nested JSON value whole. null or []:
   * types are inferred.
   */
  columns: readonly Column[] | null;
}

/** The format of a bulk body by its Content-Type; 415 for any other type or a charset other than UTF-8. */
export function bulkRowFormat(contentType: string | null): BulkRowFormat {
  const [type = "", ...parameters] = (contentType ?? "").split(";").map((part) => part.trim().toLowerCase());
  const format: BulkRowFormat | null =
    type === "application/json"
      ? "json"
      : type === "application/x-ndjson" || type === "application/ndjson"
        ? "ndjson"
        : type === "text/csv"
          ? "csv"
          : null;
  if (format === null) {
    throw new ApiError(
      415,
      "unsupported_media_type",
      "send the rows as application/json (an array of objects), application/x-ndjson or text/csv",
    );
  }
  const charset = parameters
    .find((p) => p.startsWith("charset="))
    ?.slice("charset=".length)
    .replace(/^"|"$/g, "");
  if (charset !== undefined && charset !== "utf-8" && charset !== "utf8" && charset !== "us-ascii") {
    throw new ApiError(415, "unsupported_media_type", `send the rows as UTF-8 (the body declares charset ${charset})`);
  }
  return format;
}

/**
 * The rows of a bulk body, parsed as the chunks arrive. The media type is
 * checked at once (415); everything else when the rows are read.
 */
export function parseRowStream(
  chunks: AsyncIterable<Uint8Array>,
  contentType: string | null,
  options: RowStreamOptions,
): AsyncIterable<Row> {
  const format = bulkRowFormat(contentType);
  const declared = declaredTypes(options.columns);
  return format === "csv" ? csvRows(chunks, declared) : jsonRows(chunks, format, declared);
}

/**
 * The columns of rows as they pass (for `DatasetRowsWrite.columns()`):
 * `base` first (the dataset's declared columns, or its stored ones when
 * appending), then new names in first-seen order, every type widened over
 * the rows read (`widenType`). At most MAX_DATASET_COLUMNS columns, as
 * `widenColumns` keeps. `columns()` answers for the rows read so far.
 */
export function inferColumnsAlongside(
  rows: AsyncIterable<Row>,
  base: readonly Column[] = [],
): { rows: AsyncIterable<Row>; columns(): Column[] } {
  const types = new Map<string, ColumnType | null>(base.map((c) => [c.name, c.type] as const));
  return {
    rows: {
      async *[Symbol.asyncIterator]() {
        for await (const row of rows) {
          noteColumns(types, row);
          yield row;
        }
      },
    },
    columns: () => [...types].map(([name, type]) => ({ name, type })),
  };
}

function noteColumns(types: Map<string, ColumnType | null>, row: Row): void {
  for (const name of Object.keys(row)) {
    const value = row[name];
    const known = types.get(name);
    if (known === undefined) {
      if (types.size < MAX_DATASET_COLUMNS) types.set(name, typeOfValue(value));
      continue;
    }
    // What the row holds usually is the column's type already (see rowChangesColumns).
    if (
      value === null ||
      known === "json" ||
      known === typeof value ||
      (known === "string" && typeof value !== "object")
    )
      continue;
    const widened = widenType(known, typeOfValue(value));
    if (widened !== known) types.set(name, widened);
  }
}
