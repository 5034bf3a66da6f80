import type * as Database from "./driver.js";
import type { Column } from "../domain/model.js";
import { quoteLiteral } from "../sql/literals.js";
import {
  datasetIndexPrefix,
  indexableColumn,
  rowIndexName,
  sortValueSql,
  tableIndexPrefix,
} from "./row-query-dialect.js";

/**
 * Row indexes: for each DECLARED column of a dataset (`columns_declared`)
 * or input table, a partial index on its sort value (`sortValueSql`; the
 * row id follows it, so ties are in stored order), limited to that
 * dataset's or table's rows (`WHERE dataset_seq = <seq>` /
 * `WHERE table_id = '<id>'`). One index serves both directions (see
 * `indexedPageSql`): a second, descending one would double the write cost.
 * Reads of that dataset naming the same literal seek them (see
 * `sqliteRowDialect`). Inferred columns get none: webhook ingest and
 * undeclared uploads pay nothing.
 *
 * Made when columns are declared (putDataset, putTable, seeding), dropped
 * when the declaration or the dataset goes; `ensureRowIndexes` makes any
 * missing at start (a file from before they existed). Building one reads
 * the whole rows table once (SQLite has no partial scan for it), so it is
 * done at declaration time, never on a read or a row write.
 */

/**
 * Make and drop a dataset's row indexes so they are those of `columns` (empty: none). Inside the caller's write
 * transaction.
 */
export function syncDatasetIndexes(db: Database.Database, seq: number, columns: readonly string[]): void {
  sync(db, { table: "dataset_rows", prefix: datasetIndexPrefix(seq), scope: `dataset_seq = ${Number(seq)}` }, columns);
}

/** The same for an input table's rows. */
export function syncTableIndexes(db: Database.Database, tableId: string, columns: readonly string[]): void {
  sync(
    db,
    { table: "table_rows", prefix: tableIndexPrefix(tableId), scope: `table_id = ${quoteLiteral(tableId)}` },
    columns,
  );
}

/**
 * The indexes declared columns should have and do not (a file from before row indexes, a dataset seeded without them),
 * made now.
 */
export function ensureRowIndexes(db: Database.Database): void {
  const datasets = db
    .prepare<[], { seq: number; columns: string }>("SELECT seq, columns FROM datasets WHERE columns_declared = 1")
    .all();
  const tables = db.prepare<[], { id: string; columns: string }>("SELECT id, columns FROM input_tables").all();
  const work: Array<() => void> = [];
  for (const d of datasets) {
    const columns = names(d.columns);
    if (missing(db, datasetIndexPrefix(d.seq), columns)) work.push(() => syncDatasetIndexes(db, d.seq, columns));
  }
  for (const t of tables) {
    const columns = names(t.columns);
    if (missing(db, tableIndexPrefix(t.id), columns)) work.push(() => syncTableIndexes(db, t.id, columns));
  }
  if (work.length > 0) db.transaction(() => work.forEach((w) => w())).immediate();
}

/** The declared column names in a stored columns list. */
export function names(columnsJson: string): string[] {
  return (JSON.parse(columnsJson) as Column[]).map((c) => c.name);
}

interface Target {
  table: "dataset_rows" | "table_rows";
  prefix: string;
  scope: string;
}

function sync(db: Database.Database, target: Target, columns: readonly string[]): void {
  const wanted = new Map<string, string>();
  for (const column of new Set(columns)) {
    if (!indexableColumn(column)) continue;
    const base = rowIndexName(target.prefix, column);
    wanted.set(
      base,
      `CREATE INDEX "${base}" ON ${target.table} (${sortValueSql("data", column)}) WHERE ${target.scope}`,
    );
  }
  const present = existing(db, target.prefix);
  for (const name of present) if (!wanted.has(name)) db.exec(`DROP INDEX IF EXISTS "${name}"`);
  for (const [name, ddl] of wanted) if (!present.includes(name)) db.exec(ddl);
}

function existing(db: Database.Database, prefix: string): string[] {
  return db
    .prepare<[string, string], { name: string }>(
      "SELECT name FROM sqlite_schema WHERE type = 'index' AND substr(name, 1, length(?)) = ? ORDER BY name",
    )
    .all(prefix, prefix)
    .map((r) => r.name);
}

function missing(db: Database.Database, prefix: string, columns: readonly string[]): boolean {
  const present = new Set(existing(db, prefix));
  return columns.some((c) => indexableColumn(c) && !present.has(rowIndexName(prefix, c)));
}
