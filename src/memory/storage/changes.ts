import { changeFromRecord, type ChangeOp } from "../../domain/changes.js";
import type { Row } from "../../domain/model.js";
import type { ChangeFeedReads, ChangeRetention, StoredChange, WatchChanges } from "../../ports/storage/changes.js";
import { type ChangeEntry, cloneJson, type MemoryState } from "./state.js";

/**
 * Append a change of `feedId` at the next position (the caller's write and
 * this land in one step), as `ChangeRecord`'s columns: `rowId` is a trim's
 * `upTo`, `row` the stored row itself (never changed in place after).
 */
export function appendChange(
  state: MemoryState,
  feedId: string,
  storedAt: number,
  op: ChangeOp,
  rowId: string | null = null,
  row: Row | null = null,
): void {
  const log = state.changeLog;
  let entries = log.feeds.get(feedId);
  if (!entries) log.feeds.set(feedId, (entries = []));
  entries.push({ position: ++log.last, op, rowId, row, storedAt });
  if (log.listeners.size > 0) for (const listener of log.listeners) listener(feedId);
}

/** A table's or dataset's changes go with it. */
export function forgetFeed(state: MemoryState, feedId: string): void {
  state.changeLog.feeds.delete(feedId);
}

/** Reads of every feed of the log (each area serves its own ids through it). */
export function memoryChangeFeeds(state: MemoryState): ChangeFeedReads & ChangeRetention & { watch: WatchChanges } {
  return {
    // The store's own signal: told in the step that appends the change.
    watch(onChange) {
      const { listeners } = state.changeLog;
      listeners.add(onChange);
      return () => listeners.delete(onChange);
    },
    async read(feedId, { after, limit }) {
      const log = state.changeLog;
      const trimmed = log.trimmedThrough.get(feedId) ?? 0;
      if (after !== null && Number(after) < trimmed) return { changes: [], hasMore: false, expired: true };
      const from = after === null ? trimmed : Number(after);
      const entries = log.feeds.get(feedId) ?? [];
      const start = firstIndexAfter(entries, from);
      const page = entries.slice(start, start + limit);
      const changes = page.map((e): StoredChange => ({
        position: String(e.position),
        change: changeFromRecord({
          op: e.op,
          rowId: e.rowId,
          row: e.row === null ? null : cloneJson(e.row),
          storedAt: e.storedAt,
        }),
      }));
      return { changes, hasMore: start + limit < entries.length, expired: false };
    },
    async head() {
      return String(state.changeLog.last);
    },
    async trimChanges(storedBefore) {
      const log = state.changeLog;
      for (const [feedId, entries] of log.feeds) {
        let n = 0;
        while (n < entries.length && entries[n]!.storedAt < storedBefore) n++;
        if (n === 0) continue;
        log.trimmedThrough.set(feedId, entries[n - 1]!.position);
        entries.splice(0, n);
      }
    },
  };
}

/** Index of the first entry whose position is after `after` (binary search; positions increase strictly). */
function firstIndexAfter(entries: readonly ChangeEntry[], after: number): number {
  let lo = 0;
  let hi = entries.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (entries[mid]!.position <= after) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}
