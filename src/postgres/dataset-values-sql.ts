import { SLOT_NUMBERS, TIME_SLOT_NUMBERS } from "../sql/dataset-values.js";
import { join, raw, renderNumbered, type Sql, sql } from "../sql/fragments.js";
import { bucketSql, bucketStages } from "../sql/time-bucket-compiler.js";
import { postgresAggregateDialect } from "./aggregate-sql.js";

/**
 * The typed copy of declared columns on PostgreSQL (see `src/sql/dataset-values.ts`):
 * `dataset_values`, keyed by (dataset_id, pos) like `dataset_rows`, one row
 * per row of a dataset with a layout in `dataset_value_layouts` (its slots'
 * keys). A value `v<i>` is the row's `row -> key` (`json`: the value's own
 * text, objects with their key order and spacing; SQL NULL when absent);
 * `h<j>`, `w<j>`: the hour and week buckets of a date or datetime column's
 * string, computed by the aggregates' bucket SQL (`time-bucket-compiler.ts`).
 *
 * Statement triggers on `dataset_rows` keep it from their transition tables
 * (one set-based statement per write statement, whatever updates or deletes
 * the rows: staging and publishing moves, retention trims, deletes); every
 * INSERT into `dataset_rows` hands its rows of datasets with a layout to
 * `dataset_values_insert` itself (`copyInsertedSql`: bulk writes, refreshes,
 * webhook ingest). A layout changes with a declaration only
 * (`syncDatasetValues`, in putDataset's transaction and the seed's).
 */

const VALUE_COLUMNS = [
  ...SLOT_NUMBERS.map((i) => `v${i}`),
  ...["h", "w"].flatMap((c) => TIME_SLOT_NUMBERS.map((j) => `${c}${j}`)),
];
export const COLUMNS = ["dataset_id", "pos", ...VALUE_COLUMNS].join(", ");

/** JSON text PostgreSQL can take apart (no `\u0000` or surrogate escape, as row-query-dialect.ts's UNPARSABLE). */
const SANE_STRING = String.raw`!~ '\\u(0000|[dD][89abcdefABCDEF])'`;

/**
 * The copy's rows of the rows `n` (a table or transition table with dataset_id, pos, row), for datasets with a layout.
 */
export function copiedRows(rows: string, layouts: string): string {
  const dialect = postgresAggregateDialect("row");
  const inner = [
    "n.dataset_id",
    "n.pos",
    ...SLOT_NUMBERS.map((i) => `n.row -> s.k${i} AS v${i}`),
    ...TIME_SLOT_NUMBERS.map((j) => `(CASE WHEN s.t${j} IS NOT NULL THEN n.row -> s.t${j} END) AS tv${j}`),
  ];
  // A row PostgreSQL cannot take apart is left out: a window holding one is aggregated from its JSON (SANE_ROW).
  const from = `FROM ${rows} n JOIN ${layouts} s ON s.dataset_id = n.dataset_id WHERE n.row::text ${SANE_STRING}`;
  let staged: Sql = raw(`SELECT ${inner.join(", ")} ${from}`);
  const stages: Array<Array<[string, Sql]>> = [];
  for (const j of TIME_SLOT_NUMBERS) {
    const value = `tv${j}`;
    const text = raw(`(CASE WHEN json_typeof(${value}) = 'string' THEN ${value} #>> '{}' END)`);
    bucketStages(`b${j}_`, text, dialect).forEach((stage, n) => (stages[n] = [...(stages[n] ?? []), ...stage]));
  }
  stages.forEach((stage, n) => {
    const items = join(
      stage.map(([name, expression]) => sql`${expression} AS ${raw(name)}`),
      ", ",
    );
    staged = sql`SELECT *, ${items} FROM (${staged}) AS s${raw(String(n))} OFFSET 0`;
  });
  // In the order of COLUMNS: the hours, then the weeks.
  const buckets = (["hour", "week"] as const).flatMap((unit) =>
    TIME_SLOT_NUMBERS.map((j) => sql`${bucketSql(unit, `b${j}_`, dialect)} AS ${raw(`${unit[0]}${j}`)}`),
  );
  const params: unknown[] = [];
  const text = renderNumbered(
    sql`SELECT dataset_id, pos, ${raw(SLOT_NUMBERS.map((i) => `v${i}`).join(", "))}, ${join(buckets, ", ")} FROM (${staged}) AS c`,
    params,
  );
  if (params.length > 0) throw new Error("the typed copy's SQL has parameters");
  return text;
}

const UPDATES = VALUE_COLUMNS.map((c) => `${c} = excluded.${c}`).join(", ");

/**
 * Migration 15 (`{s}` the schema): the insert trigger captured every inserted row in a transition table, of a dataset
 * with a layout or not (most webhook datasets have none); every INSERT into `dataset_rows` now hands its rows of
 * datasets with a layout to `dataset_values_insert` itself (`copyInsertedSql`).
 */
export function datasetValuesInsertSql(): string {
  const rows = "(select * from unnest(p_ids, p_positions, p_rows) as u(dataset_id, pos, row))";
  return `
create function {s}.dataset_values_insert(p_ids text[], p_positions bigint[], p_rows json[]) returns bigint
language plpgsql volatile as $fn$
begin
  insert into {s}.dataset_values (${COLUMNS})
    ${copiedRows(rows, "{s}.dataset_value_layouts")}
    on conflict (dataset_id, pos) do update set ${UPDATES};
  return cardinality(p_ids);
end $fn$;
drop trigger dataset_values_after_insert on {s}.dataset_rows;
`;
}

/**
 * A query copying the rows an INSERT into `dataset_rows` writes, `rows` a relation of them (dataset_id, pos, row),
 * when some are of a dataset with a layout (one row, `copied`; none else): the copy's SQL is planned and started in
 * `dataset_values_insert` only then.
 */
export function copyInsertedSql(rows: string, t: (table: string) => string): string {
  return `select ${t("dataset_values_insert")}(array_agg(c.dataset_id), array_agg(c.pos), array_agg(c.row)) as copied
    from ${rows} c where c.dataset_id in (select l.dataset_id from ${t("dataset_value_layouts")} l) having count(*) > 0`;
}

/**
 * The statement inserting the rows of a JSON array (`$3`, as text) into dataset `$1` at positions `$2`, `$2 + 1`…,
 * their typed values copied when the dataset has a layout (`copyInsertedSql`).
 */
export function insertJsonRowsSql(t: (table: string) => string): string {
  return `with rows as (
       select $1::text as dataset_id, $2::bigint + ord - 1 as pos, value as row
         from json_array_elements($3::json) with ordinality as e(value, ord)
     ), inserted as (
       insert into ${t("dataset_rows")} (dataset_id, pos, row) select dataset_id, pos, row from rows
     ) ${copyInsertedSql("rows", t)}`;
}

/** The schema (a migration step, `{s}` the schema): tables, the trigger function and its triggers. */
export function datasetValuesSql(): string {
  const updates = UPDATES;
  return `
create table {s}.dataset_value_layouts (
  dataset_id text primary key, layout text not null,
  ${SLOT_NUMBERS.map((i) => `k${i} text`).join(", ")}, ${TIME_SLOT_NUMBERS.map((j) => `t${j} text`).join(", ")}
);
create table {s}.dataset_values (
  dataset_id text not null, pos bigint not null,
  ${SLOT_NUMBERS.map((i) => `v${i} json`).join(", ")},
  ${TIME_SLOT_NUMBERS.map((j) => `h${j} text, w${j} text`).join(", ")},
  primary key (dataset_id, pos)
);
create function {s}.dataset_values_copy() returns trigger language plpgsql as $fn$
begin
  if TG_OP in ('DELETE', 'UPDATE') then
    delete from {s}.dataset_values v using old_rows o
      where v.dataset_id = o.dataset_id and v.pos = o.pos
        and o.dataset_id in (select dataset_id from {s}.dataset_value_layouts);
  end if;
  if TG_OP in ('INSERT', 'UPDATE') then
    insert into {s}.dataset_values (${COLUMNS})
      ${copiedRows("new_rows", "{s}.dataset_value_layouts")}
      on conflict (dataset_id, pos) do update set ${updates};
  end if;
  return null;
end $fn$;
create trigger dataset_values_after_insert after insert on {s}.dataset_rows
  referencing new table as new_rows for each statement execute function {s}.dataset_values_copy();
create trigger dataset_values_after_update after update on {s}.dataset_rows
  referencing old table as old_rows new table as new_rows for each statement execute function {s}.dataset_values_copy();
create trigger dataset_values_after_delete after delete on {s}.dataset_rows
  referencing old table as old_rows for each statement execute function {s}.dataset_values_copy();
create function {s}.dataset_value_layouts_drop() returns trigger language plpgsql as $fn$
begin
  delete from {s}.dataset_value_layouts l using old_datasets d where l.dataset_id = d.id;
  return null;
end $fn$;
create trigger dataset_value_layouts_after_dataset_delete after delete on {s}.datasets
  referencing old table as old_datasets for each statement execute function {s}.dataset_value_layouts_drop();
`;
}
