import type {
  ApiCallRecord,
  ApiKeyRecord,
  Business,
  ConnectionRecord,
  CreditUsage,
  DashboardRecord,
  DashboardView,
  DatasetRecord,
  Membership,
  RefreshRun,
  Row,
  TableRecord,
  Team,
  User,
} from "../../domain/model.js";
import type { StoredAuditEvent } from "../../ports/storage/audit.js";

export interface ApiUsageCounter {
  day: string;
  teamId: string | null;
  method: string;
  route: string;
  credentialKind: ApiCallRecord["credentialKind"];
  credentialId: string | null;
  credentialName: string | null;
  calls: number;
  errors: number;
  serverErrors: number;
  latencySum: number;
}

/**
 * Everything the memory store holds, on Maps and arrays. Each area module
 * (identity, catalog, tables, webhooks, audit, analytics) reads and writes its part.
 */
export interface MemoryState {
  seeded: boolean;
  businesses: Map<string, Business>;
  teams: Map<string, Team>;
  users: Map<string, User>;
  memberships: Map<string, Membership[]>;
  sessions: Map<string, string>;
  apiKeys: Map<string, ApiKeyRecord>;
  apiKeyIdsByHash: Map<string, string>;
  connections: Map<string, ConnectionRecord>;
  datasets: Map<string, DatasetRecord>;
  /** Rows of upload/connection datasets in stored order. */
  datasetRows: Map<string, Row[]>;
  /**
   * Rows trimmed from the front of `datasetRows` so far (retention): a row's
   * absolute position is its index plus this, so a streaming read survives a
   * trim that shifts the array under it.
   */
  datasetRowsTrimmed: Map<string, number>;
  tables: Map<string, TableRecord>;
  /** Input-table rows by table id, in creation order. */
  tableRows: Map<string, Row[]>;
  dashboards: Map<string, DashboardRecord>;
  dashboardViews: DashboardView[];
  refreshRuns: RefreshRun[];
  creditUsage: CreditUsage[];
  /** The API usage log as per-day counters, keyed by (day, team, method, route, credential). */
  apiUsage: Map<string, ApiUsageCounter>;
  /** Successful row reads per dataset or table id. */
  datasetReads: Map<string, { count: number; lastAt: string | null }>;
  auditLog: StoredAuditEvent[];
}

export function createMemoryState(): MemoryState {
  return {
    seeded: false,
    businesses: new Map(),
    teams: new Map(),
    users: new Map(),
    memberships: new Map(),
    sessions: new Map(),
    apiKeys: new Map(),
    apiKeyIdsByHash: new Map(),
    connections: new Map(),
    datasets: new Map(),
    datasetRows: new Map(),
    datasetRowsTrimmed: new Map(),
    tables: new Map(),
    tableRows: new Map(),
    dashboards: new Map(),
    dashboardViews: [],
    refreshRuns: [],
    creditUsage: [],
    apiUsage: new Map(),
    datasetReads: new Map(),
    auditLog: [],
  };
}

/** A deep copy of a JSON value, so callers never hold references into the store. */
export function cloneJson<T>(value: T): T {
  return structuredClone(value);
}

/** A deep copy, deeply frozen: safe to hand out without further copies. */
export function frozenCopy<T>(value: T): T {
  return deepFreeze(structuredClone(value));
}

function deepFreeze<T>(value: T): T {
  if (value !== null && typeof value === "object" && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const key of Object.keys(value)) deepFreeze((value as Record<string, unknown>)[key]);
  }
  return value;
}
