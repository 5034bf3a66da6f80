import { SLOT_NUMBERS, TIME_SLOT_NUMBERS } from "../sql/dataset-values.js";

/**
 * The typed copy of declared columns on SQLite (see `src/sql/dataset-values.ts`):
 * `dataset_values`, keyed by `row_key` like `dataset_rows`, one row per row
 * of a dataset with a layout in `dataset_value_layouts` (its slots' JSON
 * paths). A value is its SQL value as the aggregate dialect orders it: a
 * number or a text as `json_extract` reads it, `true`/`false` a blob 0x01 +
 * the word, an object or array a blob 0x02 + its JSON text, null and absent
 * NULL. `h<j>`, `w<j>`: the hour and week buckets of a date or datetime
 * column's text (`dataport_time_bucket`, the reference's code).
 *
 * Triggers on `dataset_rows` keep it (DATASET_VALUES_SQL, a migration step): every insert, delete and
 * update of a row, whatever writes it (bulk writes and their staging, refreshes,
 * webhook ingest, retention trims, deletes), so no write path calls anything.
 * A layout changes only with a dataset's declaration (`syncDatasetValues`,
 * called where its row indexes are made), which rebuilds that dataset's copy.
 */

/** The value of slot `i` from the JSON text `doc` and the layout row `s`, as stored. */
function slotValue(doc: string, i: number): string {
  const [type, value] = [`json_type(${doc}, s.p${i})`, `json_extract(${doc}, s.p${i})`];
  // A slot without a column reads nothing (json_type would still look at the text).
  return `(CASE WHEN s.p${i} IS NULL THEN NULL ELSE (CASE ${type} WHEN 'true' THEN X'0174727565' WHEN 'false' THEN X'0166616c7365'
    WHEN 'object' THEN CAST(char(2) || ${value} AS BLOB) WHEN 'array' THEN CAST(char(2) || ${value} AS BLOB)
    WHEN 'null' THEN NULL ELSE ${value} END) END)`;
}

/** A time bucket of time slot `j` (NULL unless the value is a text with that bucket). */
function slotBucket(doc: string, j: number, unit: "hour" | "week"): string {
  return `(CASE WHEN s.q${j} IS NOT NULL AND json_type(${doc}, s.q${j}) = 'text'
    THEN dataport_time_bucket('${unit}', json_extract(${doc}, s.q${j})) END)`;
}

export const COLUMNS = [
  "row_key",
  ...SLOT_NUMBERS.map((i) => `v${i}`),
  ...["h", "w"].flatMap((c) => TIME_SLOT_NUMBERS.map((j) => `${c}${j}`)),
].join(", ");

/** The copy's rows (`key`, `doc` their key and text) of the rows that `from` (`FROM …`) joins to their layout `l`. */
export function copiedRows(doc: string, key: string, from: string): string {
  const values = SLOT_NUMBERS.map((i) => slotValue("s.j", i));
  const hours = TIME_SLOT_NUMBERS.map((j) => slotBucket("s.j", j, "hour"));
  const weeks = TIME_SLOT_NUMBERS.map((j) => slotBucket("s.j", j, "week"));
  // The text taken apart once per row (JSONB), not once per slot; the fence keeps SQLite from inlining it per use.
  return `SELECT ${["s.k", ...values, ...hours, ...weeks].join(",\n  ")}
    FROM (SELECT ${key} AS k, jsonb(${doc}) AS j, l.* ${from} LIMIT -1 OFFSET 0) AS s`;
}

/** The schema: the two tables and the triggers (a migration step; frozen once shipped, as every step is). */
export const DATASET_VALUES_SQL = `
  CREATE TABLE dataset_value_layouts (
    dataset_seq INTEGER PRIMARY KEY, layout TEXT NOT NULL,
    ${SLOT_NUMBERS.map((i) => `p${i} TEXT`).join(", ")}, ${TIME_SLOT_NUMBERS.map((j) => `q${j} TEXT`).join(", ")}
  );
  CREATE TABLE dataset_values (row_key INTEGER PRIMARY KEY, ${COLUMNS.split(", ").slice(1).join(", ")});
  CREATE TRIGGER dataset_values_after_insert AFTER INSERT ON dataset_rows BEGIN
    INSERT OR REPLACE INTO dataset_values (${COLUMNS})
    ${copiedRows("NEW.data", "NEW.row_key", "FROM dataset_value_layouts l WHERE l.dataset_seq = NEW.dataset_seq")};
  END;
  CREATE TRIGGER dataset_values_after_update AFTER UPDATE ON dataset_rows BEGIN
    DELETE FROM dataset_values WHERE row_key = OLD.row_key;
    INSERT OR REPLACE INTO dataset_values (${COLUMNS})
    ${copiedRows("NEW.data", "NEW.row_key", "FROM dataset_value_layouts l WHERE l.dataset_seq = NEW.dataset_seq")};
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
