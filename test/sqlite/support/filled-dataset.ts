import type { SqliteStorage } from "../../../src/sqlite/index.js";

/** The columns `fillRows` gives a dataset: none declared, so no row index serves a sort or a condition. */
export const FILLED_COLUMNS = [
  { name: "id", type: "number" },
  { name: "name", type: "string" },
  { name: "amount", type: "number" },
];

/**
 * Replaces the rows of an existing dataset with `rows` generated ones
 * (`{ id, name, amount }`, names in no order), straight in the file on the
 * store's writer connection: a bulk write of a million rows would take far
 * longer. The store's memos see it (the writes are its own connection's).
 */
export function fillRows(storage: SqliteStorage, datasetId: string, rows: number): void {
  const { db } = storage;
  const seq = db.prepare("SELECT seq FROM datasets WHERE id = ?").pluck().get(datasetId) as number;
  db.transaction(() => {
    db.prepare("DELETE FROM dataset_rows WHERE dataset_seq = ?").run(seq);
    db.prepare(
      `WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i + 1 < ?)
       INSERT INTO dataset_rows (row_key, dataset_seq, position, data)
       SELECT ? * 8796093022208 + i, ?, i, json_object('id', i, 'name', 'n' || ((i * 7919) % 1000003), 'amount', ((i * 2654435761) % 1000003) / 100.0)
       FROM n`,
    ).run(rows, seq, seq);
    db.prepare(
      "UPDATE datasets SET first_position = 0, next_position = ?, columns = ?, columns_declared = 0 WHERE seq = ?",
    ).run(rows, JSON.stringify(FILLED_COLUMNS), seq);
  })();
  // Row indexes of declared columns it may have had are left alone: the columns are no longer declared, so no read uses
  // them.
}
