import type { SeedSpace } from "../fixture/space.js";
import type { AnalyticsStore } from "./storage/analytics.js";
import type { AuditStore } from "./storage/audit.js";
import type { CatalogStore } from "./storage/catalog.js";
import type { IdentityStore } from "./storage/identity.js";
import type { TableStore } from "./storage/tables.js";
import type { WebhookStore } from "./storage/webhooks.js";

export type {
  AnalyticsStore,
  ApiUsageRow,
  CreditUsageRow,
  DashboardUsageRow,
  DatasetUsageRow,
  DayViews,
  DayWindow,
  RefreshHistoryRow,
  SpaceObject,
  SpaceQuery,
  ViewerDayViews,
} from "./storage/analytics.js";
export type { AuditStore, StoredAuditEvent } from "./storage/audit.js";
export type { CatalogStore, RowPage, RowQuery } from "./storage/catalog.js";
export type { IdentityStore } from "./storage/identity.js";
export type { EditLogEntry, EditOp, IdempotencyClaim, RowWriteResult, StoredResponse, TableStore } from "./storage/tables.js";
export type { WebhookEndpoint, WebhookStore } from "./storage/webhooks.js";

/**
 * Everything Dataport persists. One object, split by area so each area can
 * be read (and implemented) on its own. Every method is async; every
 * guarantee a handler relies on is written on the method.
 */
export interface Storage extends IdentityStore, CatalogStore, TableStore, WebhookStore, AuditStore, AnalyticsStore {
  /**
   * Load a space into an EMPTY store, all or nothing, and return `loaded`.
   * A store that already holds a space is left as it is: `kept`.
   */
  seed(space: SeedSpace): Promise<"loaded" | "kept">;
  /**
   * One real round trip to the store (SQLite and PostgreSQL: `SELECT 1`),
   * for readiness checks. Resolves when the store can answer queries; MUST
   * reject when it cannot (closed, unreachable, out of connections). It
   * should cost no more than the cheapest query, since probes call it often.
   */
  ping(): Promise<void>;
  /** Release connections and files. */
  close(): Promise<void>;
}
