import { ApiError, storageUnavailable } from "../base/api-error.js";
import { callTimedOut } from "../sql/store-calls.js";

/*
 * What the store answers when SQLite cannot do what it is asked: never a
 * 500, never a blocked event loop.
 *
 * - Another process holds the write lock (SQLITE_BUSY): the writer
 *   connection does not wait (busy_timeout 0, see db.ts); the call is tried
 *   again with a backoff, between other requests, for up to
 *   `busyTimeoutMs`, then fails with 503 `storage_unavailable`.
 * - The file cannot be written or read (disk full, read-only, I/O errors,
 *   a file gone or damaged) or the store is closed: 503
 *   `storage_unavailable` with `Retry-After` at once, and until a write
 *   succeeds again readiness (`ping`) reports the store unwritable.
 */

/** SQLite result codes (primary, then extended) meaning the file cannot be written or read now. */
const UNAVAILABLE = /^SQLITE_(FULL|READONLY|CANTOPEN|IOERR|CORRUPT|NOTADB|PERM|NOLFS|PROTOCOL)(_|$)/;
/** Backoff between attempts of a call that found the write lock taken, in ms (the last one repeats). */
const BACKOFF_MS = [1, 2, 5, 10, 20, 50, 100];
/** Seconds a client is asked to wait: a lock goes in moments; a full disk or a read-only file takes an operator. */
const RETRY_BUSY = 1;
const RETRY_UNAVAILABLE = 10;

/** The lock error a caller saw before asking `whenFree` to wait. */
const LOCKED = Object.assign(new Error("database is locked"), { code: "SQLITE_BUSY" });

/** Another connection holds the write lock (or a table this one needs). */
export function isBusy(error: unknown): boolean {
  const code = codeOf(error);
  return code !== null && (code.startsWith("SQLITE_BUSY") || code.startsWith("SQLITE_LOCKED"));
}

/** The file cannot be written or read now: a retry later (after an operator's fix) may succeed. */
export function isUnavailable(error: unknown): boolean {
  const code = codeOf(error);
  return code !== null && UNAVAILABLE.test(code);
}

/**
 * The error of a call on a closed connection: better-sqlite3's, which the other drivers throw too (driver-shared.ts).
 */
function isClosed(error: unknown): boolean {
  return error instanceof TypeError && /database connection is not open/.test(error.message);
}

function codeOf(error: unknown): string | null {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === "string" ? code : null;
}

/** A read that ran past its deadline and was ended. */
export function readTimedOut(timeoutMs: number): ApiError {
  return callTimedOut("the database", timeoutMs);
}

function lockTimedOut(timeoutMs: number, cause: unknown): ApiError {
  const message = `the database stayed locked by another writer for ${timeoutMs} ms; retry later`;
  return storageUnavailable(message, { retryAfterSeconds: RETRY_BUSY, cause });
}

function unavailable(cause: unknown): ApiError {
  return storageUnavailable(undefined, { retryAfterSeconds: RETRY_UNAVAILABLE, cause });
}

export interface StoreFaults {
  /** `error` as the store reports it: a SQLite fault becomes the 503 it means (and is noted); else as it is. */
  reported(error: unknown): unknown;
  /**
   * `attempt()`, tried again with a backoff while it throws SQLITE_BUSY, for
   * up to `busyTimeoutMs` (then 503). `attempt` must have done nothing when
   * it throws (one transaction, rolled back). `busy`: it has just thrown
   * SQLITE_BUSY, so the first try comes after a backoff.
   */
  whenFree<T>(attempt: () => T | Promise<T>, busy?: boolean): Promise<T>;
  /**
   * Whether a write failed because the file could not take it (or the lock
   * stayed taken past `busyTimeoutMs`) and none has succeeded since `cleared()`.
   */
  readonly unwritable: boolean;
  /** A write succeeded: the store can write again. */
  cleared(): void;
}

export interface StoreFaultsOptions {
  busyTimeoutMs: number;
  log: (message: string, error: unknown) => void;
}

export function storeFaults(options: StoreFaultsOptions): StoreFaults {
  let fault: unknown = null;
  const noted = (error: ApiError, cause: unknown): ApiError => {
    if (fault === null) {
      const what = isBusy(cause)
        ? `another process held the write lock for ${options.busyTimeoutMs} ms`
        : "the file failed";
      options.log(
        `SQLite cannot write (${what}); answering 503 storage_unavailable until a write succeeds`,
        brief(cause),
      );
    }
    fault = cause;
    return error;
  };
  const reported = (error: unknown): unknown => {
    if (error instanceof ApiError) return error;
    if (isBusy(error)) return noted(lockTimedOut(options.busyTimeoutMs, error), error);
    if (isUnavailable(error)) return noted(unavailable(error), error);
    if (isClosed(error)) return unavailable(error);
    return error;
  };
  return {
    reported,
    async whenFree(attempt, busy = false) {
      let waitingSince = busy ? performance.now() : null;
      let lastBusy: unknown = busy ? LOCKED : null;
      for (let tried = 0; ; tried++) {
        if (waitingSince !== null) {
          const left = options.busyTimeoutMs - (performance.now() - waitingSince);
          if (left <= 0) throw reported(lastBusy);
          await sleep(Math.min(BACKOFF_MS[Math.min(tried, BACKOFF_MS.length - 1)]!, left));
        }
        try {
          return await attempt();
        } catch (error) {
          if (!isBusy(error)) throw reported(error);
          lastBusy = error;
          waitingSince ??= performance.now();
        }
      }
    },
    get unwritable() {
      return fault !== null;
    },
    cleared() {
      if (fault === null) return;
      fault = null;
      options.log("SQLite writes again", null);
    },
  };
}

/** A SQLite error as the log shows it: its code and message (no statement, no values). */
function brief(error: unknown): unknown {
  const code = codeOf(error);
  return code === null ? error : `${code}: ${(error as Error).message}`;
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
