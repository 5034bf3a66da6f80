import { LRUCache } from "lru-cache";
import type { PoolClient } from "pg";
import type { AggregateAnswer, AggregateQuery } from "../domain/aggregate-query.js";
import { mapped } from "../domain/async-iterables.js";
import type { Column, Row } from "../domain/model.js";
import type { RowKey, SortKey } from "../domain/row-query-model.js";
import { keyOf } from "../domain/row-query-order.js";
import { selectColumns } from "../domain/rows.js";
import type { RowPage, RowQuery, RowStore, RowWrites } from "../ports/storage/rows.js";
import { renderNumbered } from "../sql/fragments.js";
import { afterSql, conditionSql, orderSql } from "../sql/row-compiler.js";
import { bulkRowWriter } from "./dataset-rows.js";
import { insertJsonRowsSql } from "./dataset-values-sql.js";
import { begun, bounded, type Db, isConnectionLost, json, type Lease, num, storeFault } from "./db.js";
import {
  HAS_JSONB,
  hasNul,
  indexableColumn,
  postgresRowDialect,
  type PostgresRowDialect,
  SANE_ROW,
  UNPARSABLE,
} from "./row-query-dialect.js";

/** Rows fetched per round trip while streaming a read. */
const BATCH = 1000;
/** Rows per INSERT statement when writing many rows. */
const WRITE_BATCH = 5000;

/**
 * The rows of upload and connection datasets: pages read in one snapshot
 * (streamed ones in a transaction of their own, `reads`), counts remembered
 * by the rows' version, bulk writes staged then published in one short
 * transaction. `aggregates` answers `aggregateDatasetRows` (aggregate.ts).
 */
export function postgresRows(
  db: Db,
  reads: OpenReads,
  aggregates: { aggregateDatasetRows(datasetId: string, query: AggregateQuery): Promise<AggregateAnswer> },
): RowStore & RowWrites {
  const writeRows = bulkRowWriter(db);
  const counts: CountMemo = new LRUCache({ max: COUNT_MEMO_SIZE });
  return {
    aggregateDatasetRows: aggregates.aggregateDatasetRows,
    readDatasetRows(datasetId, query) {
      return readRows(db, datasetId, query, reads, counts);
    },
    async replaceDatasetRows(datasetId, data) {
      // A refresh is a bulk replace: staged, then published in one short transaction.
      await writeRows({
        datasetId,
        mode: "replace",
        rows: data.rows,
        columns: () => data.columns,
        updatedAt: data.refreshedAt,
        refreshedAt: data.refreshedAt,
      });
    },
    writeDatasetRows(write) {
      return writeRows(write);
    },
  };
}

/** Insert rows at positions `firstPos`, `firstPos + 1`, … in batches (the caller sets the window). */
export async function insertDatasetRows(
  client: PoolClient,
  t: Db["t"],
  datasetId: string,
  rows: readonly Row[],
  firstPos: number,
): Promise<void> {
  for (let start = 0; start < rows.length; start += WRITE_BATCH) {
    const batch = rows.slice(start, start + WRITE_BATCH);
    await client.query(insertJsonRowsSql(t), [datasetId, firstPos + start, json(batch)]);
  }
}

/**
 * The SQL condition for exact-match filters: JSON equality of the stored
 * value (a missing key counts as null), compared as jsonb so object key
 * order and number spelling do not matter — the same rule as `jsonEquals`.
 * Equality to a non-null value implies containment, so the non-null filters
 * also become one `@>` over the GIN index, which narrows the read to the
 * candidate rows; equality is then checked on those.
 */
function filterSql(filters: Record<string, unknown> | null, params: unknown[], how: Reading): string {
  if (!filters) return "";
  const keys = Object.keys(filters);
  if (keys.length === 0) return "";
  // A window holding a row PostgreSQL cannot take apart reads `SANE_ROW`, which no index covers; any
  // other reads `row`, through the GIN index, whose condition (HAS_JSONB) its rows all meet.
  const doc = how.sane ? SANE_ROW : "row";
  const parts = how.sane ? [] : [HAS_JSONB];
  const contained: Record<string, unknown> = Object.create(null);
  for (const key of keys) {
    const value = filters[key] ?? null;
    // PostgreSQL text cannot carry U+0000: a filter holding one matches nothing.
    if (key.includes("\u0000") || hasNul(value)) return " and false";
    if (value !== null) contained[key] = value;
    params.push(key, json(value));
    parts.push(`coalesce((${doc}::jsonb) -> $${params.length - 1}::text, 'null'::jsonb) = $${params.length}::jsonb`);
  }
  if (!how.sane && Object.keys(contained).length > 0)
    parts.push(`(row::jsonb) @> $${params.push(json(contained))}::jsonb`);
  return ` and ${parts.join(" and ")}`;
}

/**
 * A page with its `totalRows`, consistent with a bulk write committing
 * meanwhile (seen entirely or not at all, never the old count with the new
 * rows). A page of at most BATCH rows is one statement: count and rows from
 * one snapshot. A longer read counts and streams in one read-only
 * REPEATABLE READ transaction (see `SnapshotRows`): memory holds one batch
 * at a time, and the rows are those the count saw. Without filters the
 * offset becomes a position (`first_pos + offset`), so a deep page costs an
 * index seek.
 */
async function readRows(
  db: Db,
  datasetId: string,
  query: RowQuery,
  reads: OpenReads,
  counts: CountMemo,
): Promise<RowPage> {
  const { t } = db;
  const limit = query.limit ?? null;
  const params: unknown[] = [datasetId];
  const filtered = query.filters !== null && Object.keys(query.filters).length > 0;
  const how = query.where || query.sort?.length || filtered ? await datasetReading(db, datasetId) : PLAIN;
  const memoKey = `${datasetId}\u0000${JSON.stringify([query.where ?? null, query.filters ?? null])}`;
  const remember = (row: { n: string | null; counted_at: string | null } | undefined) => {
    if (row?.counted_at) counts.set(memoKey, { version: row.counted_at, n: num(row.n) });
  };
  if (choosesByCount(how, query) && !counts.has(memoKey)) {
    // How a sorted page reads depends on how many rows match (pageReading): count first. The page's
    // statement still answers its own count if the dataset changed in between.
    const countParams: unknown[] = [datasetId];
    remember(
      (
        await db.query<{ n: string | null; counted_at: string | null }>(
          countSql(t, query, countParams, how, null),
          countParams,
        )
      )[0],
    );
  }
  const count = countSql(t, query, params, how, counts.get(memoKey) ?? null);
  if (limit !== null && limit <= BATCH) {
    const page = pageSql(t, query, params, pageReading(how, query, counts.get(memoKey)?.n ?? null));
    // The left join keeps the count when the page is empty (pos is then null).
    const result = await db.query<{ n: string | null; counted_at: string | null } & Partial<PageRow>>(
      `select c.n, c.counted_at, p.pos, p.r, p.k from (${count}) c left join lateral (${page}) p on true order by p.ord`,
      params,
    );
    remember(result[0]);
    const found = result.filter(
      (x): x is { n: string | null; counted_at: string | null } & PageRow => x.pos !== null && x.pos !== undefined,
    );
    const end = found.at(-1);
    // A plain iterator over the rows read, not an async generator (see `domain/async-iterables.ts`).
    const rows = mapped(found, (x) => toRow(x.r, query.columns));
    return { totalRows: num(result[0]?.n), rows, lastKey: () => (end ? keyOfPage(end, query.sort) : null) };
  }
  const lease = await begun(db.pool, SNAPSHOT);
  try {
    const [counted] = (
      await lease.client.query<{ n: string | null; counted_at: string | null; version: string | null }>(
        `select c.n, c.counted_at, (select rows_version from ${t("datasets")} where id = $1) as version from (${count}) c`,
        params,
      )
    ).rows;
    remember(counted);
    const rows = new SnapshotRows(
      db,
      lease,
      datasetId,
      query,
      pageReading(how, query, counted ? num(counted.n) : null),
      counted?.version ?? null,
      reads,
    );
    return { totalRows: num(counted?.n), rows, lastKey: () => rows.lastKey };
  } catch (error) {
    await lease.client.query("ROLLBACK").catch(() => lease.spoil());
    lease.release();
    throw error;
  }
}

/** How often a long read goes on after a lost connection before it gives up. */
const MAX_RESUMES = 3;

/** A page's transaction not yet read is given back after this long (its reader never came). */
const UNREAD_MS = 30_000;

/**
 * The transaction a long read counts and streams in. It may idle while its
 * reader is slow to take rows, so its bound is a reader's (a little past
 * UNREAD_MS, so an unread page is ended here first), not a writer's; it
 * holds no lock a row write waits for. A reader slower than that goes on
 * from the row it reached, on a new connection (`resume`).
 */
const SNAPSHOT = bounded("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", { idleMs: UNREAD_MS + 5_000 });

/** The long reads whose transaction is open, so closing the store ends them instead of waiting for them. */
export type OpenReads = Set<SnapshotRows>;

/**
 * The rows of a long page through a server-side cursor, in the REPEATABLE
 * READ transaction its count ran in: a bulk write committing meanwhile is
 * not seen. The transaction ends (and its connection goes back) when the
 * iteration ends, breaks or throws — or, for a page whose rows are never
 * read (a caller that wanted `totalRows` alone), after UNREAD_MS or when
 * the store closes.
 *
 * When the connection is lost midway (a terminated backend, a failover),
 * the read goes on once, on a fresh connection, from the row it reached —
 * if no bulk write changed the rows since the count (`rows_version`);
 * otherwise it throws rather than mix two versions.
 */
class SnapshotRows implements AsyncIterable<Row> {
  private done = false;
  private readonly unread: ReturnType<typeof setTimeout>;
  /** The key of the last row yielded (`RowPage.lastKey`). */
  lastKey: RowKey | null = null;

  constructor(
    private readonly db: Db,
    private lease: Lease,
    private readonly datasetId: string,
    private readonly query: RowQuery,
    private readonly how: Reading,
    private readonly version: string | null,
    private readonly reads: OpenReads,
  ) {
    reads.add(this);
    this.unread = setTimeout(() => void this.end(false), UNREAD_MS);
    this.unread.unref?.();
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<Row> {
    clearTimeout(this.unread);
    if (this.done) throw new Error("the rows of this page were given up unread; read the page again");
    let ok = false;
    let read = 0;
    let resumes = 0;
    try {
      let declared = false;
      for (;;) {
        let batch: PageRow[];
        try {
          if (!declared) await (resumes === 0 ? this.declare(0) : this.resume(read));
          declared = true;
          batch = (await this.lease.client.query<PageRow>(`fetch ${BATCH} from dataport_rows`)).rows;
        } catch (error) {
          // A failover ends every connection of the pool: the next one may be gone too, so a few tries.
          if (resumes >= MAX_RESUMES || !isConnectionLost(error)) throw storeFault(error);
          resumes++;
          declared = false;
          continue;
        }
        for (const fetched of batch) {
          read++;
          this.lastKey = keyOfPage(fetched, this.query.sort);
          yield toRow(fetched.r, this.query.columns);
        }
        if (batch.length < BATCH) break;
      }
      ok = true;
    } finally {
      // An abandoned iteration lands here too; the transaction only read.
      await this.end(ok);
    }
  }

  /** The cursor over the page from its `skip`th row on. */
  private async declare(skip: number): Promise<void> {
    const { query } = this;
    const rest = { ...query, offset: query.offset + skip, limit: query.limit === null ? null : query.limit - skip };
    const params: unknown[] = [this.datasetId];
    await this.lease.client.query(
      `declare dataport_rows no scroll cursor for ${pageSql(this.db.t, rest, params, this.how)}`,
      params,
    );
  }

  /** The same page from its `skip`th row, on a new connection, when the rows are still those counted. */
  private async resume(skip: number): Promise<void> {
    this.lease.spoil();
    this.lease.release();
    this.lease = await begun(this.db.pool, SNAPSHOT);
    const found = await this.lease.client.query<{ version: string }>(
      `select rows_version as version from ${this.db.t("datasets")} where id = $1`,
      [this.datasetId],
    );
    if ((found.rows[0]?.version ?? null) !== this.version) {
      throw new Error(
        `the rows of dataset ${this.datasetId} changed while a page of them was read after a lost connection; read it again`,
      );
    }
    await this.declare(skip);
  }

  /** Commit (or roll back) and give the connection back; once. */
  async end(ok: boolean): Promise<void> {
    if (this.done) return;
    this.done = true;
    clearTimeout(this.unread);
    this.reads.delete(this);
    await this.lease.client.query(ok ? "COMMIT" : "ROLLBACK").catch(() => this.lease.spoil());
    this.lease.release();
  }
}

/**
 * The row count of a read (filters and `where` applied), as `n`. Without
 * them it is the window's size; with them, a count of the window's
 * matching rows.
 */
function countSql(t: Db["t"], query: RowQuery, params: unknown[], how: Reading, known: Counted | null): string {
  const where = filterSql(query.filters, params, how) + whereSql(query, params, how);
  if (where === "")
    return `select coalesce((select next_pos - first_pos from ${t("datasets")} where id = $1), 0) as n, null::text as counted_at`;
  const version = `(select ${COUNTED_AT} from ${t("datasets")} where id = $1)`;
  // The count in an uncorrelated subquery of a CASE branch: PostgreSQL runs it only when that branch is taken.
  return `select case when ${version} = $${params.push(known?.version ?? null)}::text then $${params.push(known?.n ?? null)}::bigint
      else (select count(*) from ${t("dataset_rows")} where dataset_id = $1 and ${windowSql(t)}${where}) end as n,
    ${version} as counted_at`;
}

/**
 * The counts of reads with conditions, by dataset and conditions, each with
 * the version of the dataset row it was made at (`COUNTED_AT`). A read
 * sends the count it holds, and its statement answers it instead of
 * counting when the dataset row is still that version, checked in the
 * read's own snapshot: every change of the rows a read sees (an append, a
 * trim, a bulk write's publishing, a delete and re-create) writes that row,
 * which gives it a new xmin. So a cursor's next page (or any read repeated)
 * does not count the same matching rows again; `totalRows` stays exact.
 * Bounded, one per store instance.
 */
export type CountMemo = LRUCache<string, Counted>;

interface Counted {
  version: string;
  n: number;
}

const COUNT_MEMO_SIZE = 1024;

/** The version of a dataset row: its xmin (new at every write of the row) and its window. */
const COUNTED_AT = "xmin::text || ':' || rows_version || ':' || first_pos || ':' || next_pos";

/**
 * A page row: position, the row (or the selected values as a JSON array), the sort values (`k`, null unsorted), its
 * rank in the page (`ord`).
 */
interface PageRow {
  pos: string;
  r: unknown;
  k: unknown[] | null;
}

/** How a read with where or sort reads the dataset's columns: through row indexes or not. */
interface Reading {
  dialect: PostgresRowDialect;
  /** The indexes' condition (` and HAS_JSONB`), held by the rows of a window without unparsable rows; else "". */
  guard: string;
  /** The window holds a row PostgreSQL cannot take apart: conditions, filters and sorts read `SANE_ROW`. */
  sane?: true;
}

const PLAIN: Reading = { dialect: postgresRowDialect("row", "pos"), guard: "" };
const SANE: Reading = { dialect: postgresRowDialect(SANE_ROW, "pos"), guard: "", sane: true };

/**
 * A dataset's declared columns are indexed (row-indexes.ts) for the rows
 * PostgreSQL can take apart. A window holding a row it cannot (a `\u0000`
 * escape: rare, found through the small `dataset_rows_unparsable` index)
 * is read without the indexes, as before them.
 */
async function datasetReading(db: Db, datasetId: string): Promise<Reading> {
  const [found] = await db.query<{ columns: Column[]; columns_declared: boolean; unparsable: boolean }>(
    `select d.columns, d.columns_declared, exists (select 1 from ${db.t("dataset_rows")} r where r.dataset_id = d.id and ${UNPARSABLE}
        and r.pos >= d.first_pos and r.pos < d.next_pos) as unparsable
       from ${db.t("datasets")} d where d.id = $1`,
    [datasetId],
  );
  if (found?.unparsable) return SANE;
  if (!found?.columns_declared) return PLAIN;
  const indexed = new Set(found.columns.map((c) => c.name).filter(indexableColumn));
  return indexed.size === 0
    ? PLAIN
    : { dialect: postgresRowDialect("row", "pos", { indexed }), guard: ` and ${HAS_JSONB}` };
}

/** Matches a sorted page may seek through a condition's index and sort (see `pageReading`). */
const FEW_MATCHES = 10_000;

/**
 * How a page sorted by one indexed column reads its conditions: through
 * plain expressions (no index of theirs to take), so the planner walks the
 * sort column's index and stops after the page — unless the read's count,
 * when known, says the matches are few enough to seek and sort. PostgreSQL
 * has no statistics of a JSON column's values: it took a range matching
 * most of a million rows for a handful and sorted all of them (seconds).
 */
function pageReading(how: Reading, query: RowQuery, matches: number | null): Reading {
  if (!choosesByCount(how, query) || (matches !== null && matches <= FEW_MATCHES)) return how;
  return { ...how, dialect: postgresRowDialect("row", "pos", { indexed: new Set([query.sort![0]!.column]) }) };
}

/**
 * A page sorted by one indexed column under conditions that could seek another index: its reading depends on its count.
 */
function choosesByCount(how: Reading, query: RowQuery): boolean {
  const sort = query.sort ?? [];
  return !!query.where && sort.length === 1 && how.dialect.indexed.has(sort[0]!.column) && how.dialect.indexed.size > 1;
}

/** ` and (…)` for the read's `where` (and the indexes' condition), or nothing. */
function whereSql(query: RowQuery, params: unknown[], how: Reading): string {
  return query.where ? `${how.guard} and ${renderNumbered(conditionSql(query.where, how.dialect), params)}` : "";
}

/**
 * The page as `pos`, `r`, `k` and `ord` (see PageRow), in the read's order.
 * `$1` is the dataset id. Positions in the window are dense, so in stored
 * order without conditions the offset (after a cursor's position) is a
 * position: a deep page costs an index seek, not a walk over the rows
 * before it. Sorted, a cursor is a keyset predicate over the sort terms.
 */
function pageSql(t: Db["t"], query: RowQuery, params: unknown[], how: Reading): string {
  const sort = query.sort ?? [];
  const indexedOrder = how.dialect.indexedOrder(sort);
  // The whole row: columns and sort keys are taken from it in JS (`toRow`, `keyOfPage`), as PostgreSQL's
  // `->` fails on a row holding a value it cannot take apart (see SANE_ROW).
  const select = "row";
  const keys = "null::json";
  let where = filterSql(query.filters, params, how) + whereSql(query, params, how);
  // A sort by an indexed column walks its index, which holds only rows with the indexes' condition.
  if (indexedOrder && !query.where) where += how.guard;
  let sql: string;
  if (where !== "" || sort.length > 0) {
    let after = "";
    if (query.after) {
      const keyset = indexedOrder?.after(query.after) ?? afterSql(sort, query.after, how.dialect);
      after = ` and ${sort.length > 0 ? renderNumbered(keyset, params) : `pos > $${params.push(query.after.position)}::bigint`}`;
    }
    const order = sort.length > 0 ? renderNumbered(indexedOrder?.order ?? orderSql(sort, how.dialect), params) : "pos";
    const ord = sort.length > 0 ? `row_number() over (order by ${order})` : "pos";
    const window =
      where !== ""
        ? windowSql(t)
        : `pos >= (select first_pos from ${t("datasets")} where id = $1) and pos < (select next_pos from ${t("datasets")} where id = $1)`;
    sql = `select pos, ${select} as r, ${keys} as k, ${ord} as ord from ${t("dataset_rows")} where dataset_id = $1 and ${window}${where}${after}
           order by ${order} offset $${params.push(query.offset)}`;
  } else {
    // A cursor's position from before a replace is below the window: the read starts at its beginning.
    const start = query.after ? `greatest(first_pos, $${params.push(query.after.position)}::bigint + 1)` : "first_pos";
    const from = `(select ${start} from ${t("datasets")} where id = $1) + $${params.push(query.offset)}::bigint`;
    sql = `select pos, ${select} as r, ${keys} as k, pos as ord from ${t("dataset_rows")}
            where dataset_id = $1 and pos >= ${from} and pos < (select next_pos from ${t("datasets")} where id = $1) order by pos`;
  }
  if (query.limit !== null) sql += ` limit $${params.push(Math.max(0, query.limit))}`;
  return sql;
}

/**
 * Positions readers see, for a filtered read: the dataset's window (`$1` is
 * its id). `pos + 0` keeps the planner off the primary key's position range,
 * whose bounds it cannot see (they come from the dataset row) and takes for
 * a few rows: it then reads the filter's candidates from the GIN index
 * instead of checking every row of the dataset.
 */
function windowSql(t: Db["t"]): string {
  return `pos + 0 >= (select first_pos from ${t("datasets")} where id = $1) and pos + 0 < (select next_pos from ${t("datasets")} where id = $1)`;
}

function keyOfPage(row: PageRow, sort: readonly SortKey[] | null | undefined): RowKey {
  return keyOf(row.r as Row, Number(row.pos), sort);
}

function toRow(r: unknown, columns: string[] | null): Row {
  return columns ? selectColumns(r as Row, columns) : (r as Row);
}
