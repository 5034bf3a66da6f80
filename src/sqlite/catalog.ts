import type { ConnectionRecord } from "../domain/model.js";
import type { CatalogStore, CatalogWrites } from "../ports/storage/catalog.js";
import { reportsOwnFaults } from "../sql/store-calls.js";
import { catalogWrites } from "./catalog-writes.js";
import {
  DATASET_COLUMNS,
  type DatasetRecords,
  type DatasetRow,
  TABLE_AS_DATASET,
  toDataset,
} from "./dataset-records.js";
import { parseJson, type SqliteHandle } from "./db.js";
import { idPageQuery } from "./identity.js";

interface ConnectionRow {
  id: string;
  team_id: string;
  name: string;
  type: string;
  config: string;
  created_at: string;
}

/**
 * Connections and datasets (their rows: rows.ts). Reads query the writer
 * connection, so every commit, of this process or another on the same file,
 * is seen by the next read. The dataset records remembered (`records`,
 * shared with the rows area) are forgotten as soon as one can have changed.
 */
export function sqliteCatalog(handle: SqliteHandle, records: DatasetRecords): CatalogStore & CatalogWrites {
  const { db } = handle;
  const connection = db.prepare<[string], ConnectionRow>("SELECT * FROM connections WHERE id = ?");
  const teamConnections = db.prepare<[string], ConnectionRow>(
    "SELECT * FROM connections WHERE team_id = ? ORDER BY id",
  );
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
  const connectionPage = idPageQuery<ConnectionRow>(db, "SELECT * FROM connections");
  const datasetPage = idPageQuery<DatasetRow>(db, `SELECT ${DATASET_COLUMNS} FROM datasets`);

  return {
    async getConnection(id) {
      const row = connection.get(id);
      return row ? toConnection(row) : null;
    },
    async listConnections(teamId) {
      return teamConnections.all(teamId).map(toConnection);
    },
    async listDatasets({ teamId, ids }) {
      const rows = ids
        ? someDatasets.all(teamId, JSON.stringify(ids), teamId, JSON.stringify(ids))
        : teamDatasets.all(teamId, teamId);
      return rows.map(toDataset);
    },
    async listAllConnections(page) {
      return connectionPage(page).map(toConnection);
    },
    async listAllDatasets(page) {
      return datasetPage(page).map(toDataset);
    },
    // The calls of every rows read: they report their own faults (no wrapper's promise on the way).
    getDataset: reportsOwnFaults(async (id: string) => {
      try {
        return records.remembered(id)?.record ?? null;
      } catch (error) {
        throw handle.faults.reported(error);
      }
    }),
    ...catalogWrites(handle),
  };
}

function toConnection(row: ConnectionRow): ConnectionRecord {
  return {
    id: row.id,
    teamId: row.team_id,
    name: row.name,
    type: row.type,
    config: parseJson(row.config),
    createdAt: row.created_at,
  };
}
