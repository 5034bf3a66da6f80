import type * as Database from "./driver.js";
import type { Column, Row } from "../domain/model.js";
import type { RowCondition, RowKey, SortKey } from "../domain/row-query-model.js";
import { keyOf } from "../domain/row-query-order.js";
import { raw, renderPositional, Sql, sql } from "../sql/fragments.js";
import { conditionSql } from "../sql/row-compiler.js";
import { matchesFilters } from "../domain/rows.js";
import type { RowQuery } from "../ports/storage/rows.js";
import { parseJson, prepared, rowKey } from "./db.js";
import type { Fetched, Positions } from "./reader-protocol.js";
import {
  boundedColumns,
  datasetIndexPrefix,
  FEW_MATCHES,
  indexableColumn,
  rowIndexName,
  seeksIndex,
  sortedPageSql,
  sqliteRowDialect,
  type SqliteRowDialect,
  throughIndex,
} from "./row-query-dialect.js";
import { DEADLINE_CHECK } from "./statement-deadline.js";

/*
 * What a read of dataset rows with conditions, filters or a sort runs on a
 * connection: its plan, its count, its page, its batches. Synchronous, on
 * whichever connection it is given: the writer connection on the event loop
 * (a read that ends quickly) or a reader thread's own (see reader-pool.ts).
 */

/** Rows fetched per step of a streamed read. */
export const BATCH = 500;
/** Reads up to this many rows are answered from one query (a page); larger ones are streamed in batches. */
export const SMALL_READ = 1000;

/**
 * A read split into what SQL can filter and what only JSON equality in JS can
 * (object/array filter values, odd column names), with the compiled `where`
 * and the sort (empty: stored order).
 */
export interface ReadPlan {
  at: Positions;
  where: string;
  params: unknown[];
  residual: Record<string, unknown> | null;
  condition: Sql | null;
  sort: SortKey[];
  /** The dataset's dialect: its indexed (declared) columns, its positions as row keys. */
  dialect: SqliteRowDialect;
  /** The read starts from a row index (`seeksIndex`); a count, also from a range on one. */
  seek: { page: boolean; count: boolean };
  /** A sorted page walks this index (its sort column's), whatever index the conditions would pick (`settlePlan`). */
  walk?: string;
}

/** Where the next batch starts: after a position (stored order) or after a row key (sorted). */
type Resume = { position: number } | { key: RowKey | null };

export type { Fetched, Positions };

const POSITIONS = "SELECT id, seq, first_position, next_position FROM datasets WHERE id = ?";

/** The dataset's window as the connection's transaction sees it. */
export function positionsOf(db: Database.Database, datasetId: string): Positions | undefined {
  return prepared<Positions>(db, POSITIONS).get(datasetId);
}

/** The plan of a read that is not a plain page, before its count. */
export function planRead(db: Database.Database, at: Positions, query: RowQuery): ReadPlan {
  const { where, params, residual } = compileFilters(query.filters);
  const sort = query.sort ?? [];
  const dialect = datasetDialect(db, at.seq, query.where || sort.length > 0, query.where);
  const condition = query.where ?? null;
  return {
    at,
    where,
    params,
    residual,
    condition: condition ? conditionSql(condition, dialect) : null,
    sort,
    dialect,
    seek: { page: seeksIndex(condition, sort, dialect, false), count: seeksIndex(condition, [], dialect, true) },
  };
}

/** What a count depends on besides the window: the same conditions and filters, the same count. */
export function countKey(seq: number, query: RowQuery): string {
  return `${seq}\u0000${JSON.stringify([query.where ?? null, query.filters])}`;
}

/** No conditions and no filters: every row of the window matches, and the count is the window's size. */
export function isPlain(plan: ReadPlan): boolean {
  return plan.where === "" && plan.residual === null && plan.condition === null;
}

/**
 * How the page is read once the count is known:
 * - a range on an indexed column that the count (from that index) found few
 *   rows in: the page seeks them too, sorting at most FEW_MATCHES, instead
 *   of walking the window to find them;
 * - sorted by an indexed column under conditions that match many rows: the
 *   page walks the sort column's index and stops after the page, instead of
 *   letting the planner seek a condition's index and sort every match
 *   (seconds for a range matching most of a million rows).
 */
export function settlePlan(plan: ReadPlan, totalRows: number): void {
  if (!plan.seek.page && plan.seek.count && totalRows <= FEW_MATCHES) plan.seek.page = true;
  const only = plan.sort.length === 1 ? plan.sort[0]!.column : null;
  if (only !== null && plan.dialect.indexed.has(only) && plan.condition !== null && totalRows > FEW_MATCHES) {
    plan.walk = rowIndexName(datasetIndexPrefix(plan.at.seq), only);
  }
}

/**
 * Whether the read is likely to visit many rows: a count or a page that no
 * row index serves, over a window of more than `rows` rows. (A read that is
 * not may still take long: the caller bounds it anyway.)
 */
export function scansMany(plan: ReadPlan, counted: boolean, rows: number): boolean {
  if (plan.at.next_position - plan.at.first_position <= rows) return false;
  const countScans = !counted && !isPlain(plan) && !plan.seek.count;
  return countScans || (!plan.seek.page && (plan.sort.length > 0 || !isPlain(plan)));
}

export function countRows(db: Database.Database, plan: ReadPlan): number {
  if (isPlain(plan)) return plan.at.next_position - plan.at.first_position;
  // Bounded by the window on both sides: rows below it (a replace's old rows, not yet swept) and
  // above it (a bulk write's staged rows) are not the dataset's.
  const { text, params } = renderPositional(
    sql`SELECT ${raw(plan.residual ? "data" : "count(*) AS n")} FROM dataset_rows WHERE ${windowOf(plan, plan.seek.count)} ${conditionsOf(plan)}`,
  );
  if (!plan.residual) {
    return (prepared(db, text).get(...params) as { n: number }).n;
  }
  let n = 0;
  for (const r of db.prepare(text).iterate(...params) as Iterable<{ data: string }>) {
    if (matchesFilters(parseJson(r.data), plan.residual)) n++;
  }
  return n;
}

/** A read answered by one query (`firstPage`): at most SMALL_READ rows, every filter in SQL. */
export function isSmallRead(plan: ReadPlan, query: RowQuery): query is RowQuery & { limit: number } {
  return plan.residual === null && query.limit !== null && query.limit <= SMALL_READ;
}

/** The rows of a small read (`isSmallRead`), in its order. */
export function firstPage(db: Database.Database, plan: ReadPlan, query: RowQuery & { limit: number }): Fetched[] {
  return fetchBatch(db, plan, startOf(plan, query), query.limit, sqlOffsetFor(plan, query.offset));
}

/**
 * A large read in keyset batches, in the snapshot of the caller's read
 * transaction on `db`, which the caller holds open for the whole read, so
 * it sees one snapshot (a concurrent refresh is seen entirely or not at
 * all). The window is read again in that snapshot, so a bulk write
 * published since the plan was made is read whole (its rows, not the old
 * ones being swept); a dataset deleted meanwhile (another seq) yields
 * nothing. Each batch continues after the last row of the one before: by
 * position in stored order, by row key when sorted. Yields the rows to
 * answer, filtered, after the offset, at most the limit; SQL runs as each
 * batch is asked for.
 */
export function* streamedBatches(
  db: Database.Database,
  asked: ReadPlan,
  query: RowQuery,
): Generator<Fetched[], void, undefined> {
  const at = positionsOf(db, asked.at.id);
  if (!at || at.seq !== asked.at.seq) return;
  const plan: ReadPlan = { ...asked, at };
  let resume = startOf(plan, query);
  let sqlOffset = sqlOffsetFor(plan, query.offset);
  let skip = plan.residual ? query.offset : 0;
  let remaining = query.limit ?? Number.POSITIVE_INFINITY;
  while (remaining > 0) {
    const batch = fetchBatch(db, plan, resume, BATCH, sqlOffset);
    sqlOffset = 0;
    const end = batch.at(-1);
    if (end && plan.sort.length > 0) resume = { key: keyOf(parseJson<Row>(end.data), end.position, plan.sort) };
    else if (end) resume = { position: end.position };
    const answered: Fetched[] = [];
    for (const r of batch) {
      if (plan.residual && !matchesFilters(parseJson<Row>(r.data), plan.residual)) continue;
      if (skip > 0) {
        skip--;
        continue;
      }
      answered.push(r);
      if (--remaining <= 0) break;
    }
    if (answered.length > 0) yield answered;
    if (batch.length < BATCH) break;
  }
}

/**
 * The rows of the dataset's window: rows below it (a replace's old rows, not
 * yet swept) and above it (a bulk write's staged rows) are not the
 * dataset's. A read that starts from a row index names the dataset by the
 * literal of the index's condition and keeps the planner off the row key
 * range (`+row_key`), which it would otherwise take for the cheaper start.
 * The deadline check comes first, so it is called for every row visited.
 */
function windowOf(plan: ReadPlan, seek: boolean): Sql {
  const low = rowKey(plan.at.seq, plan.at.first_position);
  const high = rowKey(plan.at.seq, plan.at.next_position);
  if (!seek) return sql`${raw(DEADLINE_CHECK)} AND row_key >= ${low} AND row_key < ${high}`;
  const dataset = raw(String(plan.at.seq));
  return sql`${raw(DEADLINE_CHECK)} AND dataset_seq = ${dataset} AND +row_key >= ${low} AND +row_key < ${high}`;
}

/**
 * A dataset's dialect: positions are compared as row keys (the same order
 * within a dataset; the key is what its indexes hold); declared columns are
 * indexed (see `syncRowIndexes`), read only for a read with where or sort.
 */
function datasetDialect(
  db: Database.Database,
  seq: number,
  queried: unknown,
  where: RowCondition | null | undefined,
): SqliteRowDialect {
  // Without where and sort the dialect goes unused: rows come by position.
  if (!queried) return PLAIN_DIALECT;
  let indexed: ReadonlySet<string> | undefined;
  const found = prepared<{ columns: string; columns_declared: number }>(
    db,
    "SELECT columns, columns_declared FROM datasets WHERE seq = ?",
  ).get(seq);
  if (found?.columns_declared === 1)
    indexed = new Set(
      parseJson<Column[]>(found.columns)
        .map((c) => c.name)
        .filter(indexableColumn),
    );
  return sqliteRowDialect("data", "row_key", {
    ...(indexed && { indexed, bounded: boundedColumns(where) }),
    positionValue: (position) => sql`${rowKey(seq, Math.min(Math.max(position, -1), MAX_POSITION - 1))}`,
  });
}

const MAX_POSITION = 2 ** 43;
const PLAIN_DIALECT = sqliteRowDialect("data", "position");

/** The filters and the `where` of a read as one fragment (`AND …` each). */
function conditionsOf(plan: ReadPlan): Sql {
  // compileFilters' SQL holds no literal "?": its placeholders are its params, in order.
  const filters = new Sql(plan.where.split("?"), plan.params);
  return plan.condition === null ? filters : sql`${filters} AND ${plan.condition}`;
}

/**
 * Where a read starts. In stored order without conditions the row at
 * offset k after position p sits at p + 1 + k (positions are dense): skip
 * by key, not by scanning. A cursor's position from before a replace is
 * below the window: the read starts at its beginning.
 */
function startOf(plan: ReadPlan, query: RowQuery): Resume {
  if (plan.sort.length > 0) return { key: query.after ?? null };
  const from = Math.max(plan.at.first_position - 1, query.after?.position ?? -Infinity);
  return { position: isPlain(plan) ? from + query.offset : from };
}

/** The offset SQL skips: none when `startOf` made it a position, or when JS filters (and skips) rows. */
function sqlOffsetFor(plan: ReadPlan, offset: number): number {
  return (isPlain(plan) && plan.sort.length === 0) || plan.residual !== null ? 0 : offset;
}

/** One batch of the read from `resume` on, in its order. */
function fetchBatch(db: Database.Database, plan: ReadPlan, resume: Resume, limit: number, offset: number): Fetched[] {
  const high = rowKey(plan.at.seq, plan.at.next_position);
  if ("position" in resume) {
    const after = rowKey(plan.at.seq, Math.max(resume.position, plan.at.first_position - 1));
    const range = plan.seek.page
      ? sql`dataset_seq = ${raw(String(plan.at.seq))} AND +row_key > ${after} AND +row_key < ${high}`
      : sql`row_key > ${after} AND row_key < ${high}`;
    const { text, params } = renderPositional(
      sql`SELECT position, data FROM dataset_rows WHERE ${raw(DEADLINE_CHECK)} AND ${range} ${conditionsOf(plan)}
          ORDER BY row_key LIMIT +${limit} OFFSET ${offset}`,
    );
    return prepared<Fetched>(db, text).all(...params);
  }
  const sorted = (from: string) =>
    renderPositional(
      sortedPageSql(
        {
          select: "position, data",
          from,
          where: sql`${windowOf(plan, plan.seek.page)} ${conditionsOf(plan)}`,
          sort: plan.sort,
          after: resume.key,
          limit,
          offset,
        },
        plan.dialect,
      ),
    );
  return throughIndex((text) => prepared(db, text), "dataset_rows", plan.walk ?? null, sorted).all() as Fetched[];
}

/** A key SQLite would receive mangled (UTF-8 cannot carry it): filtered in JS instead. */
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

/**
 * Exact-match filters as SQL over the stored JSON: the JSON type must match
 * too, so `"30"` never equals `30` and `true` never equals `1`. A missing
 * key matches a null filter. Object and array values (key order does not
 * matter for JSON equality) and column names a JSON path cannot quote are
 * left to `matchesFilters` in JS, after a type check in SQL.
 */
export function compileFilters(filters: Record<string, unknown> | null): {
  where: string;
  params: unknown[];
  residual: Record<string, unknown> | null;
} {
  if (!filters) return { where: "", params: [], residual: null };
  const clauses: string[] = [];
  const params: unknown[] = [];
  let residual: Record<string, unknown> | null = null;
  const keepInJs = (key: string, value: unknown) => {
    residual ??= Object.create(null) as Record<string, unknown>;
    residual[key] = value;
  };
  for (const key of Object.keys(filters)) {
    const value = filters[key];
    if (/["\\]/.test(key) || LONE_SURROGATE.test(key)) {
      keepInJs(key, value);
      continue;
    }
    const path = `$."${key}"`;
    if (value === null || value === undefined) {
      clauses.push("coalesce(json_type(data, ?), 'null') = 'null'");
      params.push(path);
    } else if (typeof value === "string") {
      clauses.push("(json_type(data, ?) = 'text' AND json_extract(data, ?) = ?)");
      params.push(path, path, value);
    } else if (typeof value === "number") {
      clauses.push("(json_type(data, ?) IN ('integer', 'real') AND json_extract(data, ?) = ?)");
      params.push(path, path, value);
    } else if (typeof value === "boolean") {
      clauses.push("json_type(data, ?) = ?");
      params.push(path, value ? "true" : "false");
    } else {
      clauses.push("json_type(data, ?) = ?");
      params.push(path, Array.isArray(value) ? "array" : "object");
      keepInJs(key, value);
    }
  }
  return { where: clauses.map((c) => `AND ${c}`).join(" "), params, residual };
}
