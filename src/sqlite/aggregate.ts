import type { AggregateAnswer, AggregateQuery } from "../domain/aggregate-query.js";
import {
  type AggregateDialect,
  aggregateAnswer,
  aggregateSql,
  type AggregateSqlRow,
  readColumns,
} from "../sql/aggregate-compiler.js";
import type { SqlDialect } from "../sql/row-compiler.js";
import { slotsOf } from "../sql/dataset-values.js";
import { raw, renderPositional, type Sql, sql } from "../sql/fragments.js";
import { sqliteAggregateDialect, sqliteValuesAggregateDialect, sqliteValuesRowDialect } from "./aggregate-sql.js";
import { valueLayoutOf } from "./dataset-values.js";
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
  const rowsOf = async (
    target: { table: Sql; scope: Sql; check?: Sql; rowDialect: SqlDialect },
    query: AggregateQuery,
    dialect: AggregateDialect,
  ) => {
    const scope = sql`${raw(DEADLINE_CHECK)} AND ${target.scope}`;
    const { text, params } = renderPositional(aggregateSql(query, { ...target, scope }, dialect));
    return longRead<AggregateSqlRow[]>(handle, text, params, "all");
  };
  const run = async (table: string, scope: Sql, query: AggregateQuery): Promise<AggregateAnswer> =>
    aggregateAnswer(await rowsOf({ table: raw(table), scope, rowDialect: ROW_DIALECT }, query, AGGREGATE_DIALECT));
  const window = (column: string, datasetId: string) =>
    sql`(SELECT ${raw(column)} FROM datasets WHERE id = ${datasetId})`;
  const layoutOf = valueLayoutOf(handle.db);
  /**
   * Over the typed copy (dataset-values.ts) when it holds every column the query reads (keys, metrics, `where` and
   * `filters`); else null.
   */
  const fromValues = async (datasetId: string, query: AggregateQuery): Promise<AggregateAnswer | null> => {
    const layout = layoutOf(datasetId);
    const slots = slotsOf(layout, readColumns(query));
    if (layout === null || slots === null) return null;
    const key = (column: string) =>
      sql`(SELECT seq * ${raw(String(2n ** 43n))} + ${raw(column)} FROM datasets WHERE id = ${datasetId})`;
    const scope = sql`row_key >= ${key("first_position")} AND row_key < ${key("next_position")}`;
    // The layout read here may have changed before the statement's snapshot (a declaration committed between): then
    // JSON.
    const check = sql`((SELECT layout FROM dataset_value_layouts WHERE dataset_seq = ${window("seq", datasetId)}) = ${layout.text})`;
    const rows = await rowsOf(
      { table: raw("dataset_values"), scope, check, rowDialect: sqliteValuesRowDialect(slots) },
      query,
      sqliteValuesAggregateDialect(slots),
    );
    return Number(rows.find((r) => Number(r.part) === 1)?.checked) === 1 ? aggregateAnswer(rows) : null;
  };
  return {
    async aggregateDatasetRows(datasetId: string, query: AggregateQuery): Promise<AggregateAnswer> {
      const typed = await fromValues(datasetId, query);
      if (typed) return typed;
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
