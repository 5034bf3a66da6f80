/**
 * What the endpoints answer. Plain types only (the client carries no schema
 * library), kept equal to the server's zod response schemas by a type test
 * (test/client/types.test.ts): they are the same shapes as the named schemas
 * of the OpenAPI document at `/api/v1/openapi.json`.
 */

export type Scope = "data:read" | "tables:write" | "dashboards:read" | "audit:read";
export type Role = "owner" | "admin" | "editor" | "viewer";
export type ColumnType = "string" | "number" | "boolean" | "date" | "datetime" | "json";
export type Row = Record<string, unknown>;

export interface Column {
  name: string;
  /** null: not known. */
  type: ColumnType | null;
}

/** `GET /me` for an API key. */
export interface MeApiKey {
  kind: "api-key";
  name: string;
  scopes: Scope[];
  teams: Array<{ id: string; name: string }>;
  allowlist: { datasets: string[]; connections: string[]; tables: string[] };
}

/** `GET /me` for a session token. */
export interface MeSession {
  kind: "session-token";
  teams: Array<{ id: string; name: string; isPersonal: boolean; role: Role }>;
}

export type Me = MeApiKey | MeSession;

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
    /** Rows matching the filters. */
    totalRows: number;
    returnedRows: number;
    offset: number;
    hasMore: boolean;
    columns: string[];
    columnTypes: Record<string, string | null>;
    lastUpdated: string;
    /** Pass as `cursor` for the next page; null on the last page. */
    nextCursor: string | null;
    /** Where the change feed stood when this read began: follow the changes from the FIRST page's to keep a copy. */
    changesCursor: string;
  };
}

export interface DatasetRowsQuery<R extends Row = Row> extends RowQueryOptions<R> {
  /** Rows per page (omitted: all remaining rows). */
  maxRows?: number;
  offset?: number;
  columns?: string[];
  /** Exact matches, column name to value (JSON equality). */
  filters?: Record<string, unknown>;
}

/**
 * The operators of a `where` condition on one column. Comparisons never
 * coerce (a number never matches a string); `ne`, `nin` and comparisons
 * never match a null or absent value; `eq: null` and `in` with null match them.
 */
export interface RowOperators<V = unknown> {
  eq?: V | null;
  ne?: V | null;
  gt?: number | string;
  gte?: number | string;
  lt?: number | string;
  lte?: number | string;
  /** 1 to 1000 values. */
  in?: Array<V | null>;
  nin?: Array<V | null>;
  /** true: null or absent; false: present and not null. */
  isNull?: boolean;
  contains?: string;
  startsWith?: string;
}

/** Conditions by column (ANDed), with `and` / `or` lists nested up to 4 deep (at most 100 conditions). */
export type RowWhere<R extends Row = Row> = { and?: RowWhere<R>[]; or?: RowWhere<R>[] } & {
  [K in keyof R & string]?: RowOperators<R[K]> | RowWhere<R>[];
};

/** A sort column, `-` in front for descending. */
export type SortColumn<R extends Row = Row> = (keyof R & string) | `-${keyof R & string}`;

/** `where`, `sort` and `cursor`, as both rows endpoints take them. */
export interface RowQueryOptions<R extends Row = Row> {
  where?: RowWhere<R>;
  /** At most 8 columns; nulls last both ways, ties by stored order. */
  sort?: SortColumn<R>[];
  /** `metadata.nextCursor` of the previous page (not with `offset`). */
  cursor?: string;
}

/** A download of rows: CSV (RFC 4180, header line) or NDJSON. */
export type ExportFormat = "csv" | "ndjson";

export interface ConnectionQuery {
  /** Rows per page, 1 to 1000 (default 100). */
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

/** A tabular query result (`format=json`, the default). */
export interface ConnectionQueryRows<R extends Row = Row> {
  success: boolean;
  data: R[];
  cached: boolean;
  /** The upstream failed or was throttled; this is the last good result. */
  stale?: true;
  metadata: {
    connectionId: string;
    connectionName: string;
    datasetId: string;
    datasetName: string;
    /** The connection type: memory, postgres, arcgis or a host's own. */
    sourceType: string;
    returnedRows: number;
    offset: number;
    limit: number;
    /** Rows beyond `offset + returnedRows` may exist. */
    hasMore: boolean;
    columns: string[];
    orderBy: string | null;
    orderDirection: "ASC" | "DESC";
    /** When the upstream answered (earlier than now when cached or stale). */
    fetchedAt: string;
  };
}

/** The upstream's GeoJSON FeatureCollection, untouched. */
export interface FeatureCollection {
  features: unknown[];
  [key: string]: unknown;
}

/** A spatial query result (`format=geojson`). */
export interface ConnectionQueryGeoJson {
  success: boolean;
  geojson: FeatureCollection;
  metadata: {
    connectionId: string;
    datasetId: string;
    sourceType: string;
    /** The upstream capped the answer at its record count: more features exist. */
    truncated: boolean;
  };
  cached: boolean;
  stale?: true;
}

export type ConnectionQueryResult = ConnectionQueryRows | ConnectionQueryGeoJson;

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

export interface ViewTotals {
  views: number;
  /** Distinct visitors summed over the days. */
  uniqueVisitorsByDay: number;
}

/** `by=day` (the default): every day of the window, zeros included. */
export interface DashboardViewsByDay {
  dashboardId: string;
  name: string;
  days: number;
  totals: ViewTotals;
  series: Array<{ day: string; views: number; uniqueVisitors: number }>;
}

/** `by=viewer`: rows with views only; `viewerId` null for an anonymous visitor. */
export interface DashboardViewsByViewer {
  dashboardId: string;
  name: string;
  days: number;
  by: "viewer";
  totals: ViewTotals;
  series: Array<{ day: string; viewerId: string | null; viewer: string; views: number }>;
}

export type DashboardViews = DashboardViewsByDay | DashboardViewsByViewer;

export type SpaceObjectName =
  "dashboard-usage" | "refresh-history" | "credit-usage" | "api-usage" | "dataset-usage" | "webhook-deliveries";

export interface SpaceObject {
  object: SpaceObjectName;
  days: number;
  columns: Column[];
  rows: Row[];
}

/** The OpenAPI document's name for `SpaceObject`. */
export type SpaceObjectPage = SpaceObject;

/** A stored input-table row: column values plus the reserved fields. */
export interface TableRow {
  _id: string;
  _createdAt: string;
  _updatedAt: string;
  [column: string]: unknown;
}

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
    /** Pass as `cursor` for the next page; null on the last page. */
    nextCursor: string | null;
    /** Where the change feed stood when this read began: follow the changes from the FIRST page's to keep a copy. */
    changesCursor: string;
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

export type Actor =
  | { type: "api-key"; id: string; name: string }
  | { type: "user"; id: string; email: string }
  | { type: "system"; id: string; name: string };

/** An audit event as its writer stored it (`format=raw`). */
export interface AuditEvent {
  id: string;
  teamId: string;
  /** The writer's timestamp (ISO 8601). */
  time: string;
  category: "audit" | "data_access" | "error";
  action: string;
  actor: Actor | null;
  target: { type: string; id: string } | null;
  /** success, failure or the writer's own word. */
  outcome: string;
  ip: string | null;
  userAgent: string | null;
  details?: Record<string, unknown>;
}

/** An audit event as OCSF 1.3.0 API Activity, class 6003 (`format=ocsf`, the default). */
export interface OcsfApiActivity {
  class_uid: 6003;
  class_name: "API Activity";
  category_uid: 6;
  category_name: "Application Activity";
  activity_id: 1 | 2 | 3 | 4 | 99;
  activity_name: "Create" | "Read" | "Update" | "Delete" | "Other";
  type_uid: number;
  type_name: string;
  /** Epoch milliseconds (the writer's timestamp). */
  time: number;
  severity_id: 1 | 2 | 3;
  severity: "Informational" | "Low" | "Medium";
  status_id: 1 | 2 | 99;
  status: "Success" | "Failure" | "Other";
  status_detail?: string;
  message: string;
  actor: {
    app_name: string;
    user?: { uid: string; name: string; email_addr?: string; type_id: 1 | 3 | 99; type: string };
  };
  api: { operation: string; service: { name: string }; request?: { uid: string } };
  /** The client address; absent when the event has none. */
  src_endpoint?: { ip: string };
  http_request?: { user_agent: string };
  resources?: Array<{ uid: string; type: string }>;
  metadata: {
    version: "1.3.0";
    product: { name: string; vendor_name: string };
    uid: string;
    original_time: string;
    /** Epoch milliseconds at which the event was stored (a seeded event: its own time); absent when unknown. */
    logged_time?: number;
    tenant_uid: string;
  };
  /** The raw stored event. */
  unmapped: Record<string, unknown>;
}

export type AuditFeedEvent = OcsfApiActivity | AuditEvent;

export interface AuditPage<E = AuditFeedEvent> {
  events: E[];
  /** Opaque: send it back to read on. */
  cursor: string;
  hasMore: boolean;
  /** Events stored less than this long ago are held back; polling faster gains nothing. */
  lagSeconds: number;
}

/** One change of a dataset's or input table's rows (docs/changes.md). */
export type Change =
  | { op: "insert"; rowId: string | null; row: Record<string, unknown>; at: string }
  | { op: "update"; rowId: string; row: Record<string, unknown>; at: string }
  | { op: "delete"; rowId: string; at: string }
  | { op: "trim"; upTo: string; at: string }
  | { op: "reset"; at: string };

export interface ChangesPage {
  changes: Change[];
  /** Opaque: send it back to read on (an empty page returns the cursor sent). */
  cursor: string;
  hasMore: boolean;
  /** How far behind the present the feed reads. */
  lagSeconds: number;
}

export interface ChangesQuery {
  /** From a changes page, or a rows read's `metadata.changesCursor`; absent: the oldest change kept. */
  cursor?: string;
  /** At most this many changes (1–1000, default 200). */
  limit?: number;
  /** Seconds (0–30) the server holds the request while no change is ready. */
  wait?: number;
}

export interface FollowOptions {
  /**
   * Where to start: a rows read's `metadata.changesCursor` (or a page's `cursor` stored earlier). Absent: the oldest
   * change kept.
   */
  cursor?: string;
  /** Changes per page (default 200). */
  limit?: number;
  /** Seconds each long-poll waits (default 25). */
  wait?: number;
  /** Ends the iteration (it returns, no error). */
  signal?: AbortSignal;
}

/** What the webhook receiver answers a delivery. */
export interface WebhookReceipt {
  ok: true;
  /** `_id` of the stored row; for a duplicate, the first delivery's row. */
  id: string;
  duplicate: boolean;
}

/** A time bucket of a column as a group key (UTC; see the aggregates guide). */
export type TimeBucket<C extends string = string> = `${"hour" | "day" | "week" | "month" | "quarter" | "year"}(${C})`;

/** A metric of an aggregate: `count` (rows), or a function of a column. */
export type AggregateMetric<C extends string = string> =
  "count" | `${"count" | "countDistinct" | "sum" | "avg" | "min" | "max"}(${C})`;

/**
 * What a metric answers: counts are numbers; `sum` and `avg` a number or null (no number); `min`/`max` any value or
 * null.
 */
export type MetricValue<M extends string> = M extends "count" | `count(${string})` | `countDistinct(${string})`
  ? number
  : M extends `sum(${string})` | `avg(${string})`
    ? number | null
    : unknown;

/** A group of an aggregate's answer: its keys, then its metrics, named as requested. */
export type AggregateGroup<K extends string = string, M extends string = string> = { [key in K]: unknown } & {
  [metric in M]: MetricValue<metric>;
};

/** What `datasets.aggregate` and `tables.aggregate` take. */
export interface AggregateOptions<K extends string = string, M extends string = string> {
  /** 0 to 4 keys: columns or time buckets (`month(ordered_on)`). Without: one group, every matching row. */
  groupBy?: readonly K[];
  /** 1 to 16 metrics (default `count`). */
  metrics?: readonly M[];
  /** The rows grouped, as for rows. */
  where?: RowWhere;
  filters?: Record<string, unknown>;
  /** Conditions on the groups: the `where` grammar over the answer's fields. */
  having?: RowWhere<Record<NoInfer<K | M>, unknown>>;
  /** Answer fields, `-` in front for descending (default: the keys ascending). */
  sort?: Array<NoInfer<K | M> | `-${NoInfer<K | M>}`>;
  /** Groups per page (default 1000, at most 10,000) and groups before the page. */
  maxRows?: number;
  offset?: number;
}

export interface AggregatePage<K extends string = string, M extends string = string> {
  success: boolean;
  data: Array<AggregateGroup<K, M>>;
  metadata: {
    datasetId: string;
    datasetName: string;
    groupBy: K[];
    metrics: M[];
    /** Rows that passed `where` and `filters`. */
    matchedRows: number;
    /** Groups that passed `having`, on every page. */
    totalGroups: number;
    returnedGroups: number;
    offset: number;
    hasMore: boolean;
    /** Every metric over every matching row (`having` aside). */
    totals: { [metric in M]: MetricValue<metric> };
    lastUpdated: string;
  };
}
