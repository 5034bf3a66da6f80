import type { PoolClient } from "pg";
import type { Column, ConnectionRecord, DatasetRecord, DatasetType } from "../domain/model.js";
import type { CatalogStore, CatalogWrites } from "../ports/storage/catalog.js";
import type { CatalogWatch } from "./catalog-events.js";
import { type Db, idPageSql, json, num, PUT_RESULT, putResult } from "./db.js";
import { syncDatasetValues } from "./dataset-values.js";
import { syncDatasetIndexes } from "./row-indexes.js";

/** Connections and datasets (their rows: rows.ts). */
export function postgresCatalog(db: Db, watch: CatalogWatch): CatalogStore & CatalogWrites {
  const { t } = db;
  /** A catalog write: this instance forgets what it derived from the catalog at once, whatever the outcome. */
  const changing = async <T>(write: Promise<T>): Promise<T> => {
    try {
      return await write;
    } finally {
      watch.changed();
    }
  };
  return {
    async getConnection(id) {
      const [row] = await db.query<ConnectionRow>(
        `select ${CONNECTION_COLUMNS} from ${t("connections")} where id = $1`,
        [id],
      );
      return row ? toConnection(row) : null;
    },
    async listConnections(teamId) {
      const rows = await db.query<ConnectionRow>(
        `select ${CONNECTION_COLUMNS} from ${t("connections")} where team_id = $1 order by id collate "C"`,
        [teamId],
      );
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
    async listAllConnections(page) {
      const params: unknown[] = [];
      const rows = await db.query<ConnectionRow>(
        `select ${CONNECTION_COLUMNS} from ${t("connections")}${idPageSql(page, params)}`,
        params,
      );
      return rows.map(toConnection);
    },
    async listAllDatasets(page) {
      const params: unknown[] = [];
      const rows = await db.query<DatasetRow>(
        `select ${DATASET_COLUMNS} from ${t("datasets")}${idPageSql(page, params)}`,
        params,
      );
      return rows.map(toDataset);
    },
    async getDataset(id) {
      const [row] = await db.query<DatasetRow>(`select * from (${datasetsAndTables(t)}) d where id = $1`, [id]);
      return row ? toDataset(row) : null;
    },
    async putConnection(connection) {
      return changing(
        db.transaction(async (client) => {
          // The unique endpoint_id column is the webhook receiver's index and
          // follows the config here. Another connection's endpoint id is refused
          // by this check, and by the unique index for a concurrent put that
          // passed it at the same time (the statement fails, nothing is written).
          const endpointId = webhookEndpointId(connection);
          if (endpointId !== null) {
            const taken = await client.query(`select 1 from ${t("connections")} where endpoint_id = $1 and id <> $2`, [
              endpointId,
              connection.id,
            ]);
            if (taken.rowCount) throw new Error(`webhook endpoint id ${endpointId} belongs to another connection`);
          }
          const rows = await client.query<{ created: boolean }>(
            `insert into ${t("connections")} (id, team_id, name, type, config, created_at, endpoint_id) values ($1, $2, $3, $4, $5, $6, $7)
           on conflict (id) do update set team_id = excluded.team_id, name = excluded.name, type = excluded.type,
             config = excluded.config, created_at = excluded.created_at, endpoint_id = excluded.endpoint_id
           returning ${PUT_RESULT}`,
            [
              connection.id,
              connection.teamId,
              connection.name,
              connection.type,
              json(connection.config),
              connection.createdAt,
              endpointId,
            ],
          );
          return putResult(rows.rows);
        }),
      );
    },
    async deleteConnection(id) {
      const gone: string[] = [];
      const deleted = await changing(
        db.transaction(async (client) => {
          const deleted = await client.query(`delete from ${t("connections")} where id = $1`, [id]);
          if (deleted.rowCount === 0) return false;
          // Locked first (in id order, as deliveries lock them), so deliveries in flight finish before their rows go.
          const datasets = await client.query<{ id: string }>(
            `select id from ${t("datasets")} where connection_id = $1 order by id for update`,
            [id],
          );
          const ids = datasets.rows.map((d) => d.id);
          if (ids.length > 0) await deleteRowsOf(client, t, ids);
          gone.push(...ids);
          return true;
        }),
      );
      for (const datasetId of gone) await syncDatasetIndexes(db, datasetId, []);
      return deleted;
    },
    async putDataset(dataset) {
      const result = await changing(
        db.transaction(async (client) => {
          const table = await client.query(`select 1 from ${t("input_tables")} where id = $1`, [dataset.id]);
          if (table.rowCount) throw new Error(`${dataset.id} is an input table`);
          // rowCount is the store's: 0 for a new dataset, kept on a replace.
          const rows = await client.query<{ created: boolean }>(
            `insert into ${t("datasets")} (${DATASET_COLUMNS}) values ($1, $2, $3, $4, $5, $6, $7, $8, 0, $9, $10)
           on conflict (id) do update set team_id = excluded.team_id, name = excluded.name, type = excluded.type,
             connection_id = excluded.connection_id, source = excluded.source, columns = excluded.columns,
             columns_declared = excluded.columns_declared, last_refreshed_at = excluded.last_refreshed_at, updated_at = excluded.updated_at
           returning ${PUT_RESULT}`,
            [
              dataset.id,
              dataset.teamId,
              dataset.name,
              dataset.type,
              dataset.connectionId,
              dataset.source,
              json(dataset.columns),
              dataset.columnsDeclared === true,
              dataset.lastRefreshedAt,
              dataset.updatedAt,
            ],
          );
          // The typed copy of declared columns follows the declaration in the same transaction (dataset-values.ts).
          await syncDatasetValues(client, t, dataset.id, dataset.columnsDeclared === true ? dataset.columns : null);
          return putResult(rows.rows);
        }),
      );
      // Declared columns are indexed (row-indexes.ts), after the commit: the builds do not block writers.
      await syncDatasetIndexes(
        db,
        dataset.id,
        dataset.columnsDeclared === true ? dataset.columns.map((c) => c.name) : [],
      );
      return result;
    },
    async deleteDataset(id) {
      const deleted = await changing(
        db.transaction(async (client) => {
          // The lock waits for deliveries in flight on this dataset (and for a bulk write's publishing).
          const found = await client.query(`select 1 from ${t("datasets")} where id = $1 for update`, [id]);
          if (found.rowCount === 0) return false;
          await deleteRowsOf(client, t, [id]);
          return true;
        }),
      );
      if (deleted) await syncDatasetIndexes(db, id, []);
      return deleted;
    },
  };
}

/**
 * Delete datasets (their rows locked by the caller) with their rows. A bulk
 * write's claim goes first: deleting it waits for a staging transaction in
 * flight, so the rows it commits are seen and deleted too, and the writer
 * fails at its next step.
 */
async function deleteRowsOf(client: PoolClient, t: Db["t"], ids: readonly string[]): Promise<void> {
  await client.query(`delete from ${t("dataset_stagings")} where dataset_id = any($1)`, [ids]);
  await client.query(`delete from ${t("dataset_rows")} where dataset_id = any($1)`, [ids]);
  // Their change feeds go with them (a later dataset with one of these ids starts a feed of its own).
  await client.query(`delete from ${t("changes")} where feed_id = any($1)`, [ids]);
  await client.query(`delete from ${t("change_feeds")} where feed_id = any($1)`, [ids]);
  await client.query(`delete from ${t("datasets")} where id = any($1)`, [ids]);
}

const CONNECTION_COLUMNS = "id, team_id, name, type, config, created_at";
const DATASET_COLUMNS =
  "id, team_id, name, type, connection_id, source, columns, columns_declared, row_count, last_refreshed_at, updated_at";

/** The receiver path of a webhook connection, kept in `endpoint_id`; null for every other type. */
export function webhookEndpointId(connection: ConnectionRecord): string | null {
  const endpointId = connection.config.endpointId;
  return connection.type === "webhook" && typeof endpointId === "string" ? endpointId : null;
}

/** Datasets and input tables (as `input_table` datasets) in one relation. */
function datasetsAndTables(t: Db["t"]): string {
  return `select ${DATASET_COLUMNS} from ${t("datasets")}
    union all
    select id, team_id, name, 'input_table', null, null, columns, false, row_count, null, updated_at from ${t("input_tables")}`;
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
  columns_declared: boolean;
  row_count: string;
  last_refreshed_at: string | null;
  updated_at: string;
}

export function toConnection(r: ConnectionRow): ConnectionRecord {
  return { id: r.id, teamId: r.team_id, name: r.name, type: r.type, config: r.config, createdAt: r.created_at };
}

export function toDataset(r: DatasetRow): DatasetRecord {
  const dataset: DatasetRecord = {
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
  // As the SQLite store answers: the flag only when the columns were declared.
  if (r.columns_declared === true) dataset.columnsDeclared = true;
  return dataset;
}
