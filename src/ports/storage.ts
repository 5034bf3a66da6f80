import type { SeedSpace } from "../domain/seed-space.js";
import type { AuditStore } from "./storage/audit.js";
import type { CatalogStore, CatalogWrites } from "./storage/catalog.js";
import type { DatasetChangeFeeds } from "./storage/changes.js";
import type { CredentialStore, KeyWithTeamLookup } from "./storage/credentials.js";
import type { DashboardStore, DashboardWrites } from "./storage/dashboards.js";
import type { IdentityStore, IdentityWrites } from "./storage/identity.js";
import type { RowStore, RowWrites } from "./storage/rows.js";
import type { TableStore, TableWrites } from "./storage/tables.js";
import type { UsageStore, UsageWrites } from "./storage/usage.js";
import type { WebhookStore } from "./storage/webhooks.js";

export type { AuditStore, StoredAuditEvent } from "./storage/audit.js";
export type { CatalogStore, CatalogWrites } from "./storage/catalog.js";
export type {
  Change,
  ChangeFeedReads,
  ChangeRetention,
  ChangesPage,
  ChangesQuery,
  DatasetChangeFeeds,
  StoredChange,
} from "./storage/changes.js";
export type { CredentialStore, KeyWithTeamLookup } from "./storage/credentials.js";
export type { DashboardStore, DashboardWrites, DayViews, ViewerDayViews } from "./storage/dashboards.js";
export type { IdentityStore, IdentityWrites, IdPage, PutResult } from "./storage/identity.js";
export type { DatasetRowsWrite, RowPage, RowQuery, RowStore, RowWrites } from "./storage/rows.js";
export type {
  EditLogEntry,
  EditOp,
  IdempotencyKeyUse,
  IdempotentOutcome,
  InsertRowInput,
  RowWriteResult,
  DeleteRowInput,
  StoredResponse,
  TableStore,
  TableWrites,
  UpdateRowInput,
} from "./storage/tables.js";
export type {
  ApiUsageRow,
  CreditUsageRow,
  DashboardUsageRow,
  DatasetUsageRow,
  RefreshHistoryRow,
  SpaceObject,
  SpaceQuery,
  UsageStore,
  UsageWrites,
} from "./storage/usage.js";
export type { WebhookDelivery, WebhookReceipt, WebhookStore } from "./storage/webhooks.js";

/**
 * What a host must implement to supply an area itself: its reads, and the
 * writes the core makes on its own (authentication, webhooks, table rows,
 * the usage log). An area's other writes — the admin functions' — may be
 * left out; the area is then read-only, and those admin operations answer
 * 405 naming it (`mountStorage`).
 */
export interface StorageAreaReads {
  identity: IdentityStore;
  credentials: CredentialStore & KeyWithTeamLookup;
  catalog: CatalogStore;
  rows: RowStore & DatasetChangeFeeds;
  tables: TableStore;
  webhooks: WebhookStore;
  audit: AuditStore;
  dashboards: DashboardStore;
  usage: UsageStore;
}

/**
 * The areas of storage, each declared once as the interfaces its stores
 * implement (`src/ports/storage/<area>.ts`), each with its own conformance
 * suite in `dataport/testing`. A host may supply any of them from its own
 * database and keep Dataport's store for the rest: mounting an area is
 * replacing one member (`mountStorage(store, { identity: hostIdentity })`).
 */
export interface StorageAreas {
  /** Businesses, teams, users, memberships. */
  identity: IdentityStore & IdentityWrites;
  /** Session tokens and API keys. */
  credentials: CredentialStore & KeyWithTeamLookup;
  /** Connections and datasets. */
  catalog: CatalogStore & CatalogWrites;
  /**
   * The rows of upload and connection datasets: reads, aggregates, refreshes and bulk writes, and their change feeds.
   */
  rows: RowStore & RowWrites & DatasetChangeFeeds;
  /** Input tables, their rows, edit log and Idempotency-Key claims. */
  tables: TableStore & TableWrites;
  /** Webhook endpoints and delivered rows (de-duplication, retention). */
  webhooks: WebhookStore;
  /** The business audit feed. */
  audit: AuditStore;
  /** Dashboards, their versions and page views. */
  dashboards: DashboardStore & DashboardWrites;
  /** The space's usage objects, refresh runs, credit usage and the API usage log. */
  usage: UsageStore & UsageWrites;
}

export type StorageArea = keyof StorageAreas;
export const STORAGE_AREAS: readonly StorageArea[] = [
  "identity",
  "credentials",
  "catalog",
  "rows",
  "tables",
  "webhooks",
  "audit",
  "dashboards",
  "usage",
];

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
 * Everything Dataport persists: its areas (`storage.catalog.getDataset(id)`)
 * and its lifecycle. Every method returns a promise. Every guarantee a
 * handler relies on is written on the method, and one holds for them all:
 *
 * **Faults.** A store that cannot reach or write its backend — the database
 * unreachable, out of connections or failing over, a connection lost, a lock
 * held past the store's own timeout, a disk full, a file read-only or
 * closed, a call past the store's deadline — MUST reject the call with an
 * `ApiError` of status 503 and code `storage_unavailable` carrying a
 * `retry-after` header (seconds; `new ApiError(503, "storage_unavailable",
 * message, { headers: { "retry-after": "1" } })`), whatever the method and
 * wherever in it the fault was met: never the driver's error (the API would
 * answer it 500), never a crash, never a wait without end. The message names
 * no host, user or statement (keep the driver's error as `cause`, for the
 * log). A rejected write wrote nothing, or — when the fault came after its
 * commit, or past the deadline while it still ran — what a retry will find
 * (an idempotent retry: the same delivery id, the same Idempotency-Key). Any
 * other failure (a broken rule of the method, a bug) is not a fault and is
 * left as it is. The store recovers alone once its backend is back. `ping`
 * rejects in its own way while the store cannot answer (readiness reports
 * it); a store that cannot fail (memory) has nothing to map. The
 * conformance suites check this clause (`ConformanceOptions.makeUnavailable`).
 */
export interface Storage extends StorageAreas, StorageLifecycle {}
