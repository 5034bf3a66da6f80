import type { ConnectionRecord, DatasetRecord } from "../../domain/model.js";
import { tableAsDataset } from "../../domain/rows.js";
import type { CatalogStore, CatalogWrites } from "../../ports/storage/catalog.js";
import { compare, pageById } from "./order.js";
import { forgetFeed } from "./changes.js";
import { cloneJson, liveCount, type MemoryState } from "./state.js";

/**
 * Connections and datasets (their rows: rows.ts). Every write does its checks and
 * copies first and then changes the state in one synchronous step, so it is
 * atomic in one process; a bulk write collects its rows before that step.
 */
export function memoryCatalog(state: MemoryState): CatalogStore & CatalogWrites {
  const dataset = (id: string): DatasetRecord | null => {
    const found = state.datasets.get(id);
    if (found) return cloneJson(found);
    const table = state.tables.get(id);
    return table ? cloneJson(tableAsDataset(table)) : null;
  };

  /** A dataset and its rows go together, with the dedup keys of those rows. */
  const removeDataset = (id: string): void => {
    state.datasets.delete(id);
    state.datasetRows.delete(id);
    state.dedupKeys.delete(id);
    forgetFeed(state, id);
  };

  return {
    async getConnection(id) {
      const found = state.connections.get(id);
      return found ? cloneJson(found) : null;
    },
    async listConnections(teamId) {
      return [...state.connections.values()]
        .filter((c) => c.teamId === teamId)
        .sort((a, b) => compare(a.id, b.id))
        .map(cloneJson);
    },
    async listDatasets({ teamId, ids }) {
      const wanted = ids ? new Set(ids) : null;
      const all = [...state.datasets.values(), ...[...state.tables.values()].map(tableAsDataset)];
      return all
        .filter((d) => d.teamId === teamId && (!wanted || wanted.has(d.id)))
        .sort((a, b) => compare(a.name, b.name) || compare(a.id, b.id))
        .map(cloneJson);
    },
    async listAllConnections(page) {
      return pageById(state.connections.values(), page).map(cloneJson);
    },
    async listAllDatasets(page) {
      return pageById(state.datasets.values(), page).map(cloneJson);
    },
    async getDataset(id) {
      return dataset(id);
    },

    async putConnection(connection) {
      const endpointId = webhookEndpointId(connection);
      for (const other of state.connections.values()) {
        if (endpointId !== null && other.id !== connection.id && webhookEndpointId(other) === endpointId) {
          throw new Error(`webhook endpoint id ${endpointId} belongs to connection ${other.id}`);
        }
      }
      const result = state.connections.has(connection.id) ? "updated" : "created";
      state.connections.set(connection.id, cloneJson(connection));
      return result;
    },
    async deleteConnection(id) {
      if (!state.connections.has(id)) return false;
      const datasets = [...state.datasets.values()].filter((d) => d.connectionId === id);
      state.connections.delete(id);
      for (const d of datasets) removeDataset(d.id);
      return true;
    },
    async putDataset(record) {
      const current = state.datasetRows.get(record.id);
      const stored = { ...cloneJson(record), rowCount: current ? liveCount(state, current) : 0 };
      // The flag only when declared, as the durable stores answer.
      if (stored.columnsDeclared !== true) delete stored.columnsDeclared;
      const result = state.datasets.has(record.id) ? "updated" : "created";
      state.datasets.set(record.id, stored);
      if (!current) state.datasetRows.set(record.id, []);
      return result;
    },
    async deleteDataset(id) {
      if (!state.datasets.has(id)) return false;
      removeDataset(id);
      return true;
    },
  };
}

/** The receiver path of a webhook connection, or null for any other connection. */
function webhookEndpointId(connection: ConnectionRecord): string | null {
  const endpointId = connection.config.endpointId;
  return connection.type === "webhook" && typeof endpointId === "string" && endpointId !== "" ? endpointId : null;
}
