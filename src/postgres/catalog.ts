import type { PoolClient } from "pg";
import type { Column, ConnectionRecord, DatasetRecord, DatasetType, Row } from "../domain/model.js";
import { emptyRow } from "../domain/rows.js";
import type { CatalogStore, RowQuery } from "../ports/storage/catalog.js";
import { type Db, json, num } from "./db.js";

/** Rows fetched per round trip while streaming a read. */
const BATCH = 1000;
/** Rows per INSERT statement when writing many rows. */
const WRITE_BATCH = 5000;

export function postgresCatalog(db: Db): CatalogStore {
  const { t } = db;
  return {
    async getConnection(id) {
      const [row] = await db.query<ConnectionRow>(`select * from ${t("connections")} where id = $1`, [id]);
      return row ? toConnection(row) : null;
    },
    async listConnections(teamId) {
      const rows = await db.query<ConnectionRow>(`select * from ${t("connections")} where team_id = $1 order by id collate "C"`, [teamId]);
      return rows.map(toConnection);
    },
    async listDatasets({ teamId, ids }) {
      if (ids && ids.length === 0) return [];
      const rows = await db.query<DatasetRow>(
        `select * from (${datasetsAndTables(t)}) d
          where team_id = $1 and ($2::text[] is null or id = any($2))
          order by name collate "C", id collate "C"`,
        [teamId, ids ? [...ids] : null],
      );
      return rows.map(toDataset);
    },
    async getDataset(id) {
      const [row] = await db.query<DatasetRow>(`select * from (${datasetsAndTables(t)}) d where id = $1`, [id]);
      return row ? toDataset(row) : null;
    },
    async readDatasetRows(datasetId, query) {
      return { totalRows: await countRows(db, datasetId, query.filters), rows: streamRows(db, datasetId, query) };
    },
    async replaceDatasetRows(datasetId, data) {
      await db.transaction(async (client) => {
        const found = await client.query(`select id from ${t("datasets")} where id = $1 for update`, [datasetId]);
        if (found.rowCount === 0) throw new Error(`unknown dataset ${datasetId}`);
        await client.query(`delete from ${t("dataset_rows")} where dataset_id = $1`, [datasetId]);
        await insertDatasetRows(client, t, datasetId, data.rows, 1);
        await client.query(
          `update ${t("datasets")} set columns = $2, row_count = $3, last_refreshed_at = $4, updated_at = $4 where id = $1`,
          [datasetId, json(data.columns), data.rows.length, data.refreshedAt],
        );
      });
    },
  };
}

/** Datasets and input tables (as `input_table` datasets) in one relation. */
function datasetsAndTables(t: Db["t"]): string {
  return `select id, team_id, name, type, connection_id, source, columns, row_count, last_refreshed_at, updated_at from ${t("datasets")}
    union all
    select id, team_id, name, 'input_table', null, null, columns, row_count, null, updated_at from ${t("input_tables")}`;
}

/** Insert rows at positions `firstPos`, `firstPos + 1`, … in batches. */
export async function insertDatasetRows(client: PoolClient, t: Db["t"], datasetId: string, rows: readonly Row[], firstPos: number): Promise<void> {
  for (let start = 0; start < rows.length; start += WRITE_BATCH) {
    const batch = rows.slice(start, start + WRITE_BATCH);
    await client.query(
      `insert into ${t("dataset_rows")} (dataset_id, pos, row)
       select $1, $2::bigint + ord - 1, value from json_array_elements($3::json) with ordinality as e(value, ord)`,
      [datasetId, firstPos + start, json(batch)],
    );
  }
}

/**
 * The SQL condition for exact-match filters: JSON equality of the stored
 * value (a missing key counts as null), compared as jsonb so object key
 * order and number spelling do not matter — the same rule as `jsonEquals`.
 */
function filterSql(filters: Record<string, unknown> | null, params: unknown[]): string {
  if (!filters) return "";
  const parts: string[] = [];
  for (const key of Object.keys(filters)) {
    params.push(key, json(filters[key]));
    parts.push(`coalesce((row::jsonb) -> $${params.length - 1}::text, 'null'::jsonb) = $${params.length}::jsonb`);
  }
  return parts.length ? ` and ${parts.join(" and ")}` : "";
}

async function countRows(db: Db, datasetId: string, filters: Record<string, unknown> | null): Promise<number> {
  const { t } = db;
  if (!filters || Object.keys(filters).length === 0) {
    // Positions are contiguous, so the count is two index lookups.
    const [row] = await db.query<{ n: string | null }>(
      `select max(pos) - min(pos) + 1 as n from ${t("dataset_rows")} where dataset_id = $1`,
      [datasetId],
    );
    return num(row?.n);
  }
  const params: unknown[] = [datasetId];
  const where = filterSql(filters, params);
  const [row] = await db.query<{ n: string }>(`select count(*) as n from ${t("dataset_rows")} where dataset_id = $1${where}`, params);
  return num(row?.n);
}

/**
 * The page, read lazily through a server-side cursor inside one read-only
 * REPEATABLE READ transaction: a concurrent refresh is seen entirely or not
 * at all, and memory holds one batch at a time. Without filters the offset
 * becomes a position (`min(pos) + offset`), so a deep page costs an index
 * seek. The connection is taken on the first read and released when the
 * iteration ends, breaks or throws.
 */
async function* streamRows(db: Db, datasetId: string, query: RowQuery): AsyncGenerator<Row> {
  const limit = query.limit ?? null;
  if (limit !== null && limit <= 0) return;
  const { t } = db;
  const params: unknown[] = [datasetId];
  const select = query.columns ? `json_build_array(${query.columns.map((c) => `row -> $${params.push(c)}::text`).join(", ")})` : "row";
  const hasFilters = !!query.filters && Object.keys(query.filters).length > 0;
  let sql: string;
  if (hasFilters) {
    const where = filterSql(query.filters, params);
    sql = `select ${select} as r from ${t("dataset_rows")} where dataset_id = $1${where} order by pos offset $${params.push(query.offset)}`;
  } else {
    const from = `(select min(pos) from ${t("dataset_rows")} where dataset_id = $1) + $${params.push(query.offset)}::bigint`;
    sql = `select ${select} as r from ${t("dataset_rows")} where dataset_id = $1 and pos >= ${from} order by pos`;
  }
  if (limit !== null) sql += ` limit $${params.push(limit)}`;

  const client = await db.pool.connect();
  let ok = false;
  try {
    await client.query("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY");
    await client.query(`declare dataport_rows no scroll cursor for ${sql}`, params);
    for (;;) {
      const batch = await client.query<{ r: unknown }>(`fetch ${BATCH} from dataport_rows`);
      for (const { r } of batch.rows) yield query.columns ? zip(query.columns, r as unknown[]) : (r as Row);
      if (batch.rows.length < BATCH) break;
    }
    ok = true;
  } finally {
    // An abandoned iteration lands here too; the transaction only read.
    await client.query(ok ? "COMMIT" : "ROLLBACK").catch(() => {});
    client.release();
  }
}

/** Selected columns back into a row, on a null-prototype object (a column may be `__proto__`). */
function zip(columns: readonly string[], values: readonly unknown[]): Row {
  const out: Row = emptyRow();
  columns.forEach((c, i) => {
    out[c] = values[i] ?? null;
  });
  return out;
}

interface ConnectionRow {
  id: string;
  team_id: string;
  name: string;
  type: string;
  config: Record<string, unknown>;
  created_at: string;
}

export interface DatasetRow {
  id: string;
  team_id: string;
  name: string;
  type: DatasetType;
  connection_id: string | null;
  source: string | null;
  columns: Column[];
  row_count: string;
  last_refreshed_at: string | null;
  updated_at: string;
}

export function toConnection(r: ConnectionRow): ConnectionRecord {
  return { id: r.id, teamId: r.team_id, name: r.name, type: r.type, config: r.config, createdAt: r.created_at };
}

export function toDataset(r: DatasetRow): DatasetRecord {
  return {
    id: r.id,
    teamId: r.team_id,
    name: r.name,
    type: r.type,
    connectionId: r.connection_id,
    source: r.source,
    columns: r.columns,
    rowCount: num(r.row_count),
    lastRefreshedAt: r.last_refreshed_at,
    updatedAt: r.updated_at,
  };
}
