import type Database from "better-sqlite3";
import type { AggregateAnswer, AggregateQuery } from "../domain/aggregate-query.js";
import { aggregateAnswer, aggregateSql, type AggregateSqlRow } from "../domain/aggregate-sql.js";
import { raw, renderPositional, type Sql, sql } from "../domain/row-query-sql.js";
import { sqliteAggregateDialect } from "./aggregate-sql.js";
import { sqliteRowDialect } from "./row-query.js";

/**
 * Aggregates on SQLite: the one statement of `aggregate-sql.ts` over a
 * dataset's window of `dataset_rows` or an input table's `table_rows`, run
 * in a read transaction with the window it reads (one snapshot).
 *
 * It runs on the store's connection, on the event loop: reader threads
 * (reads that scan, ended at the call deadline) are to carry it.
 */
export function sqliteAggregates(db: Database.Database) {
  const window = db.prepare<[string], { seq: number; first_position: number; next_position: number }>(
    "SELECT seq, first_position, next_position FROM datasets WHERE id = ?",
  );
  const run = (table: string, scope: Sql, query: AggregateQuery): AggregateAnswer => {
    const statement = aggregateSql(query, { table: raw(table), scope, rowDialect: ROW_DIALECT }, AGGREGATE_DIALECT);
    const { text, params } = renderPositional(statement);
    return aggregateAnswer(db.prepare(text).all(...params) as AggregateSqlRow[]);
  };
  const dataset = db.transaction((datasetId: string, query: AggregateQuery): AggregateAnswer => {
    const at = window.get(datasetId);
    // An unknown dataset holds no row: the answer of an empty one.
    const scope = at
      ? sql`dataset_seq = ${at.seq} AND position >= ${at.first_position} AND position < ${at.next_position}`
      : raw("0");
    return run("dataset_rows", scope, query);
  });
  const table = db.transaction((tableId: string, query: AggregateQuery) => run("table_rows", sql`table_id = ${tableId}`, query));
  return {
    aggregateDatasetRows: (datasetId: string, query: AggregateQuery) => dataset(datasetId, query),
    aggregateTableRows: (tableId: string, query: AggregateQuery) => table(tableId, query),
  };
}

const ROW_DIALECT = sqliteRowDialect("data", "0");
const AGGREGATE_DIALECT = sqliteAggregateDialect("data");
