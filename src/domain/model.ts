/**
 * The records Dataport stores and serves. Timestamps are ISO 8601 strings in
 * UTC unless a field says otherwise; ids are opaque strings.
 */

export type Plan = "free" | "pro" | "team" | "business";
export type Role = "owner" | "admin" | "editor" | "viewer";
export type Scope = "data:read" | "tables:write" | "dashboards:read" | "audit:read";
export const SCOPES: readonly Scope[] = ["data:read", "tables:write", "dashboards:read", "audit:read"];

export type ColumnType = "string" | "number" | "boolean" | "date" | "datetime" | "json";
export interface Column {
  name: string;
  /** null when the type was never inferred. */
  type: ColumnType | null;
}

/** A stored row: column name to JSON value. Always a null-prototype object or a plain JSON object. */
export type Row = Record<string, unknown>;

export interface Business {
  id: string;
  name: string;
}

export interface Team {
  id: string;
  name: string;
  plan: Plan;
  businessId: string | null;
  isPersonal: boolean;
}

export interface User {
  id: string;
  email: string;
  name: string;
  businessAdmin: boolean;
}

export interface Membership {
  userId: string;
  teamId: string;
  role: Role;
}

export interface Allowlist {
  datasets: string[];
  connections: string[];
  tables: string[];
}

export interface ApiKeyRecord {
  id: string;
  name: string;
  teamId: string;
  /** Hex SHA-256 of the plaintext token. The plaintext is never stored. */
  tokenHash: string;
  createdBy: string;
  scopes: Scope[];
  allowlist: Allowlist;
  createdAt: string;
  revokedAt: string | null;
  /**
   * true once the user who created the key was deleted (admin `deleteUser`):
   * the key keeps working for its team but never again reaches what needed
   * its creator (business-wide `/audit`), even when a user with the same id
   * is created later. Absent otherwise.
   */
  creatorDeleted?: boolean;
}

export interface SessionRecord {
  /**
   * Opaque id (`sess_…`), what the admin API deletes a session by. Fixture sessions get `sess_` + the first 24 hex
   * digits of the hash.
   */
  id: string;
  /** Hex SHA-256 of the session token. */
  tokenHash: string;
  userId: string;
  /** ISO 8601; null never expires (fixture sessions). */
  expiresAt: string | null;
}

export type ConnectionType = "memory" | "postgres" | "arcgis" | "webhook" | (string & {});

export interface ConnectionRecord {
  id: string;
  teamId: string;
  name: string;
  type: ConnectionType;
  /** Type-specific settings (see the fixture format). Secrets live here too. */
  config: Record<string, unknown>;
  createdAt: string;
}

export type DatasetType = "upload" | "connection" | "input_table";

export interface DatasetRecord {
  id: string;
  teamId: string;
  name: string;
  type: DatasetType;
  connectionId: string | null;
  /** Upstream source: a table name (memory/postgres) or a layer id (arcgis); null otherwise. */
  source: string | null;
  columns: Column[];
  /**
   * Whether `columns` were declared by the host (admin `PUT /datasets/{id}`
   * with `columns`): uploads then convert values to them and refuse other
   * columns. Otherwise (absent or false) columns are inferred from the rows.
   */
  columnsDeclared?: boolean;
  rowCount: number;
  lastRefreshedAt: string | null;
  updatedAt: string;
}

/** An upload or connection dataset: a dataset of the admin API (input tables are its tables). */
export type UploadOrConnectionDataset = DatasetRecord & { type: "upload" | "connection" };

/** Whether a dataset is an upload or connection dataset, not an input table. */
export function isUploadOrConnection(dataset: DatasetRecord): dataset is UploadOrConnectionDataset {
  return dataset.type !== "input_table";
}

/** Input table metadata (the rows live in the table store). */
export interface TableRecord {
  id: string;
  teamId: string;
  name: string;
  /** Declared columns; empty means the table accepts any shape. */
  columns: Column[];
  rowCount: number;
  updatedAt: string;
}

export interface DashboardVersion {
  version: number;
  published: boolean;
  createdAt: string;
  updatedAt: string;
  publishedAt: string | null;
}

export interface DashboardRecord {
  id: string;
  teamId: string;
  name: string;
  description: string | null;
  versions: DashboardVersion[];
  /** Datasets the dashboard reads. */
  datasetIds: string[];
}

export interface DashboardView {
  dashboardId: string;
  at: string;
  visitorId: string;
  userId: string | null;
  editor: boolean;
}

export interface RefreshRun {
  datasetId: string;
  startedAt: string;
  durationMs: number;
  rowsProcessed: number;
  error: string | null;
}

export interface CreditUsage {
  teamId: string;
  at: string;
  category: string;
  credits: number;
  userId: string | null;
}

export type AuditCategory = "audit" | "data_access" | "error";
export const AUDIT_CATEGORIES: readonly AuditCategory[] = ["audit", "data_access", "error"];

export type Actor =
  | { type: "api-key"; id: string; name: string }
  | { type: "user"; id: string; email: string }
  | { type: "system"; id: string; name: string };

/**
 * A business audit event as written by its writer (the host or Dataport).
 * A type, not an interface, so it is a JSON object (`Record<string, unknown>`)
 * where a response schema says so (OCSF's `unmapped`).
 */
export type AuditEvent = {
  id: string;
  teamId: string;
  /** The writer's timestamp. May be earlier than events already stored. */
  time: string;
  category: AuditCategory;
  action: string;
  actor: Actor | null;
  target: { type: string; id: string } | null;
  outcome: "success" | "failure" | (string & {});
  ip: string | null;
  userAgent: string | null;
  details?: Record<string, unknown>;
};

/** One call to the API, recorded after it answered (the API's own usage log). */
export interface ApiCallRecord {
  at: string;
  teamId: string | null;
  credentialKind: "api-key" | "session-token" | "anonymous";
  /** Key id or user id; null when unauthenticated. */
  credentialId: string | null;
  /** Key name or user email. */
  credentialName: string | null;
  method: string;
  /** Route template, never the concrete URL: `/api/v1/datasets/:id/rows`. */
  route: string;
  /** The route's `:id` path parameter (the dataset, table, connection or dashboard called), when it has one. */
  objectId?: string | null;
  status: number;
  latencyMs: number;
}
