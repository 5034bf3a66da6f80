import type * as Database from "./driver.js";
import { deferred, mapped, NOTHING } from "../domain/async-iterables.js";
import type { Row } from "../domain/model.js";
import { keyOf } from "../domain/row-query-order.js";
import { selectColumns } from "../domain/rows.js";
import type { RowPage, RowQuery } from "../ports/storage/rows.js";
import type { TableRowsPage, TableRowsQuery } from "../ports/storage/tables.js";
import {
  countKey,
  countRows,
  type Fetched,
  firstPage,
  isPlain,
  isSmallRead,
  planRead,
  type Positions,
  positionsOf,
  type ReadPlan,
  scansMany,
  settlePlan,
  streamedBatches,
} from "./dataset-reads.js";
import { dataVersionOf, parseJson, type RememberedReads, rememberedReads, type SqliteHandle } from "./db.js";
import { readTimedOut } from "./faults.js";
import type { CountEntry } from "./reader-protocol.js";
import { queriedTableRows } from "./row-query-dialect.js";
import { deadlineOf } from "./statement-deadline.js";

/**
 * Reads of dataset rows with conditions, filters or a sort (plain pages are
 * catalog.ts'), wherever they are cheapest without holding the event loop:
 *
 * - On the loop, in the caller's read transaction, when they look short:
 *   a row index serves them, or the window is small. The writer's deadline
 *   gives them `loopBudgetMs`; a read still running then is ended and
 *   moved (`MovedOffLoop`), and its shape is remembered so that the next
 *   read like it goes to a reader thread at once.
 * - On a reader thread (reader-pool.ts) otherwise: the window, the count
 *   and the page in one read transaction there; a large read is then
 *   streamed from a session there, one snapshot for all its batches.
 * - Without reader threads (`:memory:`, `readerThreads: 0`) on the loop,
 *   ended with 503 once `callTimeoutMs` passes.
 *
 * Counts of reads with conditions are remembered for the window they were
 * made for (see `rememberedCount`), wherever they were made.
 */
export interface QueriedReads {
  /** Whether a read like this one ran past the budget lately: it goes off the loop at once. */
  knownSlow(datasetId: string, query: RowQuery): boolean;
  /** The read on the loop, inside the caller's read transaction; throws `MovedOffLoop` when it is to run off it. */
  onLoop(at: Positions, query: RowQuery): RowPage;
  /** The read on a reader thread (only when there are reader threads). */
  offLoop(datasetId: string, query: RowQuery): Promise<RowPage>;
}

/** Thrown by `onLoop`: the read is to run on a reader thread. */
export class MovedOffLoop extends Error {}

/** A read that no row index serves over a window of more rows than this goes to a reader thread at once. */
const LOOP_SCAN_ROWS = 50_000;
/** Read shapes that ran past the budget, remembered (at most this many) so the next ones go off the loop at once. */
const REMEMBERED_SLOW = 256;
/** Counts remembered per store: at most this many (reads with conditions), the least recently used forgotten first. */
const REMEMBERED_COUNTS = 1024;

/**
 * The counts of reads with conditions, by dataset seq and conditions, each
 * with the window it was made in, so a cursor's next page (or any read
 * repeated) does not count the same matching rows again; `totalRows` stays
 * exact. A dataset's rows never change in place: every change moves its
 * window (an append, a trim, a replace's publishing). What could bring back
 * an old window (the dataset deleted and made again under the same seq) is
 * a catalog write, here (`catalogVersion`) or by another connection
 * (`PRAGMA data_version`): either forgets every count.
 */
type CountMemo = RememberedReads<CountEntry>;

export function queriedReads(handle: SqliteHandle): QueriedReads {
  const { db, readers } = handle;
  const counts: CountMemo = rememberedReads(db, () => handle.catalogVersion, REMEMBERED_COUNTS);
  const dataVersion = dataVersionOf(db);
  const slow = new Set<string>();
  const slowKey = (datasetId: string, query: RowQuery) => `${datasetId}\u0000${shapeOf(query)}`;
  const moved = (datasetId: string, query: RowQuery) => {
    const key = slowKey(datasetId, query);
    slow.delete(key);
    slow.add(key);
    if (slow.size > REMEMBERED_SLOW) slow.delete(slow.values().next().value!);
    return new MovedOffLoop();
  };

  return {
    knownSlow: (datasetId, query) => readers !== null && slow.size > 0 && slow.has(slowKey(datasetId, query)),
    onLoop(at, query) {
      const plan = planRead(db, at, query);
      const key = countKey(at.seq, query);
      const known = isPlain(plan) ? countRows(db, plan) : rememberedCount(counts, key, at);
      const offFirst = handle.loopBudgetMs === 0 || scansMany(plan, known !== undefined, LOOP_SCAN_ROWS);
      if (readers !== null && offFirst) throw moved(at.id, query);
      const budget = readers !== null ? handle.loopBudgetMs : handle.callTimeoutMs;
      const expired = readers !== null ? () => moved(at.id, query) : () => readTimedOut(handle.callTimeoutMs);
      return handle.deadline.within(performance.now() + budget, expired, () => {
        let totalRows = known;
        if (totalRows === undefined) {
          totalRows = countRows(db, plan);
          counts.current().set(key, { first: at.first_position, next: at.next_position, n: totalRows });
        }
        settlePlan(plan, totalRows);
        if (query.limit !== null && query.limit <= 0) return emptyPage(totalRows);
        // One query on the writer connection: consistent by construction.
        if (isSmallRead(plan, query)) return fetchedPage(totalRows, firstPage(db, plan, query), query);
        // A plain read in stored order steps through the window by key: cheap batches, on the loop.
        const onLoop = readers === null || (isPlain(plan) && plan.sort.length === 0);
        const stream = () => (onLoop ? loopStream(handle, plan, query) : threadStream(handle, at, query, totalRows));
        return streamedPage(totalRows, query, stream);
      });
    },
    offLoop: (datasetId, query) => offLoop(datasetId, query).catch(rethrow(handle)),
  };

  async function offLoop(datasetId: string, query: RowQuery): Promise<RowPage> {
    const at = positionsOf(db, datasetId);
    if (!at || readers === null) return emptyPage(0);
    const known = counts.current().get(countKey(at.seq, query)) ?? null;
    const before = { data: dataVersion(), own: handle.catalogVersion };
    const {
      at: read,
      totalRows,
      counted,
      fetched,
    } = await readers.call({ kind: "rows", datasetId, query, count: known });
    if (read === null) return emptyPage(0);
    // Kept only when nothing can have made another dataset of this seq meanwhile (see CountMemo).
    if (counted !== null && dataVersion() === before.data && handle.catalogVersion === before.own) {
      counts.current().set(countKey(read.seq, query), counted);
    }
    if (query.limit !== null && query.limit <= 0) return emptyPage(totalRows);
    if (fetched !== null) return fetchedPage(totalRows, fetched, query);
    return streamedPage(totalRows, query, () => threadStream(handle, read, query, totalRows));
  }
}

/**
 * A page of an input table's rows with where, sort or after, by the same
 * rules as a dataset's (see `QueriedReads`): on the loop within
 * `loopBudgetMs`, else (and from then on for reads like it) on a reader
 * thread; without reader threads on the loop, ended at `callTimeoutMs`.
 */
export function queriedTableReads(
  handle: SqliteHandle,
): (tableId: string, query: TableRowsQuery) => TableRowsPage | Promise<TableRowsPage> {
  const { db, readers } = handle;
  const onLoop = db.transaction((tableId: string, query: TableRowsQuery) => queriedTableRows(db, tableId, query));
  const slow = new Set<string>();
  const offLoop = (tableId: string, query: TableRowsQuery) =>
    readers!.call({ kind: "tableRows", tableId, query }).catch(rethrow(handle));
  return (tableId, query) => {
    const key = `${tableId}\u0000${shapeOf(query)}`;
    if (readers !== null && (handle.loopBudgetMs === 0 || slow.has(key))) return offLoop(tableId, query);
    const budget = readers !== null ? handle.loopBudgetMs : handle.callTimeoutMs;
    const expired = readers !== null ? () => new MovedOffLoop() : () => readTimedOut(handle.callTimeoutMs);
    try {
      return handle.deadline.within(performance.now() + budget, expired, () => onLoop(tableId, query));
    } catch (error) {
      if (!(error instanceof MovedOffLoop)) throw error;
      slow.add(key);
      if (slow.size > REMEMBERED_SLOW) slow.delete(slow.values().next().value!);
      return offLoop(tableId, query);
    }
  };
}

/** The count remembered for these conditions, when it was made for this same window. */
function rememberedCount(memo: CountMemo, key: string, at: Positions): number | undefined {
  const known = memo.current().get(key);
  return known && known.first === at.first_position && known.next === at.next_position ? known.n : undefined;
}

/** A read's shape: its conditions without their operands, its filters' columns, its sort. */
function shapeOf(query: Pick<RowQuery, "where" | "sort"> & { filters?: RowQuery["filters"] }): string {
  const parts = [query.where ?? null, Object.keys(query.filters ?? {}), query.sort ?? []];
  return JSON.stringify(parts, (key, value: unknown) => (key === "operand" ? undefined : value));
}

/** A page of a dataset that does not exist (or one with no rows asked). */
export function emptyPage(totalRows: number): RowPage {
  return { totalRows, rows: NOTHING, rowsJson: NOTHING, lastKey: () => null };
}

/** A page from rows already fetched. */
function fetchedPage(totalRows: number, batch: Fetched[], query: RowQuery): RowPage {
  const { columns } = query;
  const last: { row: Fetched | null } = { row: null };
  const page: RowPage = {
    totalRows,
    rows: mapped(batch, (fetched) => {
      last.row = fetched;
      return parsedRow(fetched.data, columns);
    }),
    lastKey: () => lastKeyOf(last.row, query),
  };
  // Stored text is JSON.stringify of the row, so without a projection it is the row's JSON as is.
  if (columns === null) {
    page.rowsJson = mapped([batch], (rows) => {
      last.row = rows.at(-1) ?? null;
      return rows.map((r) => r.data);
    });
  }
  return page;
}

/** A page streamed from `stream`, started when the first row is asked for. */
function streamedPage(totalRows: number, query: RowQuery, stream: () => AsyncIterable<Fetched>): RowPage {
  const { columns } = query;
  const last: { row: Fetched | null } = { row: null };
  const streamed = () => tracked(stream(), last);
  const page: RowPage = {
    totalRows,
    rows: deferred(() => parsed(streamed(), columns)),
    lastKey: () => lastKeyOf(last.row, query),
  };
  if (columns === null) page.rowsJson = deferred(() => texts(streamed()));
  return page;
}

function lastKeyOf(row: Fetched | null, query: RowQuery) {
  return row === null ? null : keyOf(parseJson<Row>(row.data), row.position, query.sort ?? []);
}

/**
 * A large read on the loop, batch by batch between other requests, each
 * batch bounded by `callTimeoutMs`. On a file database the batches run in
 * one read transaction on a borrowed read-only connection, so the whole
 * read sees one snapshot and the writer stays free. `:memory:` has no
 * second connection: batches run on the writer. Nothing is borrowed until
 * the first row is asked for.
 */
async function* loopStream(handle: SqliteHandle, plan: ReadPlan, query: RowQuery): AsyncGenerator<Fetched> {
  const reader = handle.borrowReader();
  const conn: Database.Database = reader ?? handle.db;
  try {
    if (reader) reader.exec("BEGIN");
    const batches = streamedBatches(conn, plan, query);
    const deadline = deadlineOf(conn);
    for (;;) {
      const until = performance.now() + handle.callTimeoutMs;
      const step = deadline.within(
        until,
        () => readTimedOut(handle.callTimeoutMs),
        () => batches.next(),
      );
      if (step.done) return;
      yield* step.value;
    }
  } finally {
    if (reader) {
      if (reader.open && reader.inTransaction) reader.exec("COMMIT");
      handle.returnReader(reader);
    }
  }
}

/** A large read from a reader thread's session: one snapshot there, a batch per call. */
async function* threadStream(handle: SqliteHandle, at: Positions, query: RowQuery, totalRows: number) {
  const session = handle.readers!.session();
  try {
    const first = { kind: "stream", datasetId: at.id, seq: at.seq, query, totalRows } as const;
    let batch = await session.call(first).catch(rethrow(handle));
    for (;;) {
      yield* batch.rows;
      if (batch.done) return;
      batch = await session.call({ kind: "next" }).catch(rethrow(handle));
    }
  } finally {
    session.end();
  }
}

/** A reader thread's error as the store reports it (a SQLite fault there is a 503, as on the loop). */
function rethrow(handle: SqliteHandle): (error: unknown) => never {
  return (error) => {
    throw handle.faults.reported(error);
  };
}

/** Remembers the last row that went by (for `lastKey`). */
async function* tracked(rows: AsyncIterable<Fetched>, last: { row: Fetched | null }): AsyncGenerator<Fetched> {
  for await (const row of rows) {
    last.row = row;
    yield row;
  }
}

/** Rows fetched per batch of stored texts a streamed read yields. */
const TEXT_BATCH = 500;

/** Stored texts of a streamed read, in batches of up to TEXT_BATCH. */
async function* texts(rows: AsyncIterable<Fetched>): AsyncGenerator<readonly string[]> {
  let batch: string[] = [];
  for await (const row of rows) {
    batch.push(row.data);
    if (batch.length >= TEXT_BATCH) {
      yield batch;
      batch = [];
    }
  }
  if (batch.length > 0) yield batch;
}

/** Rows parsed from JSON text are fresh objects, owned by the caller; `__proto__` in them is an own data key. */
export function parsedRow(data: string, columns: string[] | null): Row {
  const row = parseJson<Row>(data);
  return columns === null ? row : selectColumns(row, columns);
}

async function* parsed(rows: AsyncIterable<Fetched>, columns: string[] | null): AsyncGenerator<Row> {
  for await (const { data } of rows) yield parsedRow(data, columns);
}
