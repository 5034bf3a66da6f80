import { mapped } from "../../domain/async-iterables.js";
import type { Row } from "../../domain/model.js";
import type { RowKey } from "../../domain/row-query-model.js";
import { compareKeys, keyOf, matchesWhere } from "../../domain/row-query-order.js";
import { matchesFilters, selectColumns } from "../../domain/rows.js";
import type { RowPage, RowQuery } from "../../ports/storage/rows.js";
import type { TableRowsPage, TableRowsQuery } from "../../ports/storage/tables.js";
import { cloneJson, type TableRowEntry } from "./state.js";

/**
 * Reads with `where`, `sort` or `after`, evaluated over the rows the
 * memory store holds: the reference the SQL stores are held to. The page is
 * chosen when the read is made (later writes are not seen); positions are
 * absolute (`first` is the position of `rows[0]`).
 */
export function queriedRows(rows: readonly Row[], first: number, query: RowQuery): RowPage {
  const { matching, page } = select(rows, (i) => first + i, query, query.limit);
  let last: RowKey | null = null;
  // A plain iterator, not an async generator (see `domain/async-iterables.ts`): each row is copied
  // when it is asked for, and `last` is the key of the row last handed over.
  const selected = mapped(page, (entry) => {
    last = entry.key;
    return selectColumns(entry.row, query.columns);
  });
  return { totalRows: matching, rows: selected, lastKey: () => last };
}

/** The same for an input table, whose rows keep the positions they were given at insert. */
export function queriedTableRows(entries: readonly TableRowEntry[], query: TableRowsQuery): TableRowsPage {
  const rows = entries.map((e) => e.row);
  const { matching, page } = select(rows, (i) => entries[i]!.position, query, query.limit);
  return { totalRows: matching, rows: page.map((e) => cloneJson(e.row)), lastKey: page.at(-1)?.key ?? null };
}

interface Entry {
  row: Row;
  key: RowKey;
}

function select(
  rows: readonly Row[],
  positionOf: (index: number) => number,
  query: Pick<RowQuery, "where" | "sort" | "after" | "offset"> & { filters?: Record<string, unknown> | null },
  limit: number | null,
): { matching: number; page: Entry[] } {
  const sort = query.sort ?? [];
  const entries: Entry[] = [];
  rows.forEach((row, i) => {
    if (query.filters && !matchesFilters(row, query.filters)) return;
    if (query.where && !matchesWhere(row, query.where)) return;
    entries.push({ row, key: keyOf(row, positionOf(i), sort) });
  });
  if (sort.length > 0) entries.sort((a, b) => compareKeys(a.key, b.key, sort));
  const after = query.after;
  const start = after ? entries.findIndex((e) => compareKeys(e.key, after, sort) > 0) : 0;
  const from = (start === -1 ? entries.length : start) + Math.max(0, query.offset);
  const page = entries.slice(from, limit === null ? undefined : from + Math.max(0, limit));
  return { matching: entries.length, page };
}
