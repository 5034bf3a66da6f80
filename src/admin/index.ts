import type { DataApi } from "../api.js";
import { type AuditAdmin, auditAdmin } from "./audit.js";
import { type ConnectionAdmin, connectionAdmin } from "./connections.js";
import { type KeyAdmin, keyAdmin } from "./keys.js";
import { type TableAdmin, tableAdmin } from "./tables.js";
import { type WebhookAdmin, webhookAdmin } from "./webhooks.js";

export type { AuditAdmin } from "./audit.js";
export type { ConnectionAdmin, RefreshResult } from "./connections.js";
export type { ApiKeyInfo, KeyAdmin } from "./keys.js";
export type { TableAdmin } from "./tables.js";
export type { WebhookAdmin, WebhookConnectionInfo } from "./webhooks.js";

/**
 * The host's administration functions (plain functions, not HTTP): what the
 * application's settings pages call. Every change is an audit event.
 */
export interface Admin extends KeyAdmin, TableAdmin, WebhookAdmin, ConnectionAdmin, AuditAdmin {}

export function createAdmin(api: Pick<DataApi, "ports" | "settings">): Admin {
  return {
    ...keyAdmin(api.ports),
    ...tableAdmin(api.ports),
    ...webhookAdmin(api.ports, api.settings),
    ...connectionAdmin(api.ports),
    ...auditAdmin(api.ports),
  };
}
