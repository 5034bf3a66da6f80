import type { ConnectionRecord, DatasetRecord } from "../../domain/model.js";
import type { IdPage, PutResult } from "./identity.js";

/**
 * Connections and datasets (their rows are the `rows` area's). Input tables are datasets of type `input_table`.
 * A fault of the store answers 503 `storage_unavailable` (the fault clause on `Storage`).
 */
export interface CatalogStore {
  getConnection(id: string): Promise<ConnectionRecord | null>;
  /** Connections of a team, ordered by id. */
  listConnections(teamId: string): Promise<ConnectionRecord[]>;
  /** Datasets of a team (input tables included), ordered by name then id. When `ids` is given only those. */
  listDatasets(query: { teamId: string; ids?: readonly string[] }): Promise<DatasetRecord[]>;
  /** Every connection, by id (the admin listing). */
  listAllConnections(page: IdPage): Promise<ConnectionRecord[]>;
  /** Every upload and connection dataset (not input tables), by id (the admin listing). */
  listAllDatasets(page: IdPage): Promise<DatasetRecord[]>;
  /** A dataset or input table by id. */
  getDataset(id: string): Promise<DatasetRecord | null>;
}

/**
 * Changes to connections and datasets. Each call is atomic and visible to the
 * very next read, in every process sharing the store. References (a
 * dataset's team and connection) are checked by the caller; the input-table
 * id space is shared, so the caller also keeps dataset and table ids apart.
 */
export interface CatalogWrites {
  /**
   * Creates or replaces the connection with `connection.id`. A `webhook`
   * connection's `config.endpointId` is its receiver path: it MUST be unique
   * among connections (a put that would take another connection's endpoint id
   * throws and writes nothing), and the next delivery sees the new config.
   * Creating a webhook connection goes through `WebhookStore.createWebhookConnection`
   * (which also makes its dataset); this replaces one that exists.
   */
  putConnection(connection: ConnectionRecord): Promise<PutResult>;
  /**
   * Deletes the connection, its datasets and their rows (a webhook's endpoint with them), in one transaction; false
   * when unknown.
   */
  deleteConnection(id: string): Promise<boolean>;
  /**
   * Creates or replaces an upload or connection dataset. Replacing keeps its
   * rows; `rowCount` is the store's (the value passed is ignored).
   */
  putDataset(dataset: DatasetRecord): Promise<PutResult>;
  /** Deletes an upload or connection dataset and its rows; false when unknown (or an input table). */
  deleteDataset(id: string): Promise<boolean>;
}
