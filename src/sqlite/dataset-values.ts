import type Database from "better-sqlite3";
import type { Column } from "../domain/model.js";
import { parseValueLayout, SLOT_NUMBERS, valueLayout, type ValueLayout } from "../sql/dataset-values.js";
import { parseJson, rowKey } from "./db.js";
import { indexableColumn } from "./row-query-dialect.js";

/**
 * The typed copy of declared columns on SQLite (see `src/sql/dataset-values.ts`):
 * `dataset_values`, keyed by `row_key` like `dataset_rows`, one row per row
 * of a dataset with a layout in `dataset_value_layouts` (its slots' JSON
 * paths). A value is its SQL value as the aggregate dialect orders it: a
 * number or a text as `json_extract` reads it, `true`/`false` a blob 0x01 +
 * the word, an object or array a blob 0x02 + its JSON text, null and absent
 * NULL. `h<i>`, `w<i>`: the hour and week buckets of a date or datetime
 * column's text (`dataport_time_bucket`, the reference's code).
 *
 * Triggers on `dataset_rows` keep it (MIGRATION_SQL): every insert, delete and
 * update of a row, whatever writes it (bulk writes and their staging, refreshes,
 * webhook ingest, retention trims, deletes), so no write path calls anything.
 * A layout changes only with a dataset's declaration (`syncDatasetValues`,
 * called where its row indexes are made), which rebuilds that dataset's copy.
 */

/** The value of slot `i` from the JSON text `doc` and the layout row `s`, as stored. */
function slotValue(doc: string, i: number): string {
  const [type, value] = [`json_type(${doc}, s.p${i})`, `json_extract(${doc}, s.p${i})`];
  return `(CASE ${type} WHEN 'true' THEN X'0174727565' WHEN 'false' THEN X'0166616c7365'
    WHEN 'object' THEN CAST(char(2) || ${value} AS BLOB) WHEN 'array' THEN CAST(char(2) || ${value} AS BLOB)
    WHEN 'null' THEN NULL ELSE ${value} END)`;
}

/** A time bucket of slot `i` (NULL unless its column is a date or datetime one and the value a text). */
function slotBucket(doc: string, i: number, unit: "hour" | "week"): string {
  return `(CASE WHEN s.q${i} IS NOT NULL AND json_type(${doc}, s.q${i}) = 'text'
    THEN dataport_time_bucket('${unit}', json_extract(${doc}, s.q${i})) END)`;
}

const COLUMNS = ["row_key", ...["v", "h", "w"].flatMap((c) => SLOT_NUMBERS.map((i) => `${c}${i}`))].join(", ");

/** The copy's rows of the rows `r` (`doc` their text) whose dataset has a layout `s`. */
function copiedRows(doc: string, key: string): string {
  const values = SLOT_NUMBERS.map((i) => slotValue(doc, i));
  const hours = SLOT_NUMBERS.map((i) => slotBucket(doc, i, "hour"));
  const weeks = SLOT_NUMBERS.map((i) => slotBucket(doc, i, "week"));
  return `SELECT ${[key, ...values, ...hours, ...weeks].join(",\n  ")}`;
}

/** The schema: the two tables and the triggers (a migration step; frozen once shipped, as every step is). */
export const DATASET_VALUES_SQL = `
  CREATE TABLE dataset_value_layouts (
    dataset_seq INTEGER PRIMARY KEY, layout TEXT NOT NULL,
    ${SLOT_NUMBERS.map((i) => `p${i} TEXT, q${i} TEXT`).join(", ")}
  );
  CREATE TABLE dataset_values (row_key INTEGER PRIMARY KEY, ${COLUMNS.split(", ").slice(1).join(", ")});
  CREATE TRIGGER dataset_values_after_insert AFTER INSERT ON dataset_rows BEGIN
    INSERT OR REPLACE INTO dataset_values (${COLUMNS})
    ${copiedRows("NEW.data", "NEW.row_key")} FROM dataset_value_layouts s WHERE s.dataset_seq = NEW.dataset_seq;
  END;
  CREATE TRIGGER dataset_values_after_update AFTER UPDATE ON dataset_rows BEGIN
    DELETE FROM dataset_values WHERE row_key = OLD.row_key;
    INSERT OR REPLACE INTO dataset_values (${COLUMNS})
    ${copiedRows("NEW.data", "NEW.row_key")} FROM dataset_value_layouts s WHERE s.dataset_seq = NEW.dataset_seq;
  END;
  CREATE TRIGGER dataset_values_after_delete AFTER DELETE ON dataset_rows
    WHEN EXISTS (SELECT 1 FROM dataset_value_layouts WHERE dataset_seq = OLD.dataset_seq) BEGIN
    DELETE FROM dataset_values WHERE row_key = OLD.row_key;
  END;
  CREATE TRIGGER dataset_value_layouts_after_dataset_delete AFTER DELETE ON datasets BEGIN
    DELETE FROM dataset_values WHERE row_key >= OLD.seq * ${2n ** 43n} AND row_key < (OLD.seq + 1) * ${2n ** 43n};
    DELETE FROM dataset_value_layouts WHERE dataset_seq = OLD.seq;
  END;
`;

/**
 * Make a dataset's copy that of its declaration (`columns`, null when
 * undeclared): nothing when its layout is unchanged, else its copy is
 * dropped and, when it has one, made again from its rows (every stored row,
 * window or staged). Inside the caller's write transaction.
 */
export function syncDatasetValues(db: Database.Database, seq: number, columns: readonly Column[] | null): void {
  const layout = valueLayout(columns, indexableColumn);
  const stored = db.prepare<[number], string>("SELECT layout FROM dataset_value_layouts WHERE dataset_seq = ?").pluck().get(seq);
  if ((layout?.text ?? null) === (stored ?? null)) return;
  const [from, to] = [rowKey(seq, 0), rowKey(seq, 0) + 2n ** 43n];
  db.prepare("DELETE FROM dataset_values WHERE row_key >= ? AND row_key < ?").run(from, to);
  if (layout === null) {
    db.prepare("DELETE FROM dataset_value_layouts WHERE dataset_seq = ?").run(seq);
    return;
  }
  const paths = SLOT_NUMBERS.flatMap((i) => {
    const entry = [...layout.slots].find(([, s]) => s.slot === i);
    return entry ? [`$."${entry[0]}"`, entry[1].times ? `$."${entry[0]}"` : null] : [null, null];
  });
  db.prepare(
    `INSERT OR REPLACE INTO dataset_value_layouts (dataset_seq, layout, ${SLOT_NUMBERS.map((i) => `p${i}, q${i}`).join(", ")})
     VALUES (${["?", "?", ...paths.map(() => "?")].join(", ")})`,
  ).run(seq, layout.text, ...paths);
  db.prepare(
    `INSERT INTO dataset_values (${COLUMNS}) ${copiedRows("r.data", "r.row_key")}
     FROM dataset_rows r JOIN dataset_value_layouts s ON s.dataset_seq = r.dataset_seq WHERE r.row_key >= ? AND r.row_key < ?`,
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
  db.transaction(() => missing.forEach((d) => syncDatasetValues(db, d.seq, parseJson<Column[]>(d.columns)))).immediate();
}

/** The layout of a dataset's copy, or null when it has none. */
export function valueLayoutOf(db: Database.Database): (datasetId: string) => ValueLayout | null {
  const find = db
    .prepare<[string], string>("SELECT s.layout FROM datasets d JOIN dataset_value_layouts s ON s.dataset_seq = d.seq WHERE d.id = ?")
    .pluck();
  return (datasetId) => {
    const text = find.get(datasetId);
    return text === undefined ? null : parseValueLayout(text);
  };
}
