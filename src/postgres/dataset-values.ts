import type { PoolClient } from "pg";
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
import type { Db } from "./db.js";

/**
 * Make a dataset's typed copy (dataset-values-sql.ts) that of its
 * declaration (`columns`, null when undeclared): nothing when its layout is
 * unchanged, else its copy is dropped and, when it has one, made again from
 * its rows (every stored row, window or staged). In the caller's transaction.
 */
export async function syncDatasetValues(
  client: PoolClient,
  t: Db["t"],
  datasetId: string,
  columns: readonly Column[] | null,
): Promise<void> {
  const layout = valueLayout(columns, (name) => !name.includes("\u0000"));
  const [stored] = (
    await client.query<{ layout: string }>(`select layout from ${t("dataset_value_layouts")} where dataset_id = $1`, [
      datasetId,
    ])
  ).rows;
  if ((layout?.text ?? null) === (stored?.layout ?? null)) return;
  await client.query(`delete from ${t("dataset_values")} where dataset_id = $1`, [datasetId]);
  if (layout === null) {
    await client.query(`delete from ${t("dataset_value_layouts")} where dataset_id = $1`, [datasetId]);
    return;
  }
  const { values, times } = slotNames(layout);
  const names = [...SLOT_NUMBERS.map((i) => `k${i}`), ...TIME_SLOT_NUMBERS.map((j) => `t${j}`)];
  await client.query(
    `insert into ${t("dataset_value_layouts")} (dataset_id, layout, ${names.join(", ")})
     values (${["$1", "$2", ...names.map((_, n) => `$${n + 3}`)].join(", ")})
     on conflict (dataset_id) do update set layout = excluded.layout, ${names.map((c) => `${c} = excluded.${c}`).join(", ")}`,
    [datasetId, layout.text, ...values, ...times],
  );
  const rows = `(select dataset_id, pos, row from ${t("dataset_rows")} where dataset_id = $1)`;
  await client.query(
    `insert into ${t("dataset_values")} (${COLUMNS}) ${copiedRows(rows, t("dataset_value_layouts"))}`,
    [datasetId],
  );
}

/** The layout of a dataset's copy in the transaction of `client`, or null when it has none. */
export async function valueLayoutOf(client: PoolClient, t: Db["t"], datasetId: string): Promise<ValueLayout | null> {
  const [found] = (
    await client.query<{ layout: string }>(`select layout from ${t("dataset_value_layouts")} where dataset_id = $1`, [
      datasetId,
    ])
  ).rows;
  return found ? parseValueLayout(found.layout) : null;
}

/**
 * Copies declared datasets lack (a schema from before the copy), made at start; instances starting together make each
 * once.
 */
export async function ensureDatasetValues(db: Db): Promise<void> {
  const missing = await db.query<{ id: string; columns: Column[] }>(
    `select id, columns from ${db.t("datasets")} d where columns_declared
       and not exists (select 1 from ${db.t("dataset_value_layouts")} l where l.dataset_id = d.id)`,
  );
  for (const d of missing) {
    await db.transaction(async (client) => {
      await client.query("select pg_advisory_xact_lock(hashtextextended($1, 0))", [`dataport:dataset-values:${d.id}`]);
      await syncDatasetValues(client, db.t, d.id, d.columns);
    });
  }
}
