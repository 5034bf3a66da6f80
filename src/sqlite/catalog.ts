import type Database from "better-sqlite3";
import { matchesFilters, selectColumns } from "../domain/rows.js";
import type { Column, ConnectionRecord, DatasetRecord, DatasetType, Row } from "../domain/model.js";
import type { CatalogStore, CatalogWrites, RowPage, RowQuery } from "../ports/storage/catalog.js";
import { bulkRowWriter } from "./bulk-rows.js";
import { catalogWrites } from "./catalog-writes.js";
import { parseJson, rowKey, type SqliteHandle } from "./db.js";
import { idPageQuery } from "./identity.js";

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
 * Nothing here is cached: reads query the writer connection (or a snapshot
 * on a read-only one), so every commit, of this process or another on the
 * same file, is seen by the next read.
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
  const dataset = db.prepare<[string], DatasetRow>(`SELECT ${DATASET_COLUMNS} FROM datasets WHERE id = ?`);
  const table = db.prepare<[string], DatasetRow>(`SELECT ${TABLE_AS_DATASET} FROM input_tables WHERE id = ?`);
  const positions = db.prepare<[string], Positions>("SELECT id, seq, first_position, next_position FROM datasets WHERE id = ?");
  const connectionPage = idPageQuery<ConnectionRow>(db, "SELECT * FROM connections");
  const datasetPage = idPageQuery<DatasetRow>(db, `SELECT ${DATASET_COLUMNS} FROM datasets`);
  const bulkWrite = bulkRowWriter(handle);
  // One read transaction: the window, the count and a small page come from one snapshot, even
  // when another process publishes a bulk write in between (a streamed page takes its own).
  const read = db.transaction((datasetId: string, query: RowQuery): RowPage => {
    const at = positions.get(datasetId);
    if (!at) return { totalRows: 0, rows: empty(), rowsJson: empty() };
    return readRows(handle, at, query);
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
      const row = dataset.get(id) ?? table.get(id);
      return row ? toDataset(row) : null;
    },
    async readDatasetRows(datasetId, query) {
      return read(datasetId, query);
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

/** A read split into what SQL can filter and what only JSON equality in JS can (object/array values, odd column names). */
interface ReadPlan {
  at: Positions;
  where: string;
  params: unknown[];
  residual: Record<string, unknown> | null;
}

function readRows(handle: SqliteHandle, at: Positions, query: RowQuery): RowPage {
  const { where, params, residual } = compileFilters(query.filters);
  const plan: ReadPlan = { at, where, params, residual };
  const totalRows = countRows(handle.db, plan);
  if (query.limit !== null && query.limit <= 0) return { totalRows, rows: empty(), rowsJson: empty() };
  let texts: () => AsyncIterable<string>;
  if (residual === null && query.limit !== null && query.limit <= SMALL_READ) {
    // One query on the writer connection: consistent by construction and cheap.
    const batch = pageStatement(handle.db, plan).all(...pageParams(plan, afterFor(plan, query.offset), query.limit, sqlOffsetFor(plan, query.offset)));
    texts = () => fromBatch(batch);
  } else {
    texts = () => streamTexts(handle, plan, query);
  }
  const page: RowPage = { totalRows, rows: parsed(texts(), query.columns) };
  // Stored text is JSON.stringify of the row, so without a projection it is the row's JSON as is.
  if (query.columns === null) page.rowsJson = texts();
  return page;
}

function countRows(db: Database.Database, plan: ReadPlan): number {
  if (plan.where === "" && plan.residual === null) return plan.at.next_position - plan.at.first_position;
  // Bounded by the window on both sides: rows below it (a replace's old rows, not yet swept) and
  // above it (a bulk write's staged rows) are not the dataset's.
  const sql = `SELECT ${plan.residual ? "data" : "count(*) AS n"} FROM dataset_rows
    WHERE row_key >= ? AND row_key < ? ${plan.where}`;
  const low = rowKey(plan.at.seq, plan.at.first_position);
  const high = rowKey(plan.at.seq, plan.at.next_position);
  if (!plan.residual) {
    return (db.prepare(sql).get(low, high, ...plan.params) as { n: number }).n;
  }
  let n = 0;
  for (const r of db.prepare(sql).iterate(low, high, ...plan.params) as Iterable<{ data: string }>) {
    if (matchesFilters(parseJson(r.data), plan.residual)) n++;
  }
  return n;
}

/** Without filters the row at offset k sits at position first + k: skip by key, not by scanning. */
function afterFor(plan: ReadPlan, offset: number): number {
  return plan.where === "" && plan.residual === null ? plan.at.first_position + offset - 1 : plan.at.first_position - 1;
}

function sqlOffsetFor(plan: ReadPlan, offset: number): number {
  return plan.where !== "" && plan.residual === null ? offset : 0;
}

function pageStatement(db: Database.Database, plan: ReadPlan): Database.Statement<unknown[], { position: number; data: string }> {
  return db.prepare(
    `SELECT position, data FROM dataset_rows
     WHERE row_key > ? AND row_key < ? ${plan.where}
     ORDER BY row_key LIMIT ? OFFSET ?`,
  );
}

function pageParams(plan: ReadPlan, after: number, limit: number, offset: number): unknown[] {
  return [rowKey(plan.at.seq, after), rowKey(plan.at.seq, plan.at.next_position), ...plan.params, limit, offset];
}

/** The stored JSON texts of a page already read. */
async function* fromBatch(batch: readonly { data: string }[]): AsyncGenerator<string> {
  for (const r of batch) yield r.data;
}

/** Rows parsed from JSON text are fresh objects, owned by the caller; `__proto__` in them is an own data key. */
async function* parsed(texts: AsyncIterable<string>, columns: string[] | null): AsyncGenerator<Row> {
  for await (const text of texts) {
    const row = parseJson<Row>(text);
    yield columns === null ? row : selectColumns(row, columns);
  }
}

/**
 * A large read in keyset batches, as the stored JSON texts. On a file
 * database the batches run in one read transaction on a borrowed read-only
 * connection, so the whole read sees one snapshot (a concurrent refresh is
 * seen entirely or not at all) and the writer stays free. `:memory:` has no
 * second connection: batches run on the writer, between other requests.
 * Nothing is borrowed until the first row is asked for; the window is read
 * again in that snapshot, so a bulk write published in between is read
 * whole (its rows, not the old ones being swept).
 */
async function* streamTexts(handle: SqliteHandle, asked: ReadPlan, query: RowQuery): AsyncGenerator<string> {
  const reader = handle.borrowReader();
  const conn = reader ?? handle.db;
  try {
    if (reader) reader.exec("BEGIN");
    const at = conn.prepare<[string], Positions>("SELECT id, seq, first_position, next_position FROM datasets WHERE id = ?").get(asked.at.id);
    if (!at || at.seq !== asked.at.seq) return;
    const plan: ReadPlan = { ...asked, at };
    const stmt = pageStatement(conn, plan);
    let after = afterFor(plan, query.offset);
    let sqlOffset = sqlOffsetFor(plan, query.offset);
    let skip = plan.residual ? query.offset : 0;
    let remaining = query.limit ?? Number.POSITIVE_INFINITY;
    while (remaining > 0) {
      const batch = stmt.all(...pageParams(plan, after, BATCH, sqlOffset));
      sqlOffset = 0;
      for (const r of batch) {
        after = r.position;
        if (plan.residual && !matchesFilters(parseJson<Row>(r.data), plan.residual)) continue;
        if (skip > 0) {
          skip--;
          continue;
        }
        yield r.data;
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

async function* empty(): AsyncGenerator<never> {}

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
