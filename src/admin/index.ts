import type { DataApi } from "../api.js";
import { type AuditAdmin, auditAdmin } from "./audit.js";
import { type KeyAdmin, keyAdmin } from "./keys.js";

export type { AuditAdmin } from "./audit.js";
export type { ApiKeyInfo, KeyAdmin } from "./keys.js";

/**
 * The host's administration functions (plain functions, not HTTP): what the
 * application's settings pages call. Every change is an audit event.
 */
export interface Admin extends KeyAdmin, AuditAdmin {}

export function createAdmin(api: Pick<DataApi, "ports" | "settings">): Admin {
  return {
    ...keyAdmin(api.ports),
    ...auditAdmin(api.ports),
  };
}
