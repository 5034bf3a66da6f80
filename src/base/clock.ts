/**
 * Where time comes from. What depends on the time of the records (expiry of
 * sessions and keys, day windows, the audit feed's horizon, every time
 * stored or answered) reads a `Clock`, never `Date.now()`, so a test moves
 * it without sleeping. What measures this process's own waiting (durations,
 * deadlines, retry loops, log throttling) reads the machine's time
 * (`performance.now()`, `Date.now()`): a test clock that stands still must
 * not stop it.
 */
export interface Clock {
  /** Milliseconds since the Unix epoch. */
  now(): number;
}

/** The real time. */
export const systemClock: Clock = { now: () => Date.now() };
