import type { SeedSpace } from "../fixture/space.js";
import type { AnalyticsStore, AnalyticsWrites } from "./storage/analytics.js";
import type { AuditStore } from "./storage/audit.js";
import type { CatalogStore, CatalogWrites } from "./storage/catalog.js";
import type { CredentialStore, IdentityStore, IdentityWrites, KeyWithTeamLookup } from "./storage/identity.js";
import type { TableStore, TableWrites } from "./storage/tables.js";
import type { WebhookStore } from "./storage/webhooks.js";

export type {
  AnalyticsStore,
  AnalyticsWrites,
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
export type { CatalogStore, CatalogWrites, DatasetRowsWrite, RowPage, RowQuery } from "./storage/catalog.js";
export type { CredentialStore, IdentityStore, IdentityWrites, IdPage, KeyWithTeamLookup, PutResult } from "./storage/identity.js";
export type { EditLogEntry, EditOp, IdempotencyClaim, RowWriteResult, StoredResponse, TableStore, TableWrites } from "./storage/tables.js";
export type { WebhookDelivery, WebhookEndpoint, WebhookReceipt, WebhookStore } from "./storage/webhooks.js";

/**
 * The areas of storage. Each is a contract of its own, with its own
 * conformance suite in `dataport/testing`; a host may supply any of them
 * from its own database and keep Dataport's store for the rest
 * (`mountStorage`). An area supplied without its writes is read-only: the
 * admin operations of that area answer 405.
 */
export interface StorageAreas {
  /** Businesses, teams, users, memberships. */
  identity: IdentityStore & IdentityWrites;
  /** Session tokens and API keys. */
  credentials: CredentialStore;
  /** Connections, datasets and their rows. */
  catalog: CatalogStore & CatalogWrites;
  /** Input tables, their rows, edit log and Idempotency-Key claims. */
  tables: TableStore & TableWrites;
  /** Webhook endpoints and delivered rows (de-duplication, retention). */
  webhooks: WebhookStore;
  /** The business audit feed. */
  audit: AuditStore;
  /** Dashboards, views, refresh runs, credit usage and the API usage log. */
  analytics: AnalyticsStore & AnalyticsWrites;
}

export type StorageArea = keyof StorageAreas;
export const STORAGE_AREAS: readonly StorageArea[] = ["identity", "credentials", "catalog", "tables", "webhooks", "audit", "analytics"];

/** Starting and stopping a store as a whole. */
export interface StorageLifecycle {
  /**
   * Load a space into an EMPTY store, all or nothing, and return `loaded`.
   * A store that already holds a space is left as it is: `kept`.
   */
  seed(space: SeedSpace): Promise<"loaded" | "kept">;
  /**
   * One real round trip to the store (SQLite and PostgreSQL: `SELECT 1`),
   * for readiness checks. Resolves when the store can answer queries; MUST
   * reject when it cannot (closed, unreachable, out of connections).
   */
  ping(): Promise<void>;
  /** Release connections and files. */
  close(): Promise<void>;
}

/**
 * Everything Dataport persists: every area's methods on one object, plus its
 * lifecycle. Every method returns a promise. Every guarantee a handler
 * relies on is written on the method.
 */
export interface Storage
  extends IdentityStore,
    IdentityWrites,
    CredentialStore,
    KeyWithTeamLookup,
    CatalogStore,
    CatalogWrites,
    TableStore,
    TableWrites,
    WebhookStore,
    AuditStore,
    AnalyticsStore,
    AnalyticsWrites,
    StorageLifecycle {}
