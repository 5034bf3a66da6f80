import type { Ports } from "../context/ports.js";
import type { ApiSettings } from "../context/settings.js";
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
import { type WebhookDeliveryAdmin, webhookDeliveryAdmin } from "./webhook-deliveries.js";

export type { AuditAdmin } from "./audit.js";
export type { CatalogAdmin, ConnectionInput, ConnectionView, DatasetInput, SigningSecretInput } from "./catalog.js";
export type { ChangeOptions, ListOptions, ListPage, Put } from "./change.js";
export type { ConnectionAdmin, RefreshResult } from "./connections.js";
export type { DashboardAdmin, DashboardVersionInput } from "./dashboards.js";
export type {
  AuditEventInput,
  CreditUsageInput,
  DashboardViewInput,
  HistoryAdmin,
  RefreshRunInput,
} from "./history.js";
export type {
  BusinessInput,
  IdentityAdmin,
  MembershipInput,
  SessionInfo,
  SessionInput,
  TeamInput,
  UserInput,
} from "./identity.js";
export type { ApiKeyInfo, KeyAdmin } from "./keys.js";
export type { RowsAdmin, UploadOptions } from "./rows.js";
export type { UploadProgress, UploadProgressOptions } from "./upload-progress.js";
/**
 * A body as it arrives, for `uploadDatasetRows`: its chunks and its media type (`application/json`,
 * `application/x-ndjson` or `text/csv`).
 */
export type { StreamBody } from "../http/types.js";
export type { TableAdmin, TableInput } from "./tables.js";
export type { WebhookAdmin, WebhookConnectionInfo, WebhookSecretOptions } from "./webhooks.js";
export type {
  WebhookDeliveryAdmin,
  WebhookDeliveryQuery,
  WebhookDeliveryRecord,
  WebhookDeliverySummary,
  WebhookReplayFilter,
  WebhookReplaySummary,
} from "./webhook-deliveries.js";

/** How `uploadDatasetRows` and `writeDatasetRows` change a dataset's rows: `replace` them or `append` to them. */
export type RowsWriteMode = Parameters<RowsAdmin["uploadDatasetRows"]>[1];

/**
 * The host's administration functions (plain functions, not HTTP): how a
 * host hands Dataport the changes to its world while it runs. The admin
 * HTTP API (`/api/admin/v1`) calls the very same functions. Every change is
 * validated before anything is written and appends an audit event.
 *
 * What a function answers follows its name:
 * - `put…` creates or replaces what the id names and answers `Put<T>`:
 *   `{ created, value }`, `created` when nothing had the id (HTTP 201, else
 *   200), `value` the object as stored (as `get…` answers it);
 * - `delete…` answers nothing (404 when there is nothing to delete);
 * - `list…` of a whole collection takes `ListOptions` and answers a
 *   `ListPage<T>`; `list…` of one owner's items (a user's memberships, a
 *   team's keys) and `tableEditLog` answer an array;
 * - every other function answers the object it read, made or changed, as
 *   stored. One that shows a secret once answers it beside the object
 *   (`createApiKey` → `{ key, token }`, `rotateWebhookSecret` →
 *   `{ connection, secret }`) or in it (`createSession`: the session with
 *   its `token`); a history batch answers its counts (`{ stored }`,
 *   `{ stored, skipped }`); `seed` answers `"loaded"` or `"kept"`.
 */
export interface Admin
  extends
    IdentityAdmin,
    KeyAdmin,
    CatalogAdmin,
    RowsAdmin,
    TableAdmin,
    DashboardAdmin,
    HistoryAdmin,
    WebhookAdmin,
    WebhookDeliveryAdmin,
    ConnectionAdmin,
    AuditAdmin {}

/** The admin functions over an API's ports and settings (`createAdmin(api)` with a `DataApi`). */
export function createAdmin(api: { ports: Ports; settings: ApiSettings }): Admin {
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
    ...webhookDeliveryAdmin(deps),
    ...connectionAdmin(api.ports),
    ...auditAdmin(api.ports),
  };
}
