/**
 * A value, or a promise of it. Ports on the hot path may answer with a plain
 * value when they need not wait (an in-process store, SQLite's synchronous
 * driver); the core then continues without a microtask hop.
 */
export type Awaitable<T> = T | Promise<T>;

/** Whether a port's answer must be awaited (any thenable counts, not only native promises). */
export function isPromiseLike<T>(value: T | PromiseLike<T>): value is PromiseLike<T> {
  return typeof (value as { then?: unknown } | null)?.then === "function";
}

/** `next(value)` at once when `value` is plain, once it settles when it is a promise. */
export function andThen<T, R>(value: T | PromiseLike<T>, next: (value: T) => R | PromiseLike<R>): Awaitable<R> {
  return isPromiseLike(value) ? Promise.resolve(value).then(next) : (next(value) as Awaitable<R>);
}
