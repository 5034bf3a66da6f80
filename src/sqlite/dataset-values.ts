import type * as Database from "./driver.js";
import type { Column } from "../domain/model.js";
import {
  parseValueLayout,
  SLOT_NUMBERS,
  slotNames,
  TIME_SLOT_NUMBERS,
  valueLayout,
  type ValueLayout,
} from "../sql/dataset-values.js";
import { COLUMNS, copiedRows } from "./dataset-values-sql.js";
import { parseJson, rowKey } from "./db.js";
import { indexableColumn } from "./row-query-dialect.js";

/**
 * The typed copy of declared columns on SQLite (its tables and triggers: dataset-values-sql.ts), made and dropped with
 * declarations.
 */

/**
 * Make a dataset's copy that of its declaration (`columns`, null when
 * undeclared): nothing when its layout is unchanged, else its copy is
 * dropped and, when it has one, made again from its rows (every stored row,
 * window or staged). Inside the caller's write transaction.
 */
export function syncDatasetValues(db: Database.Database, seq: number, columns: readonly Column[] | null): void {
  const layout = valueLayout(columns, indexableColumn);
  const stored = db
    .prepare<[number], string>("SELECT layout FROM dataset_value_layouts WHERE dataset_seq = ?")
    .pluck()
    .get(seq);
  if ((layout?.text ?? null) === (stored ?? null)) return;
  const [from, to] = [rowKey(seq, 0), rowKey(seq, 0) + 2n ** 43n];
  db.prepare("DELETE FROM dataset_values WHERE row_key >= ? AND row_key < ?").run(from, to);
  if (layout === null) {
    db.prepare("DELETE FROM dataset_value_layouts WHERE dataset_seq = ?").run(seq);
    return;
  }
  const { values, times } = slotNames(layout);
  const paths = [...values, ...times].map((name) => (name === null ? null : `$."${name}"`));
  const names = [...SLOT_NUMBERS.map((i) => `p${i}`), ...TIME_SLOT_NUMBERS.map((j) => `q${j}`)];
  db.prepare(
    `INSERT OR REPLACE INTO dataset_value_layouts (dataset_seq, layout, ${names.join(", ")})
     VALUES (${["?", "?", ...paths.map(() => "?")].join(", ")})`,
  ).run(seq, layout.text, ...paths);
  db.prepare(
    `INSERT INTO dataset_values (${COLUMNS}) ${copiedRows(
      "r.data",
      "r.row_key",
      "FROM dataset_rows r JOIN dataset_value_layouts l ON l.dataset_seq = r.dataset_seq WHERE r.row_key >= ? AND " +
        "r.row_key < ?",
    )}`,
  ).run(from, to);
}

/** Copies declared datasets lack (a file from before the copy), made now, once. */
export function ensureDatasetValues(db: Database.Database): void {
  const missing = db
    .prepare<[], { seq: number; columns: string }>(
      `SELECT seq, columns FROM datasets d WHERE columns_declared = 1
         AND NOT EXISTS (SELECT 1 FROM dataset_value_layouts s WHERE s.dataset_seq = d.seq)`,
    )
    .all();
  if (missing.length === 0) return;
  db.transaction(() =>
    missing.forEach((d) => syncDatasetValues(db, d.seq, parseJson<Column[]>(d.columns))),
  ).immediate();
}

/** The layout of a dataset's copy, or null when it has none. */
export function valueLayoutOf(db: Database.Database): (datasetId: string) => ValueLayout | null {
  const find = db
    .prepare<[string], string>(
      "SELECT s.layout FROM datasets d JOIN dataset_value_layouts s ON s.dataset_seq = d.seq WHERE d.id = ?",
    )
    .pluck();
  return (datasetId) => {
    const text = find.get(datasetId);
    return text === undefined ? null : parseValueLayout(text);
  };
}
