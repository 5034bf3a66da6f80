import { type Clock, systemClock } from "../base/clock.js";

/** A clock that stands still until told to move (tests). */
export interface FixedClock extends Clock {
  set(at: number | string | Date): void;
  /** Move forward by `ms` milliseconds. */
  advance(ms: number): void;
}

export function createFixedClock(at: number | string | Date): FixedClock {
  let current = toMillis(at);
  return {
    now: () => current,
    set(next) {
      current = toMillis(next);
    },
    advance(ms) {
      current += ms;
    },
  };
}

/** Starts at `start` and advances in real time (the example server's `--now`). */
export function createOffsetClock(start: number | string | Date, real: Clock = systemClock): Clock {
  const offset = toMillis(start) - real.now();
  return { now: () => real.now() + offset };
}

function toMillis(at: number | string | Date): number {
  const ms = typeof at === "number" ? at : new Date(at).getTime();
  if (!Number.isFinite(ms)) throw new RangeError(`not a valid instant: ${String(at)}`);
  return ms;
}
