import { isPromiseLike } from "../base/awaitable.js";
import { ApiError } from "../base/api-error.js";
import type { Metrics, StorageOutcome } from "../ports/metrics.js";
import type { Storage } from "../ports/storage.js";
import { mapAreas } from "./areas.js";
import { deadlines } from "../base/timeout.js";

/** Measured but not bounded: a streamed bulk write lasts as long as its upload (its rows arrive as it runs). */
const UNBOUNDED = new Set(["writeDatasetRows"]);

/**
 * The store with every call bounded by `timeoutMs` (503
 * `storage_unavailable` once it passes) and/or measured into `metrics`.
 * Without either the store is returned as it is, so the default costs
 * nothing. A call that times out is not cancelled: the store may still
 * complete it (a webhook row may be stored after its client got the 503 —
 * a retry with the same delivery id is then recognised as a duplicate).
 * A method that answers synchronously is measured but not bounded (there
 * is nothing to wait for); non-function properties (escape hatches such as
 * `db`) pass through unchanged.
 */
/** Runs a store call inside a span of its own (the core's tracing, when on): `call`'s result, the span ended when it settles. */
export type TraceCall = <T>(name: string, attributes: Record<string, string>, call: () => T) => T;

export function instrumentStorage(storage: Storage, options: { timeoutMs: number; metrics: Metrics | null; tracing?: TraceCall | null }): Storage {
  const timeoutMs = options.timeoutMs > 0 && options.timeoutMs !== Number.POSITIVE_INFINITY ? options.timeoutMs : 0;
  const { metrics } = options;
  const tracing = options.tracing ?? null;
  if (timeoutMs === 0 && metrics === null && tracing === null) return storage;
  const bound = timeoutMs === 0 ? null : deadlines(timeoutMs, () => storageTimedOut(timeoutMs));
  // The lifecycle is left alone: a seed may take long, and close/ping have their own callers' limits.
  return mapAreas(storage, (area, areaName) => instrumentArea(area, areaName, bound, metrics, tracing));
}

/**
 * The area with each method bounded and measured (under its own name), and
 * with tracing a child span per call (`storage catalog.readDatasetRows`,
 * ended when the call settles: a page's rows may still be read after it).
 * The area stays the wrapper's prototype, so what is not a method of its own
 * (a read-only area's stand-ins, `teamsFrom`) is read from it unchanged.
 */
function instrumentArea<A extends object>(
  area: A,
  areaName: string,
  bound: (<T>(promise: Promise<T>) => Promise<T>) | null,
  metrics: Metrics | null,
  tracing: TraceCall | null,
): A {
  const wrapped = Object.create(area) as Record<string, unknown>;
  for (const name of allKeys(area)) {
    const value = (area as Record<string, unknown>)[name];
    if (typeof value !== "function") continue;
    const method = value as (...args: unknown[]) => unknown;
    const measured = timedCall(area, name, method, bound, metrics);
    const attributes = { "dataport.storage.area": areaName, "dataport.storage.operation": name };
    const call = tracing === null ? measured : (...args: unknown[]) => tracing(`storage ${areaName}.${name}`, attributes, () => measured(...args));
    // The method's own marks (a read-only area's) stay with it.
    wrapped[name] = Object.assign(call, method);
  }
  return wrapped as A;
}

/** One method of an area, bounded by the deadline and measured into the metrics (each when set). */
function timedCall(
  area: object,
  name: string,
  method: (...args: unknown[]) => unknown,
  bound: (<T>(promise: Promise<T>) => Promise<T>) | null,
  metrics: Metrics | null,
): (...args: unknown[]) => unknown {
  return (...args: unknown[]) => {
    const startedAt = performance.now();
    let result: unknown;
    try {
      // Looked up at each call, so a method replaced on the area later (a host's patch, a test's) is the one called.
      result = ((area as Record<string, (...a: unknown[]) => unknown>)[name] ?? method).apply(area, args);
    } catch (error) {
      metrics?.storageOperation(name, "error", performance.now() - startedAt);
      throw error;
    }
    if (!isPromiseLike(result)) {
      // A store answering without a promise (its port says it must not): measured, nothing to time out.
      metrics?.storageOperation(name, "ok", performance.now() - startedAt);
      return result;
    }
    const pending = Promise.resolve(result);
    const bounded = bound === null || UNBOUNDED.has(name) ? pending : bound(pending);
    if (metrics === null) return bounded;
    return bounded.then(
      (value) => {
        metrics.storageOperation(name, "ok", performance.now() - startedAt);
        return value;
      },
      (error: unknown) => {
        const outcome: StorageOutcome = error instanceof ApiError && error.code === "storage_unavailable" ? "timeout" : "error";
        metrics.storageOperation(name, outcome, performance.now() - startedAt);
        throw error;
      },
    );
  };
}

function storageTimedOut(timeoutMs: number): ApiError {
  return new ApiError(503, "storage_unavailable", `the store did not answer within ${timeoutMs} ms; retry later`, {
    headers: { "retry-after": "1" },
  });
}

/** Own keys and, for class-based stores, their prototype methods. */
function allKeys(object: object): string[] {
  const keys = new Set<string>();
  for (let o: object | null = object; o && o !== Object.prototype; o = Object.getPrototypeOf(o)) {
    for (const key of Object.getOwnPropertyNames(o)) if (key !== "constructor") keys.add(key);
  }
  return [...keys];
}
