import type Database from "better-sqlite3";
import { deferred, mapped, NOTHING } from "../domain/async-iterables.js";
import { matchesFilters, selectColumns } from "../domain/rows.js";
import type { Column, ConnectionRecord, DatasetRecord, DatasetType, Row } from "../domain/model.js";
import type { RowCondition, RowKey, SortKey } from "../domain/row-query-model.js";
import { keyOf } from "../domain/row-query-order.js";
import { raw, renderPositional, Sql, sql } from "../sql/fragments.js";
import { conditionSql } from "../sql/row-compiler.js";
import type { CatalogStore, CatalogWrites, RowPage, RowQuery } from "../ports/storage/catalog.js";
import { bulkRowWriter } from "./bulk-rows.js";
import { catalogWrites } from "./catalog-writes.js";
import { dataVersionOf, deepFreeze, parseJson, prepared, type RememberedReads, rememberedReads, rowKey, type SqliteHandle } from "./db.js";
import { idPageQuery } from "./identity.js";
import { ensureRowIndexes } from "./row-indexes.js";
import { boundedColumns, datasetIndexPrefix, FEW_MATCHES, indexableColumn, rowIndexName, seeksIndex, sortedPageSql, sqliteRowDialect, type SqliteRowDialect, throughIndex } from "./row-query.js";

/** Rows fetched per step of a streamed read. */
const BATCH = 500;
/** Reads up to this many rows are answered from one query on the writer connection. */
const SMALL_READ = 1000;

interface DatasetRow {
  seq: number;
  id: string;
  team_id: string;
  name: string;
  type: string;
  connection_id: string | null;
  source: string | null;
  columns: string;
  columns_declared: number;
  last_refreshed_at: string | null;
  updated_at: string;
  row_count: number;
}

interface ConnectionRow {
  id: string;
  team_id: string;
  name: string;
  type: string;
  config: string;
  created_at: string;
}

/** Datasets and input tables share one listing; input tables have no positions (their rows live in table_rows). */
const DATASET_COLUMNS = `seq, id, team_id, name, type, connection_id, source, columns, columns_declared, last_refreshed_at, updated_at,
  next_position - first_position AS row_count`;
const TABLE_AS_DATASET = `NULL AS seq, id, team_id, name, 'input_table' AS type, NULL AS connection_id, NULL AS source, columns,
  0 AS columns_declared, NULL AS last_refreshed_at, updated_at, row_count`;

/**
 * Reads query the writer connection (or a snapshot on a read-only one), so
 * every commit, of this process or another on the same file, is seen by the
 * next read. What is remembered (dataset records, counts) is forgotten as
 * soon as either can have changed it.
 */
export function sqliteCatalog(handle: SqliteHandle): CatalogStore & CatalogWrites {
  const { db } = handle;
  const connection = db.prepare<[string], ConnectionRow>("SELECT * FROM connections WHERE id = ?");
  const teamConnections = db.prepare<[string], ConnectionRow>("SELECT * FROM connections WHERE team_id = ? ORDER BY id");
  const teamDatasets = db.prepare<[string, string], DatasetRow>(
    `SELECT ${DATASET_COLUMNS} FROM datasets WHERE team_id = ?
     UNION ALL SELECT ${TABLE_AS_DATASET} FROM input_tables WHERE team_id = ?
     ORDER BY name, id`,
  );
  const someDatasets = db.prepare<[string, string, string, string], DatasetRow>(
    `SELECT ${DATASET_COLUMNS} FROM datasets WHERE team_id = ? AND id IN (SELECT value FROM json_each(?))
     UNION ALL SELECT ${TABLE_AS_DATASET} FROM input_tables WHERE team_id = ? AND id IN (SELECT value FROM json_each(?))
     ORDER BY name, id`,
  );
  const dataset = db.prepare<[string], DatasetRow & { first_position: number; next_position: number }>(
    `SELECT ${DATASET_COLUMNS}, first_position, next_position FROM datasets WHERE id = ?`,
  );
  const table = db.prepare<[string], DatasetRow>(`SELECT ${TABLE_AS_DATASET} FROM input_tables WHERE id = ?`);
  const positions = db.prepare<[string], Positions>("SELECT id, seq, first_position, next_position FROM datasets WHERE id = ?");
  const connectionPage = idPageQuery<ConnectionRow>(db, "SELECT * FROM connections");
  const datasetPage = idPageQuery<DatasetRow>(db, `SELECT ${DATASET_COLUMNS} FROM datasets`);
  const bulkWrite = bulkRowWriter(handle);
  ensureRowIndexes(db);
  // One read transaction: the window, the count and a small page come from one snapshot, even
  // when another process publishes a bulk write in between (a streamed page takes its own).
  const counts: CountMemo = rememberedReads(db, () => handle.catalogVersion, REMEMBERED_COUNTS);
  // Every read of rows asks for its dataset first (access, columns): its record is remembered, frozen, until
  // another process commits or this one writes a dataset or input table (misses are not remembered).
  // With the record, its window (input tables have none): the same row, the same changes.
  const records = rememberedReads<RememberedDataset>(db, () => handle.datasetsVersion, REMEMBERED_RECORDS);
  const remembered = (id: string): RememberedDataset | null => {
    const known = records.current();
    const found = known.get(id);
    if (found) return found;
    const row = dataset.get(id);
    const tableRow = row ? undefined : table.get(id);
    const loaded: RememberedDataset | null = row
      ? { record: deepFreeze(toDataset(row)), at: { id, seq: row.seq, first_position: row.first_position, next_position: row.next_position } }
      : tableRow
        ? { record: deepFreeze(toDataset(tableRow)), at: null }
        : null;
    if (loaded) known.set(id, loaded);
    return loaded;
  };
  const pages = rememberedPages(handle);
  const dataVersion = dataVersionOf(db);
  // A plain page read again: its dataset's window and its texts are both remembered, and one
  // PRAGMA data_version shows neither can have changed, so it needs no read transaction.
  const rememberedPage = (datasetId: string, query: RowQuery & { limit: number }, memo: PageMemo): RowPage | null => {
    const data = dataVersion();
    const at = records.current(data).get(datasetId)?.at;
    if (!at) return null;
    const range = plainRange(at, query);
    const texts = isEmpty(range) ? [] : memo.current(data).get(pageKey(at.seq, range));
    return texts ? plainPageOf(texts, at, range.start, query.columns) : null;
  };
  const read = db.transaction((datasetId: string, query: RowQuery): RowPage => {
    const at = positions.get(datasetId);
    if (!at) return { totalRows: 0, rows: NOTHING, rowsJson: NOTHING, lastKey: () => null };
    return readRows(handle, { counts, pages }, at, query);
  });

  return {
    async getConnection(id) {
      const row = connection.get(id);
      return row ? toConnection(row) : null;
    },
    async listConnections(teamId) {
      return teamConnections.all(teamId).map(toConnection);
    },
    async listDatasets({ teamId, ids }) {
      const rows = ids ? someDatasets.all(teamId, JSON.stringify(ids), teamId, JSON.stringify(ids)) : teamDatasets.all(teamId, teamId);
      return rows.map(toDataset);
    },
    async listAllConnections(page) {
      return connectionPage(page).map(toConnection);
    },
    async listAllDatasets(page) {
      return datasetPage(page).map(toDataset);
    },
    async getDataset(id) {
      return remembered(id)?.record ?? null;
    },
    async readDatasetRows(datasetId, query) {
      return (pages !== null && isPlainPage(query) && rememberedPage(datasetId, query, pages)) || read(datasetId, query);
    },
    async replaceDatasetRows(datasetId, data) {
      // A refresh is a bulk replace that also sets lastRefreshedAt: the same staging, the same queue.
      await bulkWrite({ datasetId, mode: "replace", rows: data.rows, columns: () => data.columns, updatedAt: data.refreshedAt, refreshedAt: data.refreshedAt });
    },
    ...catalogWrites(handle),
    async writeDatasetRows(write) {
      return bulkWrite(write);
    },
  };
}

interface Positions {
  id: string;
  seq: number;
  first_position: number;
  next_position: number;
}

/**
 * A read split into what SQL can filter and what only JSON equality in JS can
 * (object/array filter values, odd column names), with the compiled `where`
 * and the sort (empty: stored order).
 */
interface ReadPlan {
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
  /** A sorted page walks this index (its sort column's), whatever index the conditions would pick (see `readRows`). */
  walk?: string;
}

/** A stored row as a read fetches it. */
interface Fetched {
  position: number;
  data: string;
}

/** Where the next batch starts: after a position (stored order) or after a row key (sorted). */
type Resume = { position: number } | { key: RowKey | null };

function readRows(handle: SqliteHandle, { counts, pages }: { counts: CountMemo; pages: PageMemo | null }, at: Positions, query: RowQuery): RowPage {
  if (isPlainPage(query)) return plainPage(handle.db, pages, at, query);
  const { where, params, residual } = compileFilters(query.filters);
  const sort = query.sort ?? [];
  const dialect = datasetDialect(handle.db, at.seq, query.where || sort.length > 0, query.where);
  const condition = query.where ?? null;
  const plan: ReadPlan = {
    at,
    where,
    params,
    residual,
    condition: condition ? conditionSql(condition, dialect) : null,
    sort,
    dialect,
    seek: { page: seeksIndex(condition, sort, dialect, false), count: seeksIndex(condition, [], dialect, true) },
  };
  const totalRows = isPlain(plan)
    ? countRows(handle.db, plan)
    : rememberedCount(counts, plan, JSON.stringify([query.where ?? null, query.filters]), () => countRows(handle.db, plan));
  // A range on an indexed column that the count (from that index) found few rows in: the page
  // seeks them too, sorting at most FEW_MATCHES, instead of walking the window to find them.
  if (!plan.seek.page && plan.seek.count && totalRows <= FEW_MATCHES) plan.seek.page = true;
  // Sorted by an indexed column under conditions that match many rows: the page walks the sort
  // column's index and stops after the page, instead of letting the planner seek a condition's
  // index and sort every match (seconds for a range matching most of a million rows).
  const only = plan.sort.length === 1 ? plan.sort[0]!.column : null;
  if (only !== null && plan.dialect.indexed.has(only) && plan.condition !== null && totalRows > FEW_MATCHES) {
    plan.walk = rowIndexName(datasetIndexPrefix(plan.at.seq), only);
  }
  const last: { row: Fetched | null } = { row: null };
  const lastKey = () => (last.row === null ? null : keyOf(parseJson<Row>(last.row.data), last.row.position, plan.sort));
  if (query.limit !== null && query.limit <= 0) return { totalRows, rows: NOTHING, rowsJson: NOTHING, lastKey };
  const { columns } = query;
  if (residual === null && query.limit !== null && query.limit <= SMALL_READ) {
    // One query on the writer connection: consistent by construction and cheap.
    const batch = fetchBatch(handle.db, plan, startOf(plan, query), query.limit, sqlOffsetFor(plan, query.offset));
    const page: RowPage = {
      totalRows,
      rows: mapped(batch, (fetched) => {
        last.row = fetched;
        return parsedRow(fetched.data, columns);
      }),
      lastKey,
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
  const streamed = () => tracked(streamRows(handle, plan, query), last);
  const page: RowPage = { totalRows, rows: deferred(() => parsed(streamed(), columns)), lastKey };
  if (columns === null) page.rowsJson = deferred(() => texts(streamed()));
  return page;
}

/** A small page in stored order without conditions: the common read. */
function isPlainPage(query: RowQuery): query is RowQuery & { limit: number } {
  return query.filters === null && !query.where && !query.sort?.length && query.limit !== null && query.limit > 0 && query.limit <= SMALL_READ;
}

/**
 * A plain page from one statement that fetches only the stored texts:
 * positions in the window are dense, so the rows are those after the
 * start position (a cursor's, or the window's beginning) plus the offset,
 * and the last one's position is counted, not read.
 */
function plainPage(db: Database.Database, pages: PageMemo | null, at: Positions, query: RowQuery & { limit: number }): RowPage {
  const range = plainRange(at, query);
  const texts = isEmpty(range) ? [] : pageTexts(db, pages, at.seq, range);
  return plainPageOf(texts, at, range.start, query.columns);
}

/** A plain page's rows: those at positions start < p < end. */
interface PageRange {
  start: number;
  end: number;
}

/** No position lies strictly between start and end (the page starts at or past the window's end). */
function isEmpty({ start, end }: PageRange): boolean {
  return end <= start + 1;
}

function plainRange(at: Positions, query: RowQuery & { limit: number }): PageRange {
  const start = Math.max(at.first_position - 1, query.after?.position ?? -Infinity) + query.offset;
  return { start, end: Math.min(at.next_position, start + 1 + query.limit) };
}

function plainPageOf(texts: readonly string[], at: Positions, start: number, columns: string[] | null): RowPage {
  let yielded = 0;
  const lastKey = () => (yielded === 0 ? null : { values: [], position: start + yielded });
  const page: RowPage = {
    totalRows: at.next_position - at.first_position,
    rows: mapped(texts, (text, i) => {
      yielded = i + 1;
      return parsedRow(text, columns);
    }),
    lastKey,
  };
  if (columns === null) {
    page.rowsJson = mapped([texts], (batch) => {
      yielded = batch.length;
      return batch;
    });
  }
  return page;
}

/** A page's texts, in order, remembered (frozen) when they fit. */
function pageTexts(db: Database.Database, pages: PageMemo | null, seq: number, { start, end }: PageRange): readonly string[] {
  const remembered = pages?.current();
  const key = pageKey(seq, { start, end });
  const known = remembered?.get(key);
  if (known) return known;
  const texts = prepared<string>(db, "SELECT data FROM dataset_rows WHERE row_key > ? AND row_key < ? ORDER BY row_key")
    .pluck()
    .all(rowKey(seq, start), rowKey(seq, end));
  remembered?.set(key, Object.freeze(texts));
  return texts;
}

function pageKey(seq: number, { start, end }: PageRange): string {
  return `${seq}:${start}:${end}`;
}

/**
 * Plain pages read again while nothing can have changed them, by dataset seq
 * and position range. A dataset's rows never change in place and positions
 * are never written twice: every change moves the window (appends above it,
 * trims and a replace's publishing past its start), and a page is read from
 * inside the window only, so the rows at a range of positions are those
 * remembered for as long as the seq names the same dataset. A seq can come
 * back with a new dataset after a delete: a dataset made here
 * (`datasetsMade`) or any commit of another process (`PRAGMA data_version`)
 * forgets every page. Read inside the read's transaction (no lock of its own).
 */
type PageMemo = RememberedReads<readonly string[]>;

function rememberedPages(handle: SqliteHandle): PageMemo | null {
  if (handle.pageMemoryBytes === 0) return null;
  return rememberedReads<readonly string[]>(handle.db, () => handle.datasetsMade, {
    maxSize: handle.pageMemoryBytes,
    // A page over an eighth of the memory is read from the file each time, so one cannot push out most of the others.
    maxEntrySize: handle.pageMemoryBytes / 8,
    // UTF-16 at most, plus a string's header and the array's slot.
    sizeOf: (texts) => texts.reduce((bytes, text) => bytes + 2 * text.length + 24, 64),
  });
}

function isPlain(plan: ReadPlan): boolean {
  return plan.where === "" && plan.residual === null && plan.condition === null;
}

/** A dataset record as remembered, with its window when it has rows of its own (not an input table). */
interface RememberedDataset {
  record: DatasetRecord;
  at: Positions | null;
}

/** Dataset records remembered per store: at most this many, the least recently used forgotten first. */
const REMEMBERED_RECORDS = 1024;

/** Counts remembered per store: at most this many (reads with conditions), the least recently used forgotten first. */
const REMEMBERED_COUNTS = 1024;

/** The counts of reads with conditions, by dataset seq and conditions, each with the window it was made in. */
type CountMemo = RememberedReads<{ first: number; next: number; n: number }>;

/**
 * The count of a read with conditions, not made again while the dataset is
 * unchanged, so a cursor's next page (or any read repeated) does not count
 * the same matching rows again; `totalRows` stays exact. A dataset's rows
 * never change in place: every change moves its window (an append, a trim,
 * a replace's publishing), read in the read's own transaction. What could
 * bring back an old window (the dataset deleted and made again under the
 * same seq) is a catalog write, here (`catalogVersion`) or by another
 * connection (`PRAGMA data_version`): either forgets every count.
 */
function rememberedCount(memo: CountMemo, plan: ReadPlan, conditions: string, count: () => number): number {
  const counts = memo.current();
  const key = `${plan.at.seq}\u0000${conditions}`;
  const known = counts.get(key);
  if (known && known.first === plan.at.first_position && known.next === plan.at.next_position) return known.n;
  const n = count();
  counts.set(key, { first: plan.at.first_position, next: plan.at.next_position, n });
  return n;
}

function countRows(db: Database.Database, plan: ReadPlan): number {
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

/**
 * The rows of the dataset's window: rows below it (a replace's old rows, not
 * yet swept) and above it (a bulk write's staged rows) are not the
 * dataset's. A read that starts from a row index names the dataset by the
 * literal of the index's condition and keeps the planner off the row key
 * range (`+row_key`), which it would otherwise take for the cheaper start.
 */
function windowOf(plan: ReadPlan, seek: boolean): Sql {
  const low = rowKey(plan.at.seq, plan.at.first_position);
  const high = rowKey(plan.at.seq, plan.at.next_position);
  if (!seek) return sql`row_key >= ${low} AND row_key < ${high}`;
  return sql`dataset_seq = ${raw(String(plan.at.seq))} AND +row_key >= ${low} AND +row_key < ${high}`;
}

/**
 * A dataset's dialect: positions are compared as row keys (the same order
 * within a dataset; the key is what its indexes hold); declared columns are
 * indexed (see `syncRowIndexes`), read only for a read with where or sort.
 */
function datasetDialect(db: Database.Database, seq: number, queried: unknown, where: RowCondition | null | undefined): SqliteRowDialect {
  // Without where and sort the dialect goes unused: rows come by position.
  if (!queried) return PLAIN_DIALECT;
  let indexed: ReadonlySet<string> | undefined;
  const found = prepared<{ columns: string; columns_declared: number }>(db, "SELECT columns, columns_declared FROM datasets WHERE seq = ?").get(seq);
  if (found?.columns_declared === 1) indexed = new Set(parseJson<Column[]>(found.columns).map((c) => c.name).filter(indexableColumn));
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
    const range = plan.seek.page ? sql`dataset_seq = ${raw(String(plan.at.seq))} AND +row_key > ${after} AND +row_key < ${high}` : sql`row_key > ${after} AND row_key < ${high}`;
    const { text, params } = renderPositional(
      sql`SELECT position, data FROM dataset_rows WHERE ${range} ${conditionsOf(plan)}
          ORDER BY row_key LIMIT +${limit} OFFSET ${offset}`,
    );
    return prepared<Fetched>(db, text).all(...params);
  }
  const sorted = (from: string) =>
    renderPositional(
      sortedPageSql(
        { select: "position, data", from, where: sql`${windowOf(plan, plan.seek.page)} ${conditionsOf(plan)}`, sort: plan.sort, after: resume.key, limit, offset },
        plan.dialect,
      ),
    );
  return throughIndex((text) => prepared(db, text), "dataset_rows", plan.walk ?? null, sorted).all() as Fetched[];
}

/** Remembers the last row that went by (for `lastKey`). */
async function* tracked(rows: AsyncIterable<Fetched>, last: { row: Fetched | null }): AsyncGenerator<Fetched> {
  for await (const row of rows) {
    last.row = row;
    yield row;
  }
}

/** Stored texts of a streamed read, in batches of up to `BATCH`. */
async function* texts(rows: AsyncIterable<Fetched>): AsyncGenerator<readonly string[]> {
  let batch: string[] = [];
  for await (const row of rows) {
    batch.push(row.data);
    if (batch.length >= BATCH) {
      yield batch;
      batch = [];
    }
  }
  if (batch.length > 0) yield batch;
}

/** Rows parsed from JSON text are fresh objects, owned by the caller; `__proto__` in them is an own data key. */
function parsedRow(data: string, columns: string[] | null): Row {
  const row = parseJson<Row>(data);
  return columns === null ? row : selectColumns(row, columns);
}

async function* parsed(rows: AsyncIterable<Fetched>, columns: string[] | null): AsyncGenerator<Row> {
  for await (const { data } of rows) yield parsedRow(data, columns);
}

/**
 * A large read in keyset batches. On a file database the batches run in
 * one read transaction on a borrowed read-only connection, so the whole
 * read sees one snapshot (a concurrent refresh is seen entirely or not at
 * all) and the writer stays free. `:memory:` has no second connection:
 * batches run on the writer, between other requests. Nothing is borrowed
 * until the first row is asked for; the window is read again in that
 * snapshot, so a bulk write published in between is read whole (its rows,
 * not the old ones being swept). Each batch continues after the last row
 * of the one before: by position in stored order, by row key when sorted.
 */
async function* streamRows(handle: SqliteHandle, asked: ReadPlan, query: RowQuery): AsyncGenerator<Fetched> {
  const reader = handle.borrowReader();
  const conn = reader ?? handle.db;
  try {
    if (reader) reader.exec("BEGIN");
    const at = conn.prepare<[string], Positions>("SELECT id, seq, first_position, next_position FROM datasets WHERE id = ?").get(asked.at.id);
    if (!at || at.seq !== asked.at.seq) return;
    const plan: ReadPlan = { ...asked, at };
    let resume = startOf(plan, query);
    let sqlOffset = sqlOffsetFor(plan, query.offset);
    let skip = plan.residual ? query.offset : 0;
    let remaining = query.limit ?? Number.POSITIVE_INFINITY;
    while (remaining > 0) {
      const batch = fetchBatch(conn, plan, resume, BATCH, sqlOffset);
      sqlOffset = 0;
      const end = batch.at(-1);
      if (end) resume = plan.sort.length > 0 ? { key: keyOf(parseJson<Row>(end.data), end.position, plan.sort) } : { position: end.position };
      for (const r of batch) {
        if (plan.residual && !matchesFilters(parseJson<Row>(r.data), plan.residual)) continue;
        if (skip > 0) {
          skip--;
          continue;
        }
        yield r;
        if (--remaining <= 0) break;
      }
      if (batch.length < BATCH) break;
    }
  } finally {
    if (reader) {
      if (reader.open && reader.inTransaction) reader.exec("COMMIT");
      handle.returnReader(reader);
    }
  }
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
export function compileFilters(filters: Record<string, unknown> | null): { where: string; params: unknown[]; residual: Record<string, unknown> | null } {
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

/** Append rows at the dataset's next positions (the caller runs this inside a transaction). */
export function appendRowsStatement(db: Database.Database): (seq: number, from: number, rows: readonly Row[]) => void {
  const insert = db.prepare("INSERT INTO dataset_rows (row_key, dataset_seq, position, data) VALUES (?, ?, ?, ?)");
  return (seq, from, rows) => {
    let position = from;
    for (const row of rows) {
      insert.run(rowKey(seq, position), seq, position, JSON.stringify(row));
      position++;
    }
  };
}

function toConnection(row: ConnectionRow): ConnectionRecord {
  return { id: row.id, teamId: row.team_id, name: row.name, type: row.type, config: parseJson(row.config), createdAt: row.created_at };
}

function toDataset(row: DatasetRow): DatasetRecord {
  const dataset: DatasetRecord = {
    id: row.id,
    teamId: row.team_id,
    name: row.name,
    type: row.type as DatasetType,
    connectionId: row.connection_id,
    source: row.source,
    columns: parseJson(row.columns),
    rowCount: row.row_count,
    lastRefreshedAt: row.last_refreshed_at,
    updatedAt: row.updated_at,
  };
  // Absent unless declared ("absent or false" mean the same), as datasets were before the field.
  if (row.columns_declared === 1) dataset.columnsDeclared = true;
  return dataset;
}
