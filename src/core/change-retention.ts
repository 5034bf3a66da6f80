import type { Clock } from "../base/clock.js";
import type { Storage } from "../ports/storage.js";

/** How often (by the clock) an instance trims the change log at most. */
const TRIM_EVERY_MS = 60 * 60 * 1000;

/**
 * Retention of the change feeds (`changeRetentionDays`): the requests that
 * read or write the log call `due()`; once an hour at most (by the clock)
 * it trims the changes stored before the retention, in the background
 * (a failure is logged, never the request's). Writes keep the log's size
 * bounded by the retention even when nobody reads it.
 */
export interface ChangeRetention {
  due(): void;
}

export function createChangeRetention(
  storage: Pick<Storage, "tables" | "rows">,
  retentionDays: number,
  clock: Clock,
  log: (message: string, error: unknown) => void,
): ChangeRetention {
  const keepMs = Math.max(0, retentionDays) * 24 * 60 * 60 * 1000;
  let next = Number.NEGATIVE_INFINITY;
  return {
    due() {
      const now = clock.now();
      if (now < next) return;
      next = now + TRIM_EVERY_MS;
      const before = now - keepMs;
      void Promise.all([storage.tables.trimTableChanges(before), storage.rows.trimDatasetChanges(before)]).catch(
        (error: unknown) => log("the change log could not be trimmed; it is tried again within an hour", error),
      );
    },
  };
}
