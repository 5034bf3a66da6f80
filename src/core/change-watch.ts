import type { Storage } from "../ports/storage.js";

/** How long a reader waits between looks when its store has no signal, in ms. */
const LOOK_EVERY_MS = 1000;

/** Why a wait ended. */
export type WaitEnd = "changed" | "timeout" | "aborted" | "draining";

/**
 * The one watcher of an API instance over its store's change signals
 * (`watchTableChanges`, `watchDatasetChanges`): however many requests wait
 * for changes (long-polls, streams), the store is watched once, and a
 * waiting request costs no store query until it is woken. Subscribes when
 * the first request waits and stays subscribed. `drain` ends every wait
 * (and refuses new ones), so a shutdown answers them.
 */
export interface ChangeWatch {
  /**
   * Wait until a change of `feedId` may be readable (or of any feed, when
   * the store cannot say which), `ms` have passed, `signal` aborts (the
   * client went away) or the instance drains. Throws `WaitersFull` when
   * `maxWaiters` wait already.
   */
  wait(kind: "table" | "dataset", feedId: string, ms: number, signal?: AbortSignal): Promise<WaitEnd>;
  /** Requests waiting now. */
  readonly waiting: number;
  /** End every wait with `draining`, now and from now on. */
  drain(): void;
}

export class WaitersFull extends Error {}

interface Waiter {
  feedId: string;
  done: (end: WaitEnd) => void;
}

export function createChangeWatch(storage: Pick<Storage, "tables" | "rows">, maxWaiters: number): ChangeWatch {
  const waiters = new Set<Waiter>();
  const subscribed = { table: false, dataset: false };
  let draining = false;

  const wake = (feedId: string | null) => {
    for (const waiter of waiters) if (feedId === null || waiter.feedId === feedId) waiter.done("changed");
  };

  /** Whether the store signals this kind of feed (subscribing on first use). */
  const signalled = (kind: "table" | "dataset"): boolean => {
    const watch = kind === "table" ? storage.tables.watchTableChanges : storage.rows.watchDatasetChanges;
    if (!watch) return false;
    if (!subscribed[kind]) {
      subscribed[kind] = true;
      watch(wake);
    }
    return true;
  };

  return {
    wait(kind, feedId, ms, signal) {
      if (draining) return Promise.resolve("draining");
      if (signal?.aborted) return Promise.resolve("aborted");
      if (waiters.size >= maxWaiters) throw new WaitersFull();
      // Without a signal, a reader looks again every second (still no query while it sleeps).
      const limit = signalled(kind) ? ms : Math.min(ms, LOOK_EVERY_MS);
      return new Promise<WaitEnd>((resolve) => {
        const waiter: Waiter = {
          feedId,
          done: (end) => {
            if (!waiters.delete(waiter)) return;
            clearTimeout(timer);
            signal?.removeEventListener("abort", onAbort);
            resolve(end);
          },
        };
        const onAbort = () => waiter.done("aborted");
        const timer = setTimeout(() => waiter.done(limit < ms ? "changed" : "timeout"), limit);
        waiters.add(waiter);
        signal?.addEventListener("abort", onAbort, { once: true });
      });
    },
    get waiting() {
      return waiters.size;
    },
    drain() {
      draining = true;
      for (const waiter of waiters) waiter.done("draining");
    },
  };
}
