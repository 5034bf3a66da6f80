import type { Clock } from "../base/clock.js";
import { utcDay } from "../domain/days.js";
import {
  countKind,
  type DeliveryCount,
  type InboxBounds,
  inboxKeep,
  type RefusalLogInput,
} from "../domain/webhook-inbox.js";
import type { Storage } from "../ports/storage.js";

/**
 * Refusals an endpoint's log keeps per second, after a burst of KEPT_BURST; beyond, they are counted (`suppressed`),
 * not kept.
 */
export const KEPT_REFUSALS_PER_SECOND = 10;
export const KEPT_BURST = 50;
/** Refusals waiting for their write, all endpoints together; beyond, they are counted, not kept. */
const MAX_PENDING = 1000;
/** Connections whose kept-refusal bucket is remembered; the oldest is forgotten past it (it starts full again). */
const MAX_BUCKETS = 10_000;
/**
 * How long counts alone (nothing to keep) wait to be written, in ms: a flood of refusals costs one write per interval.
 */
const COUNTS_EVERY_MS = 1000;

/**
 * Where the receiver hands refused deliveries (webhook-inbox.md): kept in
 * the endpoint's log while the endpoint refuses fewer than
 * KEPT_REFUSALS_PER_SECOND, otherwise counted and noted as `suppressed` on
 * the endpoint's next kept entry. Every refusal moves the daily counters.
 * Written in batches (one store call at a time: what arrives meanwhile
 * forms the next batch), off the sender's path: a refusal is answered at
 * once, and a failing write is logged, never answered. Memory is bounded:
 * at most MAX_PENDING entries wait, and the counters of one batch are one
 * per connection, day and reason.
 */
export interface WebhookInbox {
  readonly bounds: InboxBounds;
  /** Keep or count a refused delivery. Never throws, never waits. */
  refused(entry: RefusalLogInput): void;
  /**
   * Refusals of the connection counted but not kept since its last kept entry (the next entry carries them); resets the
   * count.
   */
  takeSuppressed(connectionId: string): number;
  /** Resolves once everything handed over so far is written (or its write failed). */
  settled(): Promise<void>;
}

export function createWebhookInbox(deps: {
  storage: Storage;
  clock: Clock;
  bounds: InboxBounds;
  log: (message: string, error?: unknown) => void;
}): WebhookInbox {
  const { storage, clock, bounds } = deps;
  const buckets = new Map<string, { tokens: number; atMs: number }>();
  const suppressed = new Map<string, number>();
  let pending: RefusalLogInput[] = [];
  let counts = new Map<string, DeliveryCount>();
  let writing: Promise<void> | null = null;
  let later: ReturnType<typeof setTimeout> | null = null;
  let failureLoggedAt = Number.NEGATIVE_INFINITY;

  /** One token of the connection's bucket, or false. */
  function mayKeep(connectionId: string, nowMs: number): boolean {
    let bucket = buckets.get(connectionId);
    if (!bucket) {
      if (buckets.size >= MAX_BUCKETS) buckets.delete(buckets.keys().next().value!);
      bucket = { tokens: KEPT_BURST, atMs: nowMs };
      buckets.set(connectionId, bucket);
    }
    bucket.tokens = Math.min(
      KEPT_BURST,
      bucket.tokens + (Math.max(0, nowMs - bucket.atMs) * KEPT_REFUSALS_PER_SECOND) / 1000,
    );
    bucket.atMs = nowMs;
    if (bucket.tokens < 1) return false;
    bucket.tokens -= 1;
    return true;
  }

  /**
   * Kept refusals are written at once when no write is under way (so the log
   * keeps the order deliveries arrived in), else right after it, together;
   * counts alone wait up to COUNTS_EVERY_MS.
   */
  function schedule(): void {
    if (writing !== null) return;
    if (pending.length > 0) {
      write();
    } else if (counts.size > 0 && later === null) {
      later = setTimeout(write, COUNTS_EVERY_MS);
      later.unref?.();
    }
  }

  function write(): void {
    if (later !== null) clearTimeout(later);
    later = null;
    if (pending.length === 0 && counts.size === 0) return;
    const batch = { refusals: pending, counts: [...counts.values()], keep: inboxKeep(bounds, clock.now()) };
    pending = [];
    counts = new Map();
    writing = (async () => {
      try {
        await storage.webhooks.recordWebhookDeliveries(batch);
      } catch (error) {
        // Once per ten seconds of the machine's time: a store that is away must not flood the log.
        const now = Date.now();
        if (now - failureLoggedAt >= 10_000) {
          failureLoggedAt = now;
          deps.log("could not record refused webhook deliveries", error);
        }
      }
    })().finally(() => {
      writing = null;
      schedule();
    });
  }

  function takeSuppressed(connectionId: string): number {
    const n = suppressed.get(connectionId);
    if (n === undefined) return 0;
    suppressed.delete(connectionId);
    return n;
  }

  return {
    bounds,
    refused(entry) {
      const key = `${entry.connectionId}\u0000${utcDay(entry.receivedAt)}\u0000${countKind("refused", entry.reason)}`;
      const counter = counts.get(key);
      if (counter) counter.n += 1;
      else
        counts.set(key, {
          connectionId: entry.connectionId,
          day: utcDay(entry.receivedAt),
          kind: countKind("refused", entry.reason),
          n: 1,
        });
      if (pending.length < MAX_PENDING && mayKeep(entry.connectionId, clock.now())) {
        entry.detail.suppressed += takeSuppressed(entry.connectionId);
        pending.push(entry);
      } else {
        suppressed.set(entry.connectionId, (suppressed.get(entry.connectionId) ?? 0) + 1);
      }
      schedule();
    },
    takeSuppressed,
    async settled() {
      for (;;) {
        if (writing !== null) await writing;
        else if (pending.length > 0 || counts.size > 0) write();
        else return;
      }
    },
  };
}
