import { z } from "zod";
import { jsonObjectParam, queryParamDocs } from "../http/query.js";
import { MAX_IN_VALUES, MAX_SORT_COLUMNS, MAX_WHERE_CONDITIONS, MAX_WHERE_DEPTH } from "../domain/row-query-model.js";

/**
 * The row-query parameters of both rows endpoints (../shared/row-queries.md); `where`, `sort` and `cursor` are checked
 * by the handler against the columns.
 */
export const rowQueryParams = {
  where: jsonObjectParam()
    .optional()
    .describe(
      `Conditions, a URL-encoded JSON object: {"column": {"operator": operand}, "and": [...], "or": [...]}. Operators: eq, ne, gt, gte, lt, lte, ` +
        `in, nin (1–${MAX_IN_VALUES} values), isNull (boolean), contains, startsWith. At most ${MAX_WHERE_CONDITIONS} conditions, and/or nested ` +
        `${MAX_WHERE_DEPTH} deep. ANDed with filters. Comparisons never coerce (a number never matches a string); ne, nin and comparisons never ` +
        `match null or absent values.`,
    ),
  sort: describedText(
    `Comma-separated columns, each optionally prefixed by - for descending (at most ${MAX_SORT_COLUMNS}). Nulls last both ways; numbers before ` +
      "strings before booleans before objects and arrays; ties by stored order.",
  ),
  cursor: describedText(
    "metadata.nextCursor of the previous page: continues right after it (keyset paging) under the same where, " +
      "filters and sort; not with offset.",
  ),
  format: z
    .enum(["json", "csv", "ndjson"])
    .optional()
    .describe(
      "json (default), csv (RFC 4180, header line, CRLF) or ndjson, streamed as a download; Accept: text/csv or " +
        "application/x-ndjson chooses the same.",
    ),
};

/** What a rows endpoint may answer besides JSON. */
export const EXPORT_TYPES = ["text/csv", "application/x-ndjson"] as const;

function describedText(description: string) {
  const schema = z.string().min(1, "must not be empty").optional();
  queryParamDocs.add(schema, { openapi: { type: "string", description } });
  return schema;
}
