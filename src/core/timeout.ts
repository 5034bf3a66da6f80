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
