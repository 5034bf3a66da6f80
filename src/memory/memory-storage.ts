import type { SeedSpace } from "../domain/seed-space.js";
import type { Storage } from "../ports/storage.js";
import { appendAuditEntry, memoryAudit } from "./storage/audit.js";
import { datasetChangeFeeds } from "../storage/change-feeds.js";
import { memoryCatalog } from "./storage/catalog.js";
import { memoryRows } from "./storage/rows.js";
import { memoryChangeFeeds } from "./storage/changes.js";
import { memoryCredentials } from "./storage/credentials.js";
import { memoryDashboards } from "./storage/dashboards.js";
import { memoryIdentity } from "./storage/identity.js";
import { cloneJson, createMemoryState, frozenCopy, type MemoryState } from "./storage/state.js";
import { memoryTables } from "./storage/tables.js";
import { memoryUsage } from "./storage/usage.js";
import { memoryWebhooks } from "./storage/webhooks.js";

export interface MemoryStorage extends Storage {
  /** Escape hatch for tests: the live state. */
  readonly state: MemoryState;
}

/** The reference store: Maps and arrays in this process. Nothing survives a restart. */
export function createMemoryStorage(): MemoryStorage {
  const state = createMemoryState();
  let closed = false;
  const identity = memoryIdentity(state);
  return {
    identity,
    credentials: { ...memoryCredentials(state), teamsFrom: identity },
    catalog: memoryCatalog(state),
    rows: { ...memoryRows(state), ...datasetChangeFeeds(memoryChangeFeeds(state)) },
    tables: memoryTables(state),
    webhooks: memoryWebhooks(state),
    audit: memoryAudit(state),
    dashboards: memoryDashboards(state),
    usage: memoryUsage(state),
    async seed(space) {
      if (state.seeded) return "kept";
      const copy = cloneJson(space);
      assertUniqueAuditIds(copy); // the one thing loading could refuse: checked before anything is loaded
      load(state, copy);
      state.seeded = true;
      return "loaded";
    },
    async ping() {
      if (closed) throw new Error("the memory store is closed");
    },
    async close() {
      closed = true;
    },
    state,
  };
}

function assertUniqueAuditIds(space: SeedSpace): void {
  const ids = new Set<string>();
  for (const { id } of space.auditEvents) {
    if (ids.has(id)) throw new Error(`audit event ${id} appears twice in the space`);
    ids.add(id);
  }
}

/** Identity records and credentials are stored frozen and handed out as they are (see memoryIdentity). */
function load(state: MemoryState, space: SeedSpace): void {
  const put = <T extends { id: string }>(map: Map<string, T>, items: T[]) =>
    items.forEach((i) => map.set(i.id, frozenCopy(i)));
  put(state.businesses, space.businesses);
  put(state.teams, space.teams);
  put(state.users, space.users);
  for (const m of space.memberships)
    state.memberships.set(m.userId, frozenCopy([...(state.memberships.get(m.userId) ?? []), m]));
  for (const s of space.sessions) {
    state.sessions.set(s.id, frozenCopy(s));
    state.sessionIdsByHash.set(s.tokenHash, s.id);
  }
  for (const k of space.apiKeys) {
    state.apiKeys.set(k.id, frozenCopy(k));
    state.apiKeyIdsByHash.set(k.tokenHash, k.id);
  }
  space.connections.forEach((c) => state.connections.set(c.id, c));
  for (const { rows, ...dataset } of space.datasets) {
    state.datasets.set(dataset.id, dataset);
    state.datasetRows.set(dataset.id, rows);
  }
  for (const { rows, ...table } of space.tables) {
    state.tables.set(table.id, table);
    const entries = rows.map((row, position) => ({ position, row }));
    state.tableRows.set(table.id, { entries, nextPosition: rows.length });
  }
  space.dashboards.forEach((d) => state.dashboards.set(d.id, d));
  state.dashboardViews.push(...space.dashboardViews);
  state.refreshRuns.push(...space.refreshRuns);
  state.creditUsage.push(...space.creditUsage);
  // Fixture events are stored in file order, all at the start of time.
  for (const event of space.auditEvents) appendAuditEntry(state, event, 0);
}
