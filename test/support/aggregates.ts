import type { AggregateAnswer, AggregateQuery } from "../../src/domain/aggregate-query.js";
import { aggregateAnswer, aggregateSql, type AggregateSqlRow } from "../../src/sql/aggregate-compiler.js";
import { raw, renderNumbered, renderPositional, sql } from "../../src/sql/fragments.js";
import { postgresAggregateDialect } from "../../src/postgres/aggregate-sql.js";
import type { PostgresStorage } from "../../src/postgres/index.js";
import { postgresRowDialect } from "../../src/postgres/row-query-dialect.js";
import { sqliteAggregateDialect } from "../../src/sqlite/aggregate-sql.js";
import type { SqliteStorage } from "../../src/sqlite/index.js";
import { sqliteRowDialect } from "../../src/sqlite/row-query-dialect.js";

/**
 * Aggregates compiled to SQL and run on a store's own row tables, as the
 * stores will run them: a dataset's rows in its window, an input table's by
 * its id. (Until the stores have an aggregate method, tests reach their
 * tables through the stores' `db` escape hatch.)
 */
export type Target = { dataset: string } | { table: string };

export function sqliteAggregate(store: SqliteStorage, target: Target, query: AggregateQuery): AggregateAnswer {
  let scope;
  if ("dataset" in target) {
    const at = store.db
      .prepare<[string], { seq: number; first_position: number; next_position: number }>(
        "SELECT seq, first_position, next_position FROM datasets WHERE id = ?",
      )
      .get(target.dataset)!;
    scope = sql`dataset_seq = ${at.seq} AND position >= ${at.first_position} AND position < ${at.next_position}`;
  } else {
    scope = sql`table_id = ${target.table}`;
  }
  const table = raw("dataset" in target ? "dataset_rows" : "table_rows");
  const statement = aggregateSql(
    query,
    { table, scope, rowDialect: sqliteRowDialect("data", "0") },
    sqliteAggregateDialect("data"),
  );
  const { text, params } = renderPositional(statement);
  return aggregateAnswer(store.db.prepare(text).all(...params) as AggregateSqlRow[]);
}

/** `doc`: how rows are read, `row`, or `SANE_ROW` where one holds a `\u0000` escape (as row queries choose). */
export async function postgresAggregate(
  store: PostgresStorage,
  target: Target,
  query: AggregateQuery,
  doc = "row",
): Promise<AggregateAnswer> {
  const { t } = store.db;
  const scope =
    "dataset" in target
      ? sql`dataset_id = ${target.dataset} AND pos >= (SELECT first_pos FROM ${raw(t("datasets"))} WHERE id = ${target.dataset})
          AND pos < (SELECT next_pos FROM ${raw(t("datasets"))} WHERE id = ${target.dataset})`
      : sql`table_id = ${target.table}`;
  const table = raw(t("dataset" in target ? "dataset_rows" : "table_rows"));
  const statement = aggregateSql(
    query,
    { table, scope, rowDialect: postgresRowDialect(doc, "pos") },
    postgresAggregateDialect(doc),
  );
  const params: unknown[] = [];
  const text = renderNumbered(statement, params);
  return aggregateAnswer(await store.db.query<AggregateSqlRow>(text, params));
}

/**
 * `answer` with each number replaced by the reference's where the two differ
 * only by rounding (relative 1e-12, as ../shared/aggregates.md allows sums and
 * means to), so that a comparison shows every other difference.
 */
export function withinRounding<T>(answer: T, reference: unknown): T {
  if (typeof answer === "number" && typeof reference === "number") {
    return (
      Math.abs(answer - reference) <= 1e-12 * Math.max(Math.abs(answer), Math.abs(reference)) ? reference : answer
    ) as T;
  }
  if (Array.isArray(answer) && Array.isArray(reference))
    return answer.map((a, i) => withinRounding(a, reference[i])) as T;
  if (answer !== null && typeof answer === "object" && reference !== null && typeof reference === "object") {
    const out: Record<string, unknown> = Object.create(null);
    for (const key of Object.keys(answer))
      out[key] = withinRounding((answer as Record<string, unknown>)[key], (reference as Record<string, unknown>)[key]);
    return out as T;
  }
  return answer;
}
