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
