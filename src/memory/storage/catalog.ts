import { matchesFilters, selectColumns, tableAsDataset } from "../../domain/rows.js";
import type { DatasetRecord, Row } from "../../domain/model.js";
import type { CatalogStore, RowQuery } from "../../ports/storage/catalog.js";
import { compare } from "./identity.js";
import { cloneJson, type MemoryState } from "./state.js";

export function memoryCatalog(state: MemoryState): CatalogStore {
  const dataset = (id: string): DatasetRecord | null => {
    const found = state.datasets.get(id);
    if (found) return cloneJson(found);
    const table = state.tables.get(id);
    return table ? cloneJson(tableAsDataset(table)) : null;
  };
  return {
    async getConnection(id) {
      const found = state.connections.get(id);
      return found ? cloneJson(found) : null;
    },
    async listConnections(teamId) {
      return [...state.connections.values()].filter((c) => c.teamId === teamId).sort((a, b) => compare(a.id, b.id)).map(cloneJson);
    },
    async listDatasets({ teamId, ids }) {
      const wanted = ids ? new Set(ids) : null;
      const all = [...state.datasets.values(), ...[...state.tables.values()].map(tableAsDataset)];
      return all
        .filter((d) => d.teamId === teamId && (!wanted || wanted.has(d.id)))
        .sort((a, b) => compare(a.name, b.name) || compare(a.id, b.id))
        .map(cloneJson);
    },
    async getDataset(id) {
      return dataset(id);
    },
    async readDatasetRows(datasetId, query) {
      const rows = state.datasetRows.get(datasetId) ?? [];
      const totalRows = query.filters ? rows.reduce((n, r) => n + (matchesFilters(r, query.filters) ? 1 : 0), 0) : rows.length;
      return { totalRows, rows: pageOf(rows, query, () => state.datasetRowsTrimmed.get(datasetId) ?? 0) };
    },
    async replaceDatasetRows(datasetId, data) {
      const found = state.datasets.get(datasetId);
      if (!found) throw new Error(`unknown dataset ${datasetId}`);
      state.datasetRows.set(datasetId, data.rows.map(cloneJson));
      state.datasetRowsTrimmed.delete(datasetId);
      Object.assign(found, {
        columns: cloneJson(data.columns),
        rowCount: data.rows.length,
        lastRefreshedAt: data.refreshedAt,
        updatedAt: data.refreshedAt,
      });
    },
  };
}

/**
 * The page as a lazy sequence over the live row array. Positions are
 * absolute (index + rows trimmed so far), so retention trimming the front
 * while a read is under way neither repeats nor skips a retained row.
 */
async function* pageOf(rows: readonly Row[], query: RowQuery, trimmed: () => number): AsyncGenerator<Row> {
  let skipped = 0;
  let returned = 0;
  const limit = query.limit ?? Number.POSITIVE_INFINITY;
  if (limit <= 0) return;
  for (let position = trimmed() + (query.filters ? 0 : query.offset); ; position++) {
    const i = Math.max(0, position - trimmed());
    position = i + trimmed();
    if (i >= rows.length) return;
    const row = rows[i]!;
    if (query.filters) {
      if (!matchesFilters(row, query.filters)) continue;
      if (skipped < query.offset) {
        skipped++;
        continue;
      }
    }
    yield selectColumns(row, query.columns);
    if (++returned >= limit) return;
  }
}
