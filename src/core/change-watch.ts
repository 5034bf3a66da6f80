import type { Storage } from "../ports/storage.js";

/** How long a reader waits between looks when its store has no signal, in ms. */
const LOOK_EVERY_MS = 1000;

/**
 * How long the watcher stays subscribed to a kind of feed after its last wait ended, in ms. While
 * subscribed, a store may cost its writers something (PostgreSQL's writers notify while any instance
 * listens), so the subscription ends once nobody has waited for a while; a follower's next long-poll,
 * seconds after its last one, finds it still there.
 */
export const LINGER_MS = 30_000;

/** Why a wait ended. */
export type WaitEnd = "changed" | "timeout" | "aborted" | "draining";

/**
 * The one watcher of an API instance over its store's change signals
 * (`watchTableChanges`, `watchDatasetChanges`): however many requests wait
 * for changes (long-polls, streams), the store is watched once, and a
 * waiting request costs no store query until it is woken. Subscribes when
 * the first request waits, and unsubscribes `lingerMs` (LINGER_MS) after
 * the last wait of that kind ended. `drain` ends every wait (and refuses new
 * ones), so a shutdown answers them.
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

/** A kind of feed the watcher is subscribed to: how to stop, how many wait on it, the timer that will stop it. */
interface Subscription {
  stop: () => void;
  waiting: number;
  linger: ReturnType<typeof setTimeout> | null;
}

export function createChangeWatch(
  storage: Pick<Storage, "tables" | "rows">,
  maxWaiters: number,
  lingerMs = LINGER_MS,
): ChangeWatch {
  const waiters = new Set<Waiter>();
  const subscriptions: Record<"table" | "dataset", Subscription | null> = { table: null, dataset: null };
  let draining = false;

  const wake = (feedId: string | null) => {
    for (const waiter of waiters) if (feedId === null || waiter.feedId === feedId) waiter.done("changed");
  };

  /** The subscription a wait of this kind holds (made, or kept from lingering), or null when the store has no signal. */
  const hold = (kind: "table" | "dataset"): Subscription | null => {
    const watch = kind === "table" ? storage.tables.watchTableChanges : storage.rows.watchDatasetChanges;
    if (!watch) return null;
    let subscription = subscriptions[kind];
    if (subscription === null) subscription = subscriptions[kind] = { stop: watch(wake), waiting: 0, linger: null };
    if (subscription.linger !== null) clearTimeout(subscription.linger);
    subscription.linger = null;
    subscription.waiting++;
    return subscription;
  };

  /** A wait of this kind ended: after the last one, the subscription lingers, then stops. */
  const release = (kind: "table" | "dataset", subscription: Subscription) => {
    if (--subscription.waiting > 0) return;
    subscription.linger = setTimeout(() => {
      if (subscription.waiting > 0 || subscriptions[kind] !== subscription) return;
      subscriptions[kind] = null;
      subscription.stop();
    }, lingerMs);
    subscription.linger.unref?.();
  };

  return {
    wait(kind, feedId, ms, signal) {
      if (draining) return Promise.resolve("draining");
      if (signal?.aborted) return Promise.resolve("aborted");
      if (waiters.size >= maxWaiters) throw new WaitersFull();
      const subscription = hold(kind);
      // Without a signal, a reader looks again every second (still no query while it sleeps).
      const limit = subscription !== null ? ms : Math.min(ms, LOOK_EVERY_MS);
      return new Promise<WaitEnd>((resolve) => {
        const waiter: Waiter = {
          feedId,
          done: (end) => {
            if (!waiters.delete(waiter)) return;
            clearTimeout(timer);
            signal?.removeEventListener("abort", onAbort);
            if (subscription !== null) release(kind, subscription);
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
