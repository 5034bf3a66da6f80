import type { AuditStore } from "../../ports/storage/audit.js";
import { cloneJson, type MemoryState } from "./state.js";

/** Positions are 1-based indexes into the append-only log, as decimal strings. */
export function memoryAudit(state: MemoryState): AuditStore {
  return {
    async appendAuditEvent(event, storedAt) {
      state.auditLog.push({ position: String(state.auditLog.length + 1), storedAt, event: cloneJson(event) });
    },
    async readAuditEvents() {
      // TODO(issue 7): the feed.
      throw new Error("the audit feed is not implemented yet");
    },
    isAuditPosition(position) {
      return /^[1-9]\d{0,15}$/.test(position);
    },
  };
}
