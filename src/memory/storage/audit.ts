import type { AuditEvent } from "../../domain/model.js";
import type { AuditStore, StoredAuditEvent } from "../../ports/storage/audit.js";
import { cloneJson, type MemoryState } from "./state.js";

/**
 * Positions are 1-based decimal strings in insertion order. The log is an
 * append-only array whose positions increase strictly, so a keyset read finds
 * its start by binary search, whatever was trimmed from the front.
 */
export function memoryAudit(state: MemoryState): AuditStore {
  return {
    async appendAuditEvent(event, storedAt) {
      appendAuditEntry(state, event, storedAt);
    },

    async appendAuditEvents(events, storedAt) {
      const copies = events.map(cloneJson);
      let stored = 0;
      for (const event of copies) {
        // In order: an id met earlier in this batch is stored by now, so it is skipped too.
        if (state.auditIds.has(event.id)) continue;
        pushEntry(state, event, storedAt);
        stored++;
      }
      return stored;
    },

    async readAuditEvents({ teamIds, categories, after, since, storedBefore, limit }) {
      const teams = new Set(teamIds);
      const wanted = new Set(categories);
      const sinceMs = since === null ? null : Date.parse(since);
      const log = state.auditLog;
      const events: StoredAuditEvent[] = [];
      let hasMore = false;
      for (let i = firstIndexAfter(log, after); i < log.length; i++) {
        const entry = log[i]!;
        // The horizon is a prefix of positions: stop at the first young event, matching or not.
        if (entry.storedAt > storedBefore) break;
        const { event } = entry;
        if (!teams.has(event.teamId) || !wanted.has(event.category)) continue;
        if (sinceMs !== null && !(Date.parse(event.time) >= sinceMs)) continue;
        if (events.length === limit) {
          hasMore = true;
          break;
        }
        events.push(cloneJson(entry));
      }
      return { events, hasMore };
    },

    async auditHorizon() {
      // An append is readable the moment it is stored, in position order: nothing ever holds a read back.
      return { heldBackMs: 0 };
    },

    isAuditPosition(position) {
      return POSITION.test(position);
    },
  };
}

const POSITION = /^[1-9]\d{0,15}$/;

/**
 * Append one event at the next position: the only way single events enter
 * the memory log. Other areas of the memory store (table writes) call it to
 * record their events in the same step as their write, after checking the
 * id with `assertNewAuditId` before they change anything.
 */
export function appendAuditEntry(state: MemoryState, event: AuditEvent, storedAt: number): void {
  assertNewAuditId(state, event.id);
  pushEntry(state, cloneJson(event), storedAt);
}

/** Event ids are unique in the log: throws when this one is stored already. */
export function assertNewAuditId(state: MemoryState, id: string): void {
  if (state.auditIds.has(id)) throw new Error(`audit event ${id} is already stored`);
}

/** Store an event (already copied, its id checked) at the next position. */
function pushEntry(state: MemoryState, event: AuditEvent, storedAt: number): void {
  const last = state.auditLog.at(-1);
  state.auditLog.push({ position: String(last ? Number(last.position) + 1 : 1), storedAt, event });
  state.auditIds.add(event.id);
}

/** Index of the first entry whose position is after `after` (binary search; positions increase strictly). */
function firstIndexAfter(log: readonly StoredAuditEvent[], after: string | null): number {
  if (after === null) return 0;
  const target = Number(after);
  let lo = 0;
  let hi = log.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (Number(log[mid]!.position) <= target) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}
