import type { AuditCategory, AuditEvent } from "../../domain/model.js";

export interface StoredAuditEvent {
  /** Opaque storage position; increases in the order events become readable. */
  position: string;
  /** Epoch ms (injected clock) at which the event was stored. */
  storedAt: number;
  event: AuditEvent;
}

export interface AuditStore {
  /**
   * Store an event at the next position. Positions are never reused, even
   * after trimming. Visibility: once a read has returned a position p, no
   * event with a position below p may become readable later (SQL stores with
   * out-of-order commits gate reads accordingly).
   */
  appendAuditEvent(event: AuditEvent, storedAt: number): Promise<void>;
  /**
   * A keyset page: events after position `after` (null: from the start) of
   * the given teams and categories, stored at or before `storedBefore`
   * (epoch ms; the lag horizon), and, when `since` is given, whose writer time is at
   * or after it. Cost MUST NOT grow with the number of events before `after`.
   * `hasMore` is true when more matching events exist below the horizon.
   */
  readAuditEvents(query: {
    teamIds: readonly string[];
    categories: readonly AuditCategory[];
    after: string | null;
    since: string | null;
    storedBefore: number;
    limit: number;
  }): Promise<{ events: StoredAuditEvent[]; hasMore: boolean }>;
  /** Validates an opaque position from a cursor; false means tampered or malformed. */
  isAuditPosition(position: string): boolean;
}
