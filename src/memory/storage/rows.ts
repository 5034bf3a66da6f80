import { evaluateAggregate } from "../../domain/aggregate-eval.js";
import { DONE } from "../../domain/async-iterables.js";
import type { DatasetRecord, Row } from "../../domain/model.js";
import type { RowKey } from "../../domain/row-query-model.js";
import { matchesFilters, selectColumns } from "../../domain/rows.js";
import type { RowPage, RowQuery, RowStore, RowWrites } from "../../ports/storage/rows.js";
import { appendChange } from "./changes.js";
import { queriedRows } from "./queried-rows.js";
import { cloneJson, liveCount, liveRows, type MemoryState } from "./state.js";

/**
 * The rows of upload and connection datasets. A write does its checks and
 * copies first and then changes the state in one synchronous step, so it is
 * atomic in one process; a bulk write collects its rows before that step.
 */
export function memoryRows(state: MemoryState): RowStore & RowWrites {
  /** The upload or connection dataset a bulk write may change; throws for anything else. */
  const writable = (id: string): DatasetRecord => {
    const found = state.datasets.get(id);
    if (found) return found;
    throw new Error(
      state.tables.has(id) ? `${id} is an input table: its rows change one by one` : `unknown dataset ${id}`,
    );
  };

  /**
   * `rows` becomes the dataset's row array, positioned after the array it
   * replaces (`replaced: true`: after its last row) or where that one
   * started (an append, which keeps the stored rows in front): positions
   * only grow, so a read continuing after a position neither skips nor
   * repeats a row across the write.
   */
  const putRows = (datasetId: string, rows: Row[], replaced: boolean): void => {
    const before = state.datasetRows.get(datasetId);
    const first = before
      ? replaced
        ? (state.firstPositions.get(before) ?? 0) + before.length
        : liveRows(state, before).first
      : 0;
    state.firstPositions.set(rows, first);
    state.datasetRows.set(datasetId, rows);
  };

  return {
    async aggregateDatasetRows(datasetId, query) {
      const rows = state.datasetRows.get(datasetId);
      return evaluateAggregate(rows ? liveRows(state, rows).rows : [], query);
    },
    async readDatasetRows(datasetId, query) {
      const rows = state.datasetRows.get(datasetId) ?? [];
      let page: RowPage;
      if (query.where || query.sort?.length || query.after) {
        const live = liveRows(state, rows);
        page = queriedRows(live.rows, live.first, query);
      } else {
        // Read as the trims under way leave them (`first`, `trimmed`): retention only moves the front.
        const first = () => state.firstPositions.get(rows) ?? 0;
        const trimmed = () => state.trimmedFront.get(rows) ?? 0;
        let totalRows = liveCount(state, rows);
        if (query.filters) {
          totalRows = 0;
          for (let i = trimmed(); i < rows.length; i++) if (matchesFilters(rows[i]!, query.filters)) totalRows++;
        }
        const last: { key: RowKey | null } = { key: null };
        page = { totalRows, rows: new PageOf(rows, query, first, trimmed, last), lastKey: () => last.key };
      }
      // The same synchronous step as the rows array it pages: the head of that very state.
      if (query.changesHead) page.changesHead = String(state.changeLog.last);
      return page;
    },
    async replaceDatasetRows(datasetId, data) {
      const found = state.datasets.get(datasetId);
      if (!found) throw new Error(`unknown dataset ${datasetId}`);
      const rows = data.rows.map(cloneJson);
      const columns = cloneJson(data.columns);
      putRows(datasetId, rows, true);
      state.dedupKeys.delete(datasetId);
      state.datasets.set(datasetId, {
        ...found,
        columns,
        rowCount: rows.length,
        lastRefreshedAt: data.refreshedAt,
        updatedAt: data.refreshedAt,
      });
      appendChange(state, datasetId, Date.parse(data.refreshedAt) || 0, "reset");
    },

    async writeDatasetRows(write) {
      writable(write.datasetId);
      // The memory store holds every row anyway: collect them, then swap in one step.
      const incoming: Row[] = [];
      for await (const row of write.rows) incoming.push(cloneJson(row));
      const columns = cloneJson(write.columns());
      // Checked again: the dataset may have gone while the rows came in.
      const found = writable(write.datasetId);
      // The rows stored NOW, not when the write began: writes to one dataset land one after the other.
      const stored = state.datasetRows.get(write.datasetId);
      const rows = write.mode === "replace" || !stored ? incoming : [...liveRows(state, stored).rows, ...incoming];
      // A new array, never a change to the old one: a read under way keeps the rows it started on.
      putRows(write.datasetId, rows, write.mode === "replace");
      if (write.mode === "replace") state.dedupKeys.delete(write.datasetId);
      state.datasets.set(write.datasetId, { ...found, columns, rowCount: rows.length, updatedAt: write.updatedAt });
      // The write's changes land in the same step: a replace starts followers over, an append adds its rows.
      const storedAt = Date.parse(write.updatedAt) || 0;
      if (write.mode === "replace") appendChange(state, write.datasetId, storedAt, "reset");
      else for (const row of incoming) appendChange(state, write.datasetId, storedAt, "insert", null, row);
      return { rowCount: rows.length };
    },
  };
}

/**
 * The page as a lazy sequence over the live row array. Positions are
 * absolute (index + the array's first position), so retention trimming the front
 * while a read is under way neither repeats nor skips a retained row.
 *
 * A hand-written iterator, not an async generator (see
 * `domain/async-iterables.ts`), that behaves as the generator did: nothing
 * runs until the first `next()`, each row is found when it is asked for,
 * `last` is the key of the row last handed over, and once done (ended,
 * returned or thrown) it stays done; iterating it again goes on where it is.
 */
class PageOf implements AsyncIterableIterator<Row> {
  /** The position of the row last handed over, or null before the first. */
  private position: number | null = null;
  private skipped = 0;
  private returned = 0;
  private done = false;

  constructor(
    private readonly rows: readonly Row[],
    private readonly query: RowQuery,
    private readonly first: () => number,
    /** Rows at the front of `rows` retention has trimmed, read afresh at each step. */
    private readonly trimmed: () => number,
    private readonly last: { key: RowKey | null },
  ) {}

  [Symbol.asyncIterator](): this {
    return this;
  }

  next(): Promise<IteratorResult<Row, undefined>> {
    if (this.done) return Promise.resolve(DONE);
    try {
      const row = this.step();
      if (row === null) {
        this.done = true;
        return Promise.resolve(DONE);
      }
      return Promise.resolve({ done: false, value: row });
    } catch (error) {
      this.done = true;
      return Promise.reject(error);
    }
  }

  return(): Promise<IteratorResult<Row, undefined>> {
    this.done = true;
    return Promise.resolve(DONE);
  }

  /** The next row of the page (a fresh copy), or null at its end. */
  private step(): Row | null {
    const { rows, query, first, trimmed } = this;
    const limit = query.limit ?? Number.POSITIVE_INFINITY;
    if (this.returned >= limit) return null;
    let position =
      this.position === null ? first() + trimmed() + (query.filters ? 0 : query.offset) : this.position + 1;
    for (; ; position++) {
      const i = Math.max(trimmed(), position - first());
      position = i + first();
      if (i >= rows.length) return null;
      const row = rows[i]!;
      if (query.filters) {
        if (!matchesFilters(row, query.filters)) continue;
        if (this.skipped < query.offset) {
          this.skipped++;
          continue;
        }
      }
      this.position = position;
      this.returned++;
      this.last.key = { values: [], position };
      return selectColumns(row, query.columns);
    }
  }
}
