import type * as Database from "./driver.js";
import type { AuditEvent } from "../domain/model.js";
import type { AuditStore, StoredAuditEvent } from "../ports/storage/audit.js";
import { parseJson, type SqliteHandle, writeTransaction } from "./db.js";
import type { RecordWrites } from "./records.js";
import { reportsOwnFaults } from "../sql/store-calls.js";

/**
 * Positions are the AUTOINCREMENT key of `audit_events`, as decimal strings.
 * SQLite has one writer at a time and assigns the key inside the writing
 * transaction, so positions become readable in increasing order and a
 * trimmed position is never handed out again.
 */
export function sqliteAudit({ db }: SqliteHandle, group: RecordWrites): AuditStore {
  const append = appendAuditStatement(db);
  const stored = db.prepare<[string], number>("SELECT 1 FROM audit_events WHERE event_id = ?").pluck();
  // Look before inserting: an INSERT that ON CONFLICT does nothing would still use up an
  // AUTOINCREMENT position, and the new events must sit at consecutive positions.
  const appendNew = writeTransaction(db, (events: readonly AuditEvent[], storedAt: number): number => {
    let n = 0;
    for (const event of events) {
      if (stored.get(event.id) !== undefined) continue;
      append(event, storedAt);
      n++;
    }
    return n;
  });
  // The horizon: the first position after `after` stored later than `storedBefore`. Only events
  // younger than the horizon are visited (index on stored_at), a handful in a live log.
  const heldBack = db.prepare<[number, number], { position: number | null }>(
    "SELECT min(position) AS position FROM audit_events INDEXED BY audit_events_by_stored_at WHERE stored_at > ? " +
      "AND position > ?",
  );
  const page = db.prepare<
    [number, number, string, string, number | null, number | null, number],
    { position: number; stored_at: number; event: string }
  >(
    `SELECT position, stored_at, event FROM audit_events
     WHERE position > ? AND position < ?
       AND team_id IN (SELECT value FROM json_each(?))
       AND category IN (SELECT value FROM json_each(?))
       AND (? IS NULL OR time_ms >= ?)
     ORDER BY position LIMIT +?`,
  );
  return {
    // In this turn's group commit (which reports the store's faults); the UNIQUE event_id makes an id already
    // stored fail (only this event).
    appendAuditEvent: reportsOwnFaults((event: AuditEvent, storedAt: number) =>
      group.add(() => append(event, storedAt)),
    ),
    async appendAuditEvents(events, storedAt) {
      group.flush();
      return appendNew(events, storedAt);
    },
    async readAuditEvents(query) {
      if (query.limit <= 0 || query.teamIds.length === 0 || query.categories.length === 0)
        return { events: [], hasMore: false };
      // This process's events still waiting for their group are committed first: a read sees every append made before
      // it.
      group.flush();
      const after = query.after === null ? 0 : Number(query.after);
      const since = query.since === null ? null : Date.parse(query.since);
      const sinceMs = since === null || Number.isNaN(since) ? null : since;
      // Never read past an event held back by the horizon, whatever its team or category: a cursor
      // must not jump over an event that becomes readable later.
      const bound = heldBack.get(query.storedBefore, after)?.position ?? Number.MAX_SAFE_INTEGER;
      // The primary key drives the scan from `after`: the cost does not depend on how many events lie before it.
      const rows = page.all(
        after,
        bound,
        JSON.stringify(query.teamIds),
        JSON.stringify(query.categories),
        sinceMs,
        sinceMs,
        query.limit + 1,
      );
      const events = rows.slice(0, query.limit).map((r): StoredAuditEvent => ({
        position: String(r.position),
        storedAt: r.stored_at,
        event: parseJson<AuditEvent>(r.event),
      }));
      return { events, hasMore: rows.length > query.limit };
    },
    async auditHorizon() {
      // One writer at a time, positions assigned in its transaction: commits come in position order.
      return { heldBackMs: 0 };
    },
    isAuditPosition(position) {
      return /^[1-9]\d{0,15}$/.test(position) && Number.isSafeInteger(Number(position));
    },
  };
}

/** Append one event (callers inside a transaction get it in that transaction); throws when its id is stored already. */
export function appendAuditStatement(db: Database.Database): (event: AuditEvent, storedAt: number) => void {
  const insert = db.prepare(
    "INSERT INTO audit_events (event_id, team_id, category, time_ms, stored_at, target_id, event) VALUES (?, ?, ?, " +
      "?, ?, ?, ?)",
  );
  return (event, storedAt) => {
    const time = Date.parse(event.time);
    insert.run(
      event.id,
      event.teamId,
      event.category,
      Number.isNaN(time) ? 0 : time,
      storedAt,
      event.target?.id ?? null,
      JSON.stringify(event),
    );
  };
}
