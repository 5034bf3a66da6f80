import type * as Database from "./driver.js";
import type { ConnectionRecord, DatasetRecord } from "../domain/model.js";
import type { CatalogWrites } from "../ports/storage/catalog.js";
import type { PutResult } from "../ports/storage/identity.js";
import { rowKey, type SqliteHandle, writeTransaction } from "./db.js";
import { syncDatasetValues } from "./dataset-values.js";
import { syncDatasetIndexes } from "./row-indexes.js";

type MetadataWrites = Pick<CatalogWrites, "putConnection" | "deleteConnection" | "putDataset" | "deleteDataset">;

/**
 * Connections and datasets themselves, each one IMMEDIATE transaction.
 * Every call bumps `catalogVersion`, which the webhook endpoint cache
 * compares (another process's commits reach it through `PRAGMA data_version`).
 */
export function catalogWrites(handle: SqliteHandle): MetadataWrites {
  const { db } = handle;
  const connectionExists = db.prepare<[string], number>("SELECT 1 FROM connections WHERE id = ?").pluck();
  const endpointOwner = db.prepare<[string], string>("SELECT id FROM connections WHERE endpoint_id = ?").pluck();
  const upsertConnection = db.prepare<[string, string, string, string, string, string, string | null]>(
    `INSERT INTO connections (id, team_id, name, type, config, created_at, endpoint_id) VALUES (?, ?, ?, ?, ?, ?, ?)
     ON CONFLICT (id) DO UPDATE SET team_id = excluded.team_id, name = excluded.name, type = excluded.type,
       config = excluded.config, created_at = excluded.created_at, endpoint_id = excluded.endpoint_id`,
  );
  const removeConnection = db.prepare<[string]>("DELETE FROM connections WHERE id = ?");
  const connectionDatasets = db.prepare<[string], number>("SELECT seq FROM datasets WHERE connection_id = ?").pluck();
  const datasetSeq = db.prepare<[string], number>("SELECT seq FROM datasets WHERE id = ?").pluck();
  const isTable = db.prepare<[string], number>("SELECT 1 FROM input_tables WHERE id = ?").pluck();
  const insertDataset = db.prepare<
    [string, string, string, string, string | null, string | null, string, number, string | null, string]
  >(
    `INSERT INTO datasets (id, team_id, name, type, connection_id, source, columns, columns_declared, last_refreshed_at, updated_at,
       first_position, next_position)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0, 0)`,
  );
  const updateDataset = db.prepare<
    [string, string, string, string | null, string | null, string, number, string | null, string, string]
  >(
    `UPDATE datasets SET team_id = ?, name = ?, type = ?, connection_id = ?, source = ?, columns = ?, columns_declared = ?,
       last_refreshed_at = ?, updated_at = ?
     WHERE id = ?`,
  );
  const removeDataset = dropDataset(db);

  const putConnection = writeTransaction(db, (c: ConnectionRecord): PutResult => {
    const endpointId = webhookEndpointId(c);
    if (endpointId !== null) {
      const owner = endpointOwner.get(endpointId);
      if (owner !== undefined && owner !== c.id)
        throw new Error(`webhook endpoint id ${endpointId} belongs to another connection`);
    }
    const created = connectionExists.get(c.id) === undefined;
    upsertConnection.run(c.id, c.teamId, c.name, c.type, JSON.stringify(c.config), c.createdAt, endpointId);
    return created ? "created" : "updated";
  });

  const deleteConnection = writeTransaction(db, (id: string): boolean => {
    if (connectionExists.get(id) === undefined) return false;
    for (const seq of connectionDatasets.all(id)) removeDataset(seq);
    removeConnection.run(id);
    return true;
  });

  const putDataset = writeTransaction(db, (d: DatasetRecord): PutResult => {
    if (d.type === "input_table") throw new Error(`dataset ${d.id}: input tables are written with putTable`);
    if (isTable.get(d.id) !== undefined) throw new Error(`dataset ${d.id}: the id is an input table's`);
    const values = [
      d.teamId,
      d.name,
      d.type,
      d.connectionId,
      d.source,
      JSON.stringify(d.columns),
      d.columnsDeclared === true ? 1 : 0,
      d.lastRefreshedAt,
      d.updatedAt,
    ] as const;
    // Replacing keeps the rows: the window (first/next position) is not touched.
    const result: PutResult =
      updateDataset.run(...values, d.id).changes > 0 ? "updated" : (insertDataset.run(d.id, ...values), "created");
    // Declared columns are indexed (row-indexes.ts); inferred ones are not.
    syncDatasetIndexes(db, datasetSeq.get(d.id)!, d.columnsDeclared === true ? d.columns.map((c) => c.name) : []);
    syncDatasetValues(db, datasetSeq.get(d.id)!, d.columnsDeclared === true ? d.columns : null);
    return result;
  });

  const deleteDataset = writeTransaction(db, (id: string): boolean => {
    const seq = datasetSeq.get(id);
    if (seq === undefined) return false;
    removeDataset(seq);
    return true;
  });

  /**
   * The write (once it has committed, when it had to wait for the lock), then the endpoint cache told (also when it
   * threw: nothing is lost by forgetting).
   */
  const changing =
    <A extends unknown[], R>(write: (...args: A) => R | Promise<R>) =>
    async (...args: A): Promise<R> => {
      try {
        return await write(...args);
      } finally {
        handle.catalogVersion++;
      }
    };

  return {
    putConnection: changing(putConnection),
    deleteConnection: changing(deleteConnection),
    putDataset: changing(putDataset),
    deleteDataset: changing(deleteDataset),
  };
}

/** The receiver path of a webhook connection's config; null for other types. */
export function webhookEndpointId(connection: Pick<ConnectionRecord, "type" | "config">): string | null {
  const { endpointId } = connection.config;
  return connection.type === "webhook" && typeof endpointId === "string" ? endpointId : null;
}

/**
 * A dataset with every row it has at any position (window, staged, old) and
 * a bulk write's claim on it: a writer still staging finds its claim gone
 * and fails. Inside the caller's transaction.
 */
function dropDataset(db: Database.Database): (seq: number) => void {
  const rows = db.prepare<[bigint, bigint]>("DELETE FROM dataset_rows WHERE row_key >= ? AND row_key < ?");
  const claim = db.prepare<[number]>("DELETE FROM dataset_stagings WHERE dataset_seq = ?");
  const dataset = db.prepare<[number]>("DELETE FROM datasets WHERE seq = ?");
  // A dataset's change feed goes with it (a later dataset with its id starts a feed of its own).
  const changes = db.prepare<[number]>("DELETE FROM changes WHERE feed_id = (SELECT id FROM datasets WHERE seq = ?)");
  const changeMark = db.prepare<[number]>(
    "DELETE FROM change_feeds WHERE feed_id = (SELECT id FROM datasets WHERE seq = ?)",
  );
  return (seq) => {
    syncDatasetIndexes(db, seq, []);
    rows.run(rowKey(seq, 0), rowKey(seq, 0) + 2n ** 43n);
    claim.run(seq);
    changes.run(seq);
    changeMark.run(seq);
    dataset.run(seq);
  };
}
