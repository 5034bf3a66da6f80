import type { AggregateAnswer, AggregateQuery } from "../domain/aggregate-query.js";
import { aggregateAnswer, aggregateSql, type AggregateSqlRow } from "../sql/aggregate-compiler.js";
import { raw, renderPositional, type Sql, sql } from "../sql/fragments.js";
import { sqliteAggregateDialect } from "./aggregate-sql.js";
import type { SqliteHandle } from "./db.js";
import { longRead } from "./long-reads.js";
import { sqliteRowDialect } from "./row-query-dialect.js";
import { DEADLINE_CHECK } from "./statement-deadline.js";

/**
 * Aggregates on SQLite: the one statement of `aggregate-sql.ts` over a
 * dataset's window of `dataset_rows` (looked up by the statement itself, so
 * window and rows are one snapshot) or an input table's `table_rows`.
 *
 * An aggregate scans: it runs on a reader thread (never holding up the
 * event loop), ended at `callTimeoutMs` (503 `storage_unavailable`, never a
 * part of an answer); without reader threads (`:memory:`,
 * `readerThreads: 0`) on the loop, ended at the same deadline. Its scan
 * calls `DEADLINE_CHECK` per row, so the deadline stops it where it is.
 */
export function sqliteAggregates(handle: SqliteHandle) {
  const run = async (table: string, scope: Sql, query: AggregateQuery): Promise<AggregateAnswer> => {
    const target = { table: raw(table), scope: sql`${raw(DEADLINE_CHECK)} AND ${scope}`, rowDialect: ROW_DIALECT };
    const { text, params } = renderPositional(aggregateSql(query, target, AGGREGATE_DIALECT));
    return aggregateAnswer(await longRead<AggregateSqlRow[]>(handle, text, params, "all"));
  };
  const window = (column: string, datasetId: string) => sql`(SELECT ${raw(column)} FROM datasets WHERE id = ${datasetId})`;
  return {
    aggregateDatasetRows(datasetId: string, query: AggregateQuery): Promise<AggregateAnswer> {
      // An unknown dataset has no window (NULL): no row, the answer of an empty one.
      const scope = sql`dataset_seq = ${window("seq", datasetId)}
        AND position >= ${window("first_position", datasetId)} AND position < ${window("next_position", datasetId)}`;
      return run("dataset_rows", scope, query);
    },
    aggregateTableRows(tableId: string, query: AggregateQuery): Promise<AggregateAnswer> {
      return run("table_rows", sql`table_id = ${tableId}`, query);
    },
  };
}

const ROW_DIALECT = sqliteRowDialect("data", "0");
const AGGREGATE_DIALECT = sqliteAggregateDialect("data");
