/**
 * `promise`, or — once `timeoutMs` has passed first — a rejection with what
 * `expire()` returns; the timer is cleared either way. The work behind
 * `promise` is not cancelled here (`expire` may abort it).
 */
export function withTimeout<T>(promise: Promise<T>, timeoutMs: number, expire: () => unknown): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(expire()), timeoutMs);
  });
  return Promise.race([promise, expired]).finally(() => clearTimeout(timer));
}

/**
 * Deadlines of one length for many calls at once, cheaper per call than a
 * timer each: `bound(promise)` is `promise`, or — once `timeoutMs` has
 * passed first — a rejection with what `expire()` returns. One interval
 * (unref'd, running only while calls are pending) sweeps the calls in the
 * order they started, so a call fails at most a tick (a quarter of
 * `timeoutMs`, at most 100 ms) after its deadline.
 */
export function deadlines(timeoutMs: number, expire: () => unknown): <T>(promise: Promise<T>) => Promise<T> {
  const pending = new Set<{ at: number; reject: (reason: unknown) => void }>();
  let sweeper: ReturnType<typeof setInterval> | null = null;
  const sweep = () => {
    const now = performance.now();
    for (const call of pending) {
      if (call.at > now) break;
      pending.delete(call);
      call.reject(expire());
    }
    if (pending.size === 0 && sweeper !== null) {
      clearInterval(sweeper);
      sweeper = null;
    }
  };
  const tick = Math.max(1, Math.min(100, timeoutMs / 4));
  return <T>(promise: Promise<T>) =>
    new Promise<T>((resolve, reject) => {
      const call = { at: performance.now() + timeoutMs, reject };
      pending.add(call);
      if (sweeper === null) {
        sweeper = setInterval(sweep, tick);
        sweeper.unref?.();
      }
      promise.then(
        (value) => {
          pending.delete(call);
          resolve(value);
        },
        (error: unknown) => {
          pending.delete(call);
          reject(error);
        },
      );
    });
}
