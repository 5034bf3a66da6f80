/**
 * The API instance's one change watcher (src/core/change-watch.ts): it subscribes to the store's signal when
 * the first request waits, keeps the subscription while waits come and go, and ends it LINGER_MS after the last
 * wait of its kind ended, so a store whose writers pay while someone listens (PostgreSQL's NOTIFY) stops paying.
 */
import { afterEach, describe, expect, it, vi } from "vitest";
import { createChangeWatch, LINGER_MS } from "../src/core/change-watch.js";
import type { WatchChanges } from "../src/ports/storage/changes.js";

afterEach(() => {
  vi.useRealTimers();
});

/** A store's signal that counts its subscriptions and can fire. */
function signal() {
  const listeners = new Set<(feedId: string | null) => void>();
  const counts = { subscribed: 0, unsubscribed: 0 };
  const watch: WatchChanges = (onChange) => {
    counts.subscribed++;
    listeners.add(onChange);
    return () => {
      counts.unsubscribed++;
      listeners.delete(onChange);
    };
  };
  const fire = (feedId: string | null) => {
    for (const listener of listeners) listener(feedId);
  };
  return { watch, counts, fire, listening: () => listeners.size };
}

describe("the change watcher's subscription", () => {
  it("subscribes once for many waits, lingers after the last, then unsubscribes; a later wait subscribes again", async () => {
    vi.useFakeTimers();
    const tables = signal();
    const watch = createChangeWatch({ tables: { watchTableChanges: tables.watch }, rows: {} } as never, 100);
    const first = watch.wait("table", "tbl_a", 20_000);
    const second = watch.wait("table", "tbl_b", 20_000);
    expect(tables.counts).toEqual({ subscribed: 1, unsubscribed: 0 });
    tables.fire("tbl_a");
    expect(await first).toBe("changed");
    // One wait still holds it, until it times out.
    await vi.advanceTimersByTimeAsync(20_000);
    expect(await second).toBe("timeout");
    expect(tables.counts).toEqual({ subscribed: 1, unsubscribed: 0 });
    // The last wait ended: still subscribed until the linger is over.
    await vi.advanceTimersByTimeAsync(LINGER_MS - 1000);
    expect(tables.listening()).toBe(1);
    await vi.advanceTimersByTimeAsync(2000);
    expect(tables.counts).toEqual({ subscribed: 1, unsubscribed: 1 });
    expect(tables.listening()).toBe(0);
    // A later follower subscribes again, and is woken by the signal.
    const third = watch.wait("table", "tbl_a", 20_000);
    expect(tables.counts.subscribed).toBe(2);
    tables.fire(null);
    expect(await third).toBe("changed");
  });

  it("keeps the subscription when a wait comes while it lingers, and ends each kind on its own", async () => {
    vi.useFakeTimers();
    const tables = signal();
    const datasets = signal();
    const watch = createChangeWatch(
      { tables: { watchTableChanges: tables.watch }, rows: { watchDatasetChanges: datasets.watch } } as never,
      100,
    );
    const a = watch.wait("table", "tbl_a", 1000);
    const d = watch.wait("dataset", "ds_a", 60_000);
    await vi.advanceTimersByTimeAsync(1000);
    expect(await a).toBe("timeout");
    // Back within the linger (a follower's next long-poll): the same subscription.
    await vi.advanceTimersByTimeAsync(LINGER_MS / 2);
    const b = watch.wait("table", "tbl_a", 1000);
    await vi.advanceTimersByTimeAsync(1000);
    expect(await b).toBe("timeout");
    expect(tables.counts).toEqual({ subscribed: 1, unsubscribed: 0 });
    await vi.advanceTimersByTimeAsync(LINGER_MS + 1);
    expect(tables.counts).toEqual({ subscribed: 1, unsubscribed: 1 });
    // The dataset wait still holds its own kind.
    expect(datasets.counts).toEqual({ subscribed: 1, unsubscribed: 0 });
    datasets.fire("ds_a");
    expect(await d).toBe("changed");
    await vi.advanceTimersByTimeAsync(LINGER_MS + 1);
    expect(datasets.counts).toEqual({ subscribed: 1, unsubscribed: 1 });
  });

  it("releases on an abort and on drain as on any other end", async () => {
    vi.useFakeTimers();
    const tables = signal();
    const watch = createChangeWatch({ tables: { watchTableChanges: tables.watch }, rows: {} } as never, 100);
    const controller = new AbortController();
    const aborted = watch.wait("table", "tbl_a", 20_000, controller.signal);
    const drained = watch.wait("table", "tbl_b", 20_000);
    controller.abort();
    expect(await aborted).toBe("aborted");
    watch.drain();
    expect(await drained).toBe("draining");
    expect(watch.waiting).toBe(0);
    await vi.advanceTimersByTimeAsync(LINGER_MS + 1);
    expect(tables.counts).toEqual({ subscribed: 1, unsubscribed: 1 });
  });
});
