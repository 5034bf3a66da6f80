import { type ApiError, isStorageUnavailable, storageUnavailable } from "../base/api-error.js";
import { isPromiseLike } from "../base/awaitable.js";
import { deadlines } from "../base/timeout.js";
import type { Metrics, StorageOutcome } from "../ports/metrics.js";
import type { Storage } from "../ports/storage.js";
import { mapAreas } from "../storage/areas.js";

/**
 * The store calls no deadline bounds (they are measured all the same): the
 * bulk row writes, whose duration grows with their rows (a streamed upload
 * lasts as long as its client sends; a refresh replaces every row of a
 * dataset). The SQL stores bound them statement by statement instead.
 */
export const UNBOUNDED_CALLS: ReadonlySet<string> = new Set(["writeDatasetRows", "replaceDatasetRows"]);

/**
 * The mark of a store method that reports its own faults: its failures are
 * already what the store's `reported` makes of them (it catches around its
 * statements, or settles through a group commit that reports them). When a
 * wrapping asks only for `reported` (a SQL store wrapping itself), such a
 * method is left as it is: a call on a hot path (the key lookup, a page
 * read, the usage record) then pays no promise reaction of the wrapper's.
 */
const REPORTS_OWN_FAULTS = Symbol("dataport.reportsOwnFaults");

/** `method`, marked as reporting its own faults (see `REPORTS_OWN_FAULTS`). */
export function reportsOwnFaults<F extends (...args: never[]) => unknown>(method: F): F {
  return Object.assign(method, { [REPORTS_OWN_FAULTS]: true });
}

/**
 * Runs a store call inside a span of its own (the core's tracing, when on): `call`'s result, the span ended when it
 * settles.
 */
export type TraceCall = <T>(name: string, attributes: Record<string, string>, call: () => T) => T;

export interface StoreCallOptions {
  /** How long one call may take before it rejects with 503 `storage_unavailable`, in ms; 0 or Infinity: no deadline. */
  timeoutMs: number;
  /** Where each call's duration and outcome is measured (`storageOperation`), or null. */
  metrics?: Metrics | null;
  /**
   * A call's failure as the store reports it: a store maps its faults (its
   * database unreachable, locked, full, closed) to `storageUnavailable`, and
   * leaves any other error as it is. Absent: errors pass as they are.
   */
  reported?: (error: unknown) => unknown;
  /**
   * A child span per call, `storage rows.readDatasetRows`, ended when the
   * call settles (a page's rows may still be read after it), or null.
   */
  tracing?: TraceCall | null;
  /** What the deadline's 503 calls the store ("the database did not answer…"). Default "the store". */
  subject?: string;
}

/**
 * The one wrapper of store calls, for every store: each method of each area
 * bounded by `timeoutMs`, its failure reported as the store's fault mapping
 * says (`reported`), measured into `metrics` and traced. The SQL stores wrap
 * themselves with their deadline and fault mapping; `createDataApi` wraps
 * whatever store it is given with `storageTimeoutMs`, its metrics and its
 * tracing. Without any of them the store is returned as it is, so the
 * default costs nothing.
 *
 * A call that times out is not cancelled: the store may still complete it (a
 * webhook row may be stored after its client got the 503; a retry with the
 * same delivery id is then recognised as a duplicate). A method that answers
 * synchronously is measured but not bounded (there is nothing to wait for).
 * The lifecycle (seed, ping, close) is left alone: a seed may take long, and
 * readiness probes have their own limit. What is not a method of an area's
 * own (a read-only area's stand-ins, `teamsFrom`, escape hatches such as
 * `db`) is read from it unchanged.
 */
export function wrapStoreCalls<S extends Storage>(storage: S, options: StoreCallOptions): S {
  const timeoutMs = options.timeoutMs > 0 && Number.isFinite(options.timeoutMs) ? options.timeoutMs : 0;
  const metrics = options.metrics ?? null;
  const reported = options.reported ?? null;
  const tracing = options.tracing ?? null;
  if (timeoutMs === 0 && metrics === null && reported === null && tracing === null) return storage;
  const subject = options.subject ?? "the store";
  const bound = timeoutMs === 0 ? null : deadlines(timeoutMs, () => callTimedOut(subject, timeoutMs));
  return mapAreas(storage, (area, areaName) => wrapArea(area, areaName, { bound, metrics, reported, tracing }));
}

/** The 503 of a call that ran past its deadline (`cause`: why, for the log). */
export function callTimedOut(subject: string, timeoutMs: number, cause?: unknown): ApiError {
  return storageUnavailable(`${subject} did not answer within ${timeoutMs} ms; retry later`, { cause });
}

interface Wrapping {
  bound: (<T>(promise: Promise<T>) => Promise<T>) | null;
  metrics: Metrics | null;
  reported: ((error: unknown) => unknown) | null;
  tracing: TraceCall | null;
}

/**
 * The area with each method wrapped (measured under its own name). The area
 * stays the wrapper's prototype, so what is not a method of its own is read
 * from it unchanged.
 */
function wrapArea<A extends object>(area: A, areaName: string, { bound, metrics, reported, tracing }: Wrapping): A {
  const wrapped = Object.create(area) as Record<string, unknown>;
  const methods = area as Record<string, (...args: unknown[]) => unknown>;
  for (const name of allKeys(area)) {
    const method = methods[name];
    if (typeof method !== "function") continue;
    const limit = bound !== null && !UNBOUNDED_CALLS.has(name) ? bound : null;
    const measured =
      metrics === null
        ? null
        : (outcome: StorageOutcome, startedAt: number) => {
            metrics.storageOperation(name, outcome, performance.now() - startedAt);
          };
    const own = (method as { [REPORTS_OWN_FAULTS]?: boolean })[REPORTS_OWN_FAULTS] === true;
    // Nothing to add: the area's own method (read through the prototype, so a later replacement is the one called).
    if (limit === null && measured === null && tracing === null && (reported === null || own)) continue;
    const failed = (error: unknown, startedAt: number): never => {
      const report = reported === null ? error : reported(error);
      measured?.(isStorageUnavailable(report) ? "timeout" : "error", startedAt);
      throw report;
    };
    const call = (...args: unknown[]) => {
      const startedAt = measured === null ? 0 : performance.now();
      let result: unknown;
      try {
        // Looked up at each call, so a method replaced on the area later (a host's patch, a test's) is the one called.
        result = (methods[name] ?? method).apply(area, args);
      } catch (error) {
        return failed(error, startedAt);
      }
      if (!isPromiseLike(result)) {
        // A store answering without a promise (its port says it must not): measured, nothing to time out.
        measured?.("ok", startedAt);
        return result;
      }
      const pending = limit === null ? Promise.resolve(result) : limit(Promise.resolve(result));
      if (measured === null)
        return reported === null ? pending : pending.catch((error: unknown) => failed(error, startedAt));
      return pending.then(
        (value) => {
          measured("ok", startedAt);
          return value;
        },
        (error: unknown) => failed(error, startedAt),
      );
    };
    const attributes = { "dataport.storage.area": areaName, "dataport.storage.operation": name };
    const traced =
      tracing === null
        ? call
        : (...args: unknown[]) => tracing(`storage ${areaName}.${name}`, attributes, () => call(...args));
    // The method's own marks (a read-only area's stand-in's) stay with it.
    wrapped[name] = Object.assign(traced, method);
  }
  return wrapped as A;
}

/** Own keys and, for class-based stores, their prototype methods. */
function allKeys(object: object): string[] {
  const keys = new Set<string>();
  for (let o: object | null = object; o && o !== Object.prototype; o = Object.getPrototypeOf(o)) {
    for (const key of Object.getOwnPropertyNames(o)) if (key !== "constructor") keys.add(key);
  }
  return [...keys];
}
