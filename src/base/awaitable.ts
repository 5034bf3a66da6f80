/**
 * The one async rule of Dataport:
 *
 * - ports (storage, cache, rate limiter, connectors) answer with promises;
 * - handlers are plain functions returning a value or a promise of one;
 * - only the request pipeline (src/server/pipeline.ts) and the adapter that calls it
 *   continue without a promise when a step gave a plain value, so a request
 *   that waits for nothing (a preflight, a 404, a refusal before any port is
 *   asked, a handler that needs no port) is answered without one.
 *
 * This module is how they do it. Besides the pipeline, only the Node adapter
 * (writing a reply that came without a promise), the store-call wrapper
 * (src/sql/store-calls.ts, passing on whatever a store's method returned) and
 * group commit (src/sql/group-commit.ts, where SQLite commits a group
 * synchronously and PostgreSQL with a promise) use it.
 */

/** A value, or a promise of it: what a handler returns and the pipeline passes on. */
export type Awaitable<T> = T | Promise<T>;

/** Whether a value must be awaited (any thenable counts, not only native promises). */
export function isPromiseLike<T>(value: T | PromiseLike<T>): value is PromiseLike<T> {
  return typeof (value as { then?: unknown } | null)?.then === "function";
}

/** `next(value)` at once when `value` is plain, once it settles when it is a promise. */
export function andThen<T, R>(value: T | PromiseLike<T>, next: (value: T) => R | PromiseLike<R>): Awaitable<R> {
  return isPromiseLike(value) ? Promise.resolve(value).then(next) : (next(value) as Awaitable<R>);
}
