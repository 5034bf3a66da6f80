import { createHash } from "node:crypto";
import type { Db } from "./db.js";
import { HAS_JSONB, indexableColumn, quoteLiteral, sortTermsSql } from "./row-query.js";

/**
 * Row indexes: for each DECLARED column of a dataset (`columns_declared`)
 * or input table, two partial btree indexes on its sort terms
 * (`sortTermsSql`): (rank, num, text, pos) for ascending reads and
 * (descRank, num, text, -pos) walked backwards for descending ones (ties go
 * by position ascending both ways), limited to that dataset's or table's
 * rows and to rows PostgreSQL can take apart (`HAS_JSONB`, so a row holding
 * a `\u0000` escape never fails a write by failing an index expression).
 * Reads name the same literals (see `postgresRowDialect`). Inferred columns
 * get none: webhook ingest and undeclared uploads pay nothing.
 *
 * Made when columns are declared (putDataset, putTable) and dropped when the
 * declaration or the dataset goes, after the catalog write commits and
 * CONCURRENTLY: writers of other datasets are not blocked while an index is
 * built (it reads the whole rows table), reads go on meanwhile (without it).
 * An index left invalid by a failed build is dropped and built again by
 * the next sync.
 */

/** In every index name: an index of another expression would get another. */
const VERSION = "rx1";

export async function syncDatasetIndexes(db: Db, datasetId: string, columns: readonly string[]): Promise<void> {
  await sync(db, { table: "dataset_rows", prefix: prefixOf("d", datasetId), scope: `dataset_id = ${quoteLiteral(datasetId)}` }, columns);
}

export async function syncTableIndexes(db: Db, tableId: string, columns: readonly string[]): Promise<void> {
  await sync(db, { table: "table_rows", prefix: prefixOf("t", tableId), scope: `table_id = ${quoteLiteral(tableId)}` }, columns);
}

function prefixOf(kind: "d" | "t", id: string): string {
  return `${VERSION}_${kind}${md5(id).slice(0, 16)}_`;
}

interface Target {
  table: "dataset_rows" | "table_rows";
  prefix: string;
  scope: string;
}

async function sync(db: Db, target: Target, columns: readonly string[]): Promise<void> {
  const wanted = new Map<string, string>();
  const on = db.t(target.table);
  const where = `${target.scope} and ${HAS_JSONB}`;
  for (const column of new Set(columns)) {
    if (!indexableColumn(column)) continue;
    const base = `${target.prefix}${md5(column).slice(0, 12)}`;
    const terms = sortTermsSql("row", column);
    wanted.set(`${base}_a`, `create index concurrently "${base}_a" on ${on} (${terms.rank}, ${terms.num}, ${terms.text}, pos) where ${where}`);
    wanted.set(`${base}_d`, `create index concurrently "${base}_d" on ${on} (${terms.descRank}, ${terms.num}, ${terms.text}, (-pos)) where ${where}`);
  }
  const present = await db.query<{ name: string; valid: boolean }>(
    `select c.relname as name, i.indisvalid as valid from pg_index i join pg_class c on c.oid = i.indexrelid
      join pg_namespace n on n.oid = c.relnamespace where n.nspname = $1 and starts_with(c.relname, $2)`,
    [db.schema.slice(1, -1).replaceAll('""', '"'), target.prefix],
  );
  const kept = new Set<string>();
  for (const { name, valid } of present) {
    if (valid && wanted.has(name)) kept.add(name);
    else await db.query(`drop index concurrently if exists ${db.t(name)}`);
  }
  for (const [name, ddl] of wanted) {
    if (kept.has(name)) continue;
    try {
      await db.query(ddl);
    } catch (error) {
      // Another instance built it meanwhile.
      if ((error as { code?: string }).code !== "42P07") throw error;
    }
  }
}

function md5(text: string): string {
  return createHash("md5").update(text).digest("hex");
}
