import type { Column, DatasetRecord, Row } from "../../src/domain/model.js";
import type { Storage } from "../../src/ports/storage.js";

/** When the row-query tests say their datasets were written. */
const WRITTEN = "2026-11-01T00:00:00.000Z";

/** An upload dataset of team_ops; `declared` makes its columns declared (indexed on SQLite and PostgreSQL). */
export function uploadDataset(id: string, name: string, columns: Column[], declared: boolean): DatasetRecord {
  return {
    id,
    teamId: "team_ops",
    name,
    type: "upload",
    connectionId: null,
    source: null,
    columns,
    rowCount: 0,
    lastRefreshedAt: null,
    updatedAt: WRITTEN,
    ...(declared && { columnsDeclared: true }),
  };
}

/** A streamed bulk write of `rows` into a dataset (replacing or appending), as an upload makes one. */
export function writeRows(
  store: Pick<Storage, "rows">,
  datasetId: string,
  mode: "replace" | "append",
  rows: Iterable<Row>,
  columns: Column[],
) {
  return store.rows.writeDatasetRows({
    datasetId,
    mode,
    rows: (async function* () {
      yield* rows;
    })(),
    columns: () => columns,
    updatedAt: WRITTEN,
  });
}
