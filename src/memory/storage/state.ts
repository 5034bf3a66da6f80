import type {
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
  SessionRecord,
  TableRecord,
  Team,
  User,
} from "../../domain/model.js";
import type { StoredAuditEvent } from "../../ports/storage/audit.js";
import type { ChangeRecord } from "../../domain/changes.js";
import type { EditLogEntry } from "../../ports/storage/tables.js";
import type { ApiUsageCounter } from "../../ports/storage/usage.js";

/**
 * An input table's rows in creation order, each with its position: given at
 * insert, kept through updates, never given again (a deleted row's
 * position stays unused), so a read continuing after a row's position
 * neither skips nor repeats a row whatever was deleted before it.
 */
export interface TableRows {
  entries: TableRowEntry[];
  /** The position of the next row inserted. */
  nextPosition: number;
}

export interface TableRowEntry {
  position: number;
  row: Row;
}

/** The dedup keys of a webhook dataset's retained rows, both ways. */
export interface DedupKeys {
  rowIdByKey: Map<string, string>;
  keyByRowId: Map<string, string>;
}

/**
 * Everything the memory store holds, on Maps and arrays. Each area module
 * (identity, credentials, catalog, tables, webhooks, audit, dashboards, usage) reads and writes its part.
 */
export interface MemoryState {
  seeded: boolean;
  businesses: Map<string, Business>;
  teams: Map<string, Team>;
  users: Map<string, User>;
  /** Memberships by user id; each list is replaced, never changed in place. */
  memberships: Map<string, Membership[]>;
  /** Sessions by id. */
  sessions: Map<string, SessionRecord>;
  sessionIdsByHash: Map<string, string>;
  apiKeys: Map<string, ApiKeyRecord>;
  apiKeyIdsByHash: Map<string, string>;
  connections: Map<string, ConnectionRecord>;
  datasets: Map<string, DatasetRecord>;
  /**
   * Rows of upload/connection datasets in stored order. Retention trims and
   * webhook deliveries change the array in place; a bulk write or refresh
   * puts a new array, so a read under way keeps the one it started on.
   */
  datasetRows: Map<string, Row[]>;
  /**
   * The position of a row array's first row: a row's absolute position is
   * its index plus this. Retention trimming the front adds to it, so a
   * streaming read survives a trim that shifts the array under it; an array
   * that replaces another starts after it (a replace: after its last row;
   * an append: where it started), so positions only grow.
   */
  firstPositions: WeakMap<Row[], number>;
  /**
   * How many rows at the front of a row array retention has trimmed: they are no longer the dataset's (readers start
   * after them, see `liveRows`). Trimming marks them here and drops them from the array only now and then, many at a
   * time (`trimFront`): V8 moves the whole array to drop one row whenever the garbage collector is marking, and a
   * webhook dataset at its retention trims a row per delivery.
   */
  trimmedFront: WeakMap<Row[], number>;
  /** Dedup keys per webhook dataset; a key is kept exactly as long as its row. */
  dedupKeys: Map<string, DedupKeys>;
  tables: Map<string, TableRecord>;
  /** Input-table rows by table id. */
  tableRows: Map<string, TableRows>;
  /** Each input table's edit log, oldest first. */
  editLogs: Map<string, EditLogEntry[]>;
  dashboards: Map<string, DashboardRecord>;
  dashboardViews: DashboardView[];
  refreshRuns: RefreshRun[];
  creditUsage: CreditUsage[];
  /**
   * The API usage log as per-day counters, grouped by route, then credential
   * id; within a group a counter is told apart by day, team, method,
   * credential kind and name (a group holds a few, the latest day last).
   */
  apiUsage: Map<string, Map<string | null, ApiUsageCounter[]>>;
  /** Successful row reads per dataset or table id. */
  datasetReads: Map<string, { count: number; lastAt: string | null }>;
  auditLog: StoredAuditEvent[];
  /** Ids of every stored audit event: ids are unique in the log. */
  auditIds: Set<string>;
  /** The change feeds of datasets and input tables. */
  changeLog: MemoryChangeLog;
}

/**
 * A change as the memory log keeps it (`ChangeRecord`'s columns): its row is
 * the stored row itself (rows are replaced, never changed in place), and its
 * `at` is made from `storedAt` when it is read, as the SQL stores do.
 */
export interface ChangeEntry extends ChangeRecord {
  position: number;
}

/**
 * The change log of the memory store: one counter of positions for every
 * feed, and each feed's changes in position order. A write appends its
 * changes in the same synchronous step as its write (`appendChange`), so a
 * change is readable exactly when its write is, in position order: nothing
 * ever holds a read back.
 */
export interface MemoryChangeLog {
  /** The position of the last change appended (0: none yet). */
  last: number;
  feeds: Map<string, ChangeEntry[]>;
  /** Per feed, the highest position retention removed. */
  trimmedThrough: Map<string, number>;
  /** Who is told of each change appended (long-polling readers' watcher). */
  listeners: Set<(feedId: string | null) => void>;
}

export function createChangeLog(): MemoryChangeLog {
  return { last: 0, feeds: new Map(), trimmedThrough: new Map(), listeners: new Set() };
}

export function createMemoryState(): MemoryState {
  return {
    seeded: false,
    businesses: new Map(),
    teams: new Map(),
    users: new Map(),
    memberships: new Map(),
    sessions: new Map(),
    sessionIdsByHash: new Map(),
    apiKeys: new Map(),
    apiKeyIdsByHash: new Map(),
    connections: new Map(),
    datasets: new Map(),
    datasetRows: new Map(),
    firstPositions: new WeakMap(),
    trimmedFront: new WeakMap(),
    dedupKeys: new Map(),
    tables: new Map(),
    tableRows: new Map(),
    editLogs: new Map(),
    dashboards: new Map(),
    dashboardViews: [],
    refreshRuns: [],
    creditUsage: [],
    apiUsage: new Map(),
    datasetReads: new Map(),
    auditLog: [],
    auditIds: new Set(),
    changeLog: createChangeLog(),
  };
}

/** A dataset's rows (none trimmed) and the position of the first of them: a copy when retention has trimmed any. */
export function liveRows(state: MemoryState, rows: Row[]): { rows: Row[]; first: number } {
  const trimmed = state.trimmedFront.get(rows) ?? 0;
  const first = (state.firstPositions.get(rows) ?? 0) + trimmed;
  return { rows: trimmed === 0 ? rows : rows.slice(trimmed), first };
}

/** How many rows a row array holds for its dataset (those retention trimmed not counted). */
export function liveCount(state: MemoryState, rows: readonly Row[]): number {
  return rows.length - (state.trimmedFront.get(rows as Row[]) ?? 0);
}

/**
 * Trim the `n` oldest rows of a dataset's row array in place (a read under way sees it); the `_id` of each is handed
 * to `each`, oldest first. The trimmed rows leave the array only once they are a quarter of it, all at once.
 */
export function trimFront(state: MemoryState, rows: Row[], n: number, each: (row: Row) => void): void {
  const from = state.trimmedFront.get(rows) ?? 0;
  const to = from + n;
  for (let i = from; i < to; i++) each(rows[i]!);
  if (to >= 16 && to * 4 >= rows.length) {
    rows.splice(0, to);
    state.firstPositions.set(rows, (state.firstPositions.get(rows) ?? 0) + to);
    state.trimmedFront.delete(rows);
  } else {
    state.trimmedFront.set(rows, to);
  }
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
