import type { AuditCategory, AuditEvent } from "../../domain/model.js";

export interface StoredAuditEvent {
  /** Opaque storage position; increases in the order events become readable. */
  position: string;
  /** Epoch ms (injected clock) at which the event was stored. */
  storedAt: number;
  event: AuditEvent;
}

/**
 * The business audit log: an append-only sequence read as a polling feed.
 * The feed's order is the order of positions (the order events were stored),
 * never the writers' timestamps; the conformance suite
 * (`src/testing/conformance/audit.ts`) is the executable form of this contract.
 * A fault of the store answers 503 `storage_unavailable` (the fault clause on `Storage`).
 */
export interface AuditStore {
  /**
   * Store an event at the next position. Positions are never reused, even
   * after trimming. Visibility: once a read has returned a position p, no
   * event with a position below p may become readable later (SQL stores with
   * out-of-order commits gate reads accordingly). Concurrent appends each get
   * their own position. Events loaded by `seed` come first, in fixture order,
   * stored at 0 (readable at any horizon). Event ids are unique in the log:
   * an id already stored throws and nothing is stored.
   */
  appendAuditEvent(event: AuditEvent, storedAt: number): Promise<void>;
  /**
   * Store, in order, each event whose `id` is not stored yet, all in one
   * transaction, at consecutive next positions; returns how many were
   * stored. Event ids are unique in the log: of two concurrent calls with
   * one id, exactly one stores it.
   */
  appendAuditEvents(events: readonly AuditEvent[], storedAt: number): Promise<number>;
  /**
   * A keyset page in position order: events after position `after` (null:
   * from the start) of the given teams and categories, and, when `since`
   * (an ISO 8601 instant) is given, whose writer `time` is at or after it,
   * compared as instants, not as text. At most `limit` events (limit >= 1).
   *
   * Horizon: the read stops BEFORE the first position after `after` whose
   * event was stored after `storedBefore` (epoch ms, inclusive bound),
   * whatever that event's team or category: it never returns an event that
   * is positioned after one it held back, so a cursor never jumps over an
   * event that becomes readable later. (Clocks of concurrent writers can
   * make storedAt non-monotonic in position order; this rule keeps the feed
   * exactly-once anyway.)
   *
   * `hasMore` is true exactly when the next read from the last returned
   * position, with the same arguments, would return at least one event.
   * Cost MUST NOT grow with the number of events before `after`.
   *
   * `heldBackMs`: a store whose appends become readable out of position
   * order (PostgreSQL) reports how long the oldest append still open that
   * holds this read back has been open, in ms (0 or absent: none); the
   * feed's `lagSeconds` then says so. Only the log's own appends may hold a
   * read back, never other work on the same database server.
   */
  readAuditEvents(query: {
    teamIds: readonly string[];
    categories: readonly AuditCategory[];
    after: string | null;
    since: string | null;
    storedBefore: number;
    limit: number;
  }): Promise<{ events: StoredAuditEvent[]; hasMore: boolean; heldBackMs?: number }>;
  /**
   * Optional: the log's horizon now, for readiness and metrics: how long the
   * oldest append still open has held reads back, in ms (0: nothing holds
   * them back). Stores whose appends are readable in position order as soon
   * as they are stored always answer 0.
   */
  auditHorizon?(): Promise<{ heldBackMs: number }>;
  /**
   * Validates an opaque position from a cursor; false means tampered or
   * malformed. MUST accept every position this store returned and MUST
   * reject the empty string, strings with whitespace, and strings longer
   * than 100 characters. Never throws.
   */
  isAuditPosition(position: string): boolean;
}
