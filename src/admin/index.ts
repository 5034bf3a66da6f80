import type { DataApi } from "../api.js";
import { type AuditAdmin, auditAdmin } from "./audit.js";
import { type CatalogAdmin, catalogAdmin } from "./catalog.js";
import { type ConnectionAdmin, connectionAdmin } from "./connections.js";
import { type DashboardAdmin, dashboardAdmin } from "./dashboards.js";
import { type HistoryAdmin, historyAdmin } from "./history.js";
import { type IdentityAdmin, identityAdmin } from "./identity.js";
import { type KeyAdmin, keyAdmin } from "./keys.js";
import { type RowsAdmin, rowsAdmin } from "./rows.js";
import { type TableAdmin, tableAdmin } from "./tables.js";
import { type WebhookAdmin, webhookAdmin } from "./webhooks.js";

export type { AuditAdmin } from "./audit.js";
export type { CatalogAdmin, ConnectionInput, ConnectionView, DatasetInput } from "./catalog.js";
export type { ChangeOptions, ListOptions, ListPage, Put } from "./change.js";
export type { ConnectionAdmin, RefreshResult } from "./connections.js";
export type { DashboardAdmin, DashboardVersionInput } from "./dashboards.js";
export type { AuditEventInput, CreditUsageInput, DashboardViewInput, HistoryAdmin, RefreshRunInput } from "./history.js";
export type { BusinessInput, IdentityAdmin, MembershipInput, SessionInfo, SessionInput, TeamInput, UserInput } from "./identity.js";
export type { ApiKeyInfo, KeyAdmin } from "./keys.js";
export type { RowsAdmin } from "./rows.js";
export type { TableAdmin, TableInput } from "./tables.js";
export type { WebhookAdmin, WebhookConnectionInfo } from "./webhooks.js";

/**
 * The host's administration functions (plain functions, not HTTP): how a
 * host hands Dataport the changes to its world while it runs. The admin
 * HTTP API (`/api/admin/v1`) calls the very same functions. Every change is
 * validated before anything is written and appends an audit event.
 */
export interface Admin
  extends IdentityAdmin,
    KeyAdmin,
    CatalogAdmin,
    RowsAdmin,
    TableAdmin,
    DashboardAdmin,
    HistoryAdmin,
    WebhookAdmin,
    ConnectionAdmin,
    AuditAdmin {}

export function createAdmin(api: Pick<DataApi, "ports" | "settings">): Admin {
  const deps = { ports: api.ports, settings: api.settings };
  return {
    ...identityAdmin(deps),
    ...keyAdmin(deps),
    ...catalogAdmin(deps),
    ...rowsAdmin(deps),
    ...tableAdmin(deps),
    ...dashboardAdmin(deps),
    ...historyAdmin(deps),
    ...webhookAdmin(api.ports, api.settings),
    ...connectionAdmin(api.ports),
    ...auditAdmin(api.ports),
  };
}
