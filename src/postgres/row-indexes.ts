import { createHash } from "node:crypto";
import { briefly, type Db } from "./db.js";
import { quoteLiteral } from "../sql/literals.js";
import { HAS_JSONB, indexableColumn, sortTermsSql } from "./row-query-dialect.js";

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
 *
 * A build reads the whole rows table, which takes seconds on a large one:
 * the declaring write waits for its indexes at most `WAIT_MS`, then answers
 * while they are built (reads are correct meanwhile, without them; a build's
 * failure is logged, and the next sync of the dataset builds again). Syncs
 * of one dataset or table run one after the other in this store instance.
 */

/** In every index name: an index of another expression would get another. */
const VERSION = "rx1";

/** How long a declaring write waits for its index builds before it answers (they go on). */
const WAIT_MS = 2000;

export async function syncDatasetIndexes(db: Db, datasetId: string, columns: readonly string[]): Promise<void> {
  await scheduled(
    db,
    { table: "dataset_rows", prefix: prefixOf("d", datasetId), scope: `dataset_id = ${quoteLiteral(datasetId)}` },
    columns,
  );
}

export async function syncTableIndexes(db: Db, tableId: string, columns: readonly string[]): Promise<void> {
  await scheduled(
    db,
    { table: "table_rows", prefix: prefixOf("t", tableId), scope: `table_id = ${quoteLiteral(tableId)}` },
    columns,
  );
}

/** The last sync of each dataset or table, per store (its `Db`), so syncs of one target run in order. */
const pending = new WeakMap<Db, Map<string, Promise<void>>>();

/**
 * Runs `sync` after the target's previous one; resolves when it is done or after WAIT_MS, whichever is first. Never
 * rejects.
 */
function scheduled(db: Db, target: Target, columns: readonly string[]): Promise<void> {
  let queue = pending.get(db);
  if (!queue) pending.set(db, (queue = new Map()));
  const previous = queue.get(target.prefix) ?? Promise.resolve();
  const run: Promise<void> = previous
    .then(() => sync(db, target, columns))
    .catch((error: unknown) =>
      db.log(
        `could not build the row indexes of ${target.scope}; the next declaration builds them again`,
        error instanceof Error ? briefly(error) : error,
      ),
    )
    .finally(() => {
      if (queue.get(target.prefix) === run) queue.delete(target.prefix);
    });
  queue.set(target.prefix, run);
  let timer: NodeJS.Timeout | undefined;
  const waited = new Promise<void>((resolve) => {
    timer = setTimeout(resolve, WAIT_MS);
    timer.unref();
  });
  return Promise.race([run, waited]).finally(() => clearTimeout(timer));
}

/** Resolves once every index build this store started is done (tests, tools). */
export async function indexBuildsSettled(db: Db): Promise<void> {
  for (;;) {
    const running = [...(pending.get(db)?.values() ?? [])];
    if (running.length === 0) return;
    await Promise.all(running);
  }
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
    wanted.set(
      `${base}_a`,
      `create index concurrently "${base}_a" on ${on} (${terms.rank}, ${terms.num}, ${terms.text}, pos) where ${where}`,
    );
    wanted.set(
      `${base}_d`,
      `create index concurrently "${base}_d" on ${on} (${terms.descRank}, ${terms.num}, ${terms.text}, (-pos)) where ${where}`,
    );
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
