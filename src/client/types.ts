/**
 * What the endpoints answer, as the specification and the project's
 * decisions describe it (the OpenAPI document at `/api/v1/openapi.json` is the
 * machine-readable form). Plain types only: the client carries no schema
 * library.
 */

export type Scope = "data:read" | "tables:write" | "dashboards:read" | "audit:read";
export type ColumnType = "string" | "number" | "boolean" | "date" | "datetime" | "json";
export type Row = Record<string, unknown>;

export interface Column {
  name: string;
  type: ColumnType | null;
}

export type Me =
  | {
      kind: "api-key";
      name: string;
      scopes: string[];
      teams: Array<{ id: string; name: string }>;
      allowlist: { datasets: string[]; connections: string[]; tables: string[] };
    }
  | {
      kind: "session-token";
      teams: Array<{ id: string; name: string; isPersonal: boolean; role: string }>;
    };

export interface Dataset {
  id: string;
  name: string;
  type: "upload" | "connection" | "input_table";
  rowCount: number;
  columns: Column[];
  connectionId: string | null;
  connectionType: string | null;
  lastRefreshedAt: string | null;
  updatedAt: string;
}

export interface DatasetDetail extends Dataset {
  /** Whether rows can be changed through `/tables/{id}/rows`. */
  writable: boolean;
}

export interface DatasetRowsPage<R extends Row = Row> {
  success: boolean;
  data: R[];
  metadata: {
    datasetId: string;
    datasetName: string;
    totalRows: number;
    returnedRows: number;
    offset: number;
    hasMore: boolean;
    columns: string[];
    columnTypes: Record<string, string | null>;
    lastUpdated: string;
  };
}

export interface DatasetRowsQuery {
  /** Rows per page (omitted: all remaining rows). */
  maxRows?: number;
  offset?: number;
  columns?: string[];
  /** Exact matches, column name to value (JSON equality). */
  filters?: Record<string, unknown>;
}

export interface ConnectionQuery {
  limit?: number;
  offset?: number;
  filters?: Record<string, unknown>;
  orderBy?: string;
  orderDirection?: "ASC" | "DESC";
  datasetId?: string;
  /** `json` (tabular, the default) or `geojson` for spatial sources. */
  format?: "json" | "geojson";
  /** Upstream query parameters (GeoJSON only), passed to the source unchanged. */
  params?: Record<string, unknown>;
  /** Skip a fresh cache entry (`Cache-Control: no-cache`). */
  noCache?: boolean;
}

export interface ConnectionQueryResult {
  success: boolean;
  data?: Row[];
  geojson?: { type: "FeatureCollection"; features: unknown[]; [key: string]: unknown };
  cached: boolean;
  /** The upstream was throttled; this is the last good result. */
  stale?: boolean;
  metadata: Record<string, unknown> & { truncated?: boolean };
}

export interface Dashboard {
  id: string;
  name: string;
  description: string | null;
  published: boolean;
  publishedUrl: string | null;
  version: number;
  createdAt: string;
  updatedAt: string;
  publishedAt: string | null;
}

export interface DashboardViews {
  dashboardId: string;
  name: string;
  days: number;
  by?: "viewer";
  totals: { views: number; uniqueVisitorsByDay: number };
  series: Array<
    { day: string; views: number; uniqueVisitors: number } | { day: string; viewerId: string | null; viewer: string; views: number }
  >;
}

export type SpaceObjectName = "dashboard-usage" | "refresh-history" | "credit-usage" | "api-usage" | "dataset-usage";

export interface SpaceObject {
  object: SpaceObjectName;
  days: number;
  columns: Column[];
  rows: Row[];
}

/** A stored input-table row: column values plus the reserved fields. */
export type TableRow = Row & { _id: string; _createdAt: string; _updatedAt: string };

export interface TableRowsPage {
  success: boolean;
  data: TableRow[];
  metadata: {
    tableId: string;
    tableName: string;
    totalRows: number;
    returnedRows: number;
    offset: number;
    hasMore: boolean;
    columns: string[];
  };
}

export interface AuditQuery {
  cursor?: string;
  limit?: number;
  format?: "ocsf" | "raw";
  /** Added to the default `audit` category. */
  category?: Array<"data_access" | "error">;
  /** ISO 8601; honoured only on a first read (no cursor). */
  since?: string;
  teamId?: string;
}

export interface AuditPage<E = Record<string, unknown>> {
  events: E[];
  /** Opaque: send it back to read on. */
  cursor: string;
  hasMore: boolean;
  /** Events stored less than this long ago are held back; polling faster gains nothing. */
  lagSeconds: number;
}
