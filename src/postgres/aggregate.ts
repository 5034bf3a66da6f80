import type { AggregateAnswer, AggregateQuery } from "../domain/aggregate-query.js";
import { aggregateAnswer, aggregateSql, type AggregateSqlRow, readColumns } from "../sql/aggregate-compiler.js";
import { slotsOf } from "../sql/dataset-values.js";
import { raw, renderNumbered, type Sql, sql } from "../sql/fragments.js";
import { postgresAggregateDialect } from "./aggregate-sql.js";
import { valueLayoutOf } from "./dataset-values.js";
import { begun, bounded, type Db } from "./db.js";
import { postgresRowDialect, SANE_ROW, UNPARSABLE } from "./row-query-dialect.js";

/**
 * Aggregates on PostgreSQL: the one statement of `aggregate-sql.ts` over a
 * dataset's window or an input table's rows, in one read-only REPEATABLE
 * READ transaction with the check that chooses how rows are taken apart
 * (`row`, or `SANE_ROW` when one holds a `\u0000` escape): one snapshot.
 * The store call's deadline bounds it (503 `storage_unavailable`), and the
 * transaction's `statement_timeout` (the same `timeoutMs`; 0: none) makes
 * PostgreSQL cancel a statement cut off by it rather than finish it unread.
 */
export function postgresAggregates(db: Db, timeoutMs: number) {
  const { t } = db;
  const bound =
    timeoutMs > 0 && Number.isFinite(timeoutMs) ? `; set local statement_timeout = ${Math.ceil(timeoutMs)}` : "";
  const begin = `${bounded("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", { idleMs: db.bounds.idleMs })}${bound}`;
  const run = async (
    target: {
      table: string;
      scope: Sql;
      unparsable: string;
      params: unknown[];
      values?: { datasetId: string; scope: Sql };
    },
    query: AggregateQuery,
  ) => {
    const lease = await begun(db.pool, begin);
    try {
      const [found] = (await lease.client.query<{ unparsable: boolean }>(target.unparsable, target.params)).rows;
      const doc = found?.unparsable ? SANE_ROW : "row";
      // The typed copy of declared columns (dataset-values-sql.ts) when it holds every column read (keys, metrics,
      // `where` and `filters`): a column of `where` is its slot's `json`, what `row -> name` is.
      const layout =
        target.values && !found?.unparsable ? await valueLayoutOf(lease.client, t, target.values.datasetId) : null;
      const slots = slotsOf(layout, readColumns(query));
      const statement = aggregateSql(
        query,
        slots && target.values
          ? {
              table: raw(t("dataset_values")),
              scope: target.values.scope,
              rowDialect: postgresRowDialect(doc, "pos", { member: (name) => raw(`v${slots.get(name)!.slot}`) }),
            }
          : { table: raw(t(target.table)), scope: target.scope, rowDialect: postgresRowDialect(doc, "pos") },
        postgresAggregateDialect(doc, slots),
      );
      const params: unknown[] = [];
      const text = renderNumbered(statement, params);
      const rows = (await lease.client.query<AggregateSqlRow>(text, params)).rows;
      await lease.client.query("COMMIT");
      return aggregateAnswer(rows);
    } catch (error) {
      await lease.client.query("ROLLBACK").catch(() => lease.spoil());
      throw error;
    } finally {
      lease.release();
    }
  };
  const datasets = raw(t("datasets"));
  return {
    aggregateDatasetRows(datasetId: string, query: AggregateQuery): Promise<AggregateAnswer> {
      const scope = sql`dataset_id = ${datasetId}
        AND pos >= (SELECT first_pos FROM ${datasets} WHERE id = ${datasetId})
        AND pos < (SELECT next_pos FROM ${datasets} WHERE id = ${datasetId})`;
      const unparsable = `select exists (select 1 from ${t("dataset_rows")} r join ${t("datasets")} d on d.id = r.dataset_id
        where d.id = $1 and ${UNPARSABLE} and r.pos >= d.first_pos and r.pos < d.next_pos) as unparsable`;
      return run(
        { table: "dataset_rows", scope, unparsable, params: [datasetId], values: { datasetId, scope } },
        query,
      );
    },
    aggregateTableRows(tableId: string, query: AggregateQuery): Promise<AggregateAnswer> {
      const unparsable = `select exists (select 1 from ${t("table_rows")} where table_id = $1 and ${UNPARSABLE}) as unparsable`;
      return run({ table: "table_rows", scope: sql`table_id = ${tableId}`, unparsable, params: [tableId] }, query);
    },
  };
}
