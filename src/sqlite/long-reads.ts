import { prepared, type SqliteHandle } from "./db.js";
import { readTimedOut } from "./faults.js";

/**
 * A read-only statement that may visit many rows (an aggregate, a count),
 * run where it does not hold the event loop: on a reader thread when the
 * store has them, else (`:memory:`, `readerThreads: 0`) on the loop. Either
 * way it is ended at `callTimeoutMs` with 503 `storage_unavailable`, and a
 * fault of the file is the 503 it means (see faults.ts). Its parameters are
 * positional; its `WHERE` should call `DEADLINE_CHECK` first (see
 * statement-deadline.ts), or only a thread's replacement can end it.
 * `mode`: all rows, or the first (undefined: none).
 */
export async function longRead<R>(
  handle: SqliteHandle,
  text: string,
  params: unknown[],
  mode: "all" | "get",
): Promise<R> {
  const { readers, faults } = handle;
  if (readers !== null) {
    return readers.call({ kind: "statement", text, params, mode }).then(
      (value) => value as R,
      (error: unknown) => Promise.reject(faults.reported(error)),
    );
  }
  const statement = prepared(handle.db, text);
  const run = () => (mode === "all" ? statement.all(...params) : statement.get(...params)) as R;
  try {
    const until = performance.now() + handle.callTimeoutMs;
    return handle.deadline.within(until, () => readTimedOut(handle.callTimeoutMs), run);
  } catch (error) {
    throw faults.reported(error);
  }
}
