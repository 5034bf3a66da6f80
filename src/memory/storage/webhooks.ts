import { widenColumns } from "../../domain/columns.js";
import type { ConnectionRecord } from "../../domain/model.js";
import { emptyRow } from "../../domain/rows.js";
import {
  endpointFromConnection as endpointOf,
  newWebhookConfig,
  webhookConfigWith,
} from "../../domain/webhook-config.js";
import { utcDay } from "../../domain/days.js";
import { type DeliveryCount, type DeliveryLogEntry, entryMatches, type InboxKeep } from "../../domain/webhook-inbox.js";
import type { WebhookDelivery, WebhookStore } from "../../ports/storage/webhooks.js";
import { appendChange } from "./changes.js";
import { cloneJson, type DedupKeys, liveCount, type MemoryState, trimFront } from "./state.js";

/**
 * Webhook ingest on the shared state. The webhook dataset is an ordinary
 * entry of `state.datasets` / `state.datasetRows`, so the catalog serves it.
 * Every method body runs without an `await` before its last write, so each
 * call is atomic in one process.
 */
export function memoryWebhooks(state: MemoryState): WebhookStore {
  /** The webhook connection with this endpoint id and its dataset (the first one naming it), or null. */
  function lookup(endpointId: string): { connection: ConnectionRecord; datasetId: string } | null {
    for (const connection of state.connections.values()) {
      if (connection.type !== "webhook" || connection.config.endpointId !== endpointId) continue;
      const datasetId = datasetOf(state, connection.id);
      return datasetId === null ? null : { connection, datasetId };
    }
    return null;
  }

  function keysOf(datasetId: string): DedupKeys {
    let keys = state.dedupKeys.get(datasetId);
    if (!keys) {
      keys = { rowIdByKey: new Map(), keyByRowId: new Map() };
      state.dedupKeys.set(datasetId, keys);
    }
    return keys;
  }

  /** Trim to `retainRows`, recording a `trim` change stored at `storedAt` (epoch ms). */
  function trim(datasetId: string, retainRows: number, storedAt: number): void {
    const rows = state.datasetRows.get(datasetId);
    if (!rows) return;
    const excess = liveCount(state, rows) - retainRows;
    if (excess <= 0) return;
    const index = keysOf(datasetId);
    // In place, so a read under way sees the trim (see `trimmedFront`).
    let upTo = "";
    trimFront(state, rows, excess, (row) => forget(index, (upTo = row._id as string)));
    state.datasets.get(datasetId)!.rowCount = retainRows;
    appendChange(state, datasetId, storedAt, "trim", upTo);
  }

  // The delivery log: entries per connection, oldest first (each with its receipt time in ms), and the daily counters.
  const log = new Map<string, ConnectionLog>();
  /** Appends to a connection's log since its entries were last checked against the age bound. */
  let sinceAgeCheck = 0;
  const counters = new Map<string, DeliveryCount>();
  let seq = 0;

  /**
   * An entry appended, then the connection's log kept to `keep`. The entry is the store's from now on (reads answer
   * copies).
   */
  function append(entry: Omit<DeliveryLogEntry, "seq">, keep: InboxKeep): void {
    const { id, connectionId, receivedAt, outcome, reason, status, rowId, detail } = entry;
    const stored = { seq: ++seq, id, connectionId, receivedAt, outcome, reason, status, rowId, detail };
    push(stored, Date.parse(receivedAt), keep);
  }

  /** A numbered entry (received at `receivedMs`) appended, then the connection's log kept to `keep`. */
  function push(entry: DeliveryLogEntry, receivedMs: number, keep: InboxKeep): void {
    let entries = log.get(entry.connectionId);
    if (!entries) log.set(entry.connectionId, (entries = { items: [], head: 0 }));
    const { items } = entries;
    items.push({ entry, receivedMs });
    let { head } = entries;
    if (items.length - head > keep.size) head = items.length - keep.size;
    // The age bound every so many appends (reads apply it exactly).
    if (++sinceAgeCheck >= 64) {
      sinceAgeCheck = 0;
      while (head < items.length && items[head]!.receivedMs < keep.afterMs) head++;
    }
    // Dropped entries leave the array many at a time: V8 moves the whole array to drop one while the garbage
    // collector is marking.
    if (head >= 16 && head * 2 >= items.length) {
      items.splice(0, head);
      head = 0;
    }
    entries.head = head;
  }

  /** The counter `count` moved last: deliveries in a row mostly move the same one. */
  let lastCounter: DeliveryCount | null = null;

  function count(connectionId: string, day: string, kind: string, n: number): void {
    const last = lastCounter;
    if (last !== null && last.connectionId === connectionId && last.day === day && last.kind === kind) {
      last.n += n;
      return;
    }
    const key = `${connectionId}\u0000${day}\u0000${kind}`;
    let found = counters.get(key);
    if (found) found.n += n;
    else counters.set(key, (found = { connectionId, day, kind, n }));
    lastCounter = found;
  }

  /** The connection's entries within `keep`, oldest first (the store's own objects: copy before answering). */
  function kept(connectionId: string, keep: InboxKeep): DeliveryLogEntry[] {
    const entries = log.get(connectionId);
    if (!entries) return [];
    const { items, head } = entries;
    const out: DeliveryLogEntry[] = [];
    for (let i = Math.max(head, items.length - keep.size); i < items.length; i++) {
      if (items[i]!.receivedMs >= keep.afterMs) out.push(items[i]!.entry);
    }
    return out;
  }

  /** A stored or duplicate delivery's entry, in the same call as the delivery (atomic with it). */
  function logDelivery(
    input: WebhookDelivery["log"],
    outcome: "stored" | "duplicate",
    rowId: string,
    delivery: WebhookDelivery,
    receivedMs: number | null,
  ): void {
    if (!input) return;
    const { id, connectionId, receivedAt, detail } = input;
    const entry = { seq: ++seq, id, connectionId, receivedAt, outcome, reason: null, status: 200, rowId, detail };
    // The delivery's own time is parsed once for the row's change and its entry.
    const ms = receivedMs !== null && receivedAt === delivery.receivedAt ? receivedMs : Date.parse(receivedAt);
    push(entry, ms, input.keep);
    count(connectionId, utcDay(receivedAt), outcome, 1);
  }

  return {
    async getWebhookEndpoint(endpointId) {
      const found = lookup(endpointId);
      return found ? endpointOf(found.connection, found.datasetId) : null;
    },

    async ingestWebhookRow(delivery) {
      const { datasetId, dedupKey, row, retainRows, receivedAt } = delivery;
      const dataset = state.datasets.get(datasetId);
      if (!dataset) throw new Error(`unknown dataset ${datasetId}`);
      const index = keysOf(datasetId);
      if (dedupKey !== null) {
        const first = index.rowIdByKey.get(dedupKey);
        if (first !== undefined) {
          logDelivery(delivery.log, "duplicate", first, delivery, null);
          return { id: first, duplicate: true };
        }
      }
      const id = row._id as string;
      let rows = state.datasetRows.get(datasetId);
      if (!rows) state.datasetRows.set(datasetId, (rows = []));
      const stored = Object.assign(emptyRow(), row); // a copy: the caller keeps its row
      rows.push(stored);
      const storedAt = Date.parse(receivedAt);
      appendChange(state, datasetId, storedAt, "insert", id, stored);
      if (dedupKey !== null) {
        index.rowIdByKey.set(dedupKey, id);
        index.keyByRowId.set(id, dedupKey);
      }
      const widened = widenColumns(dataset.columns, delivery.columns);
      if (widened) dataset.columns = widened;
      dataset.rowCount = liveCount(state, rows);
      dataset.updatedAt = receivedAt;
      trim(datasetId, Math.max(1, retainRows), storedAt);
      logDelivery(delivery.log, "stored", id, delivery, storedAt);
      return { id, duplicate: false };
    },

    async recordWebhookDeliveries({ refusals, counts, keep }) {
      for (const r of refusals) {
        const detail = cloneJson(r.detail);
        append(
          {
            id: r.id,
            connectionId: r.connectionId,
            receivedAt: r.receivedAt,
            outcome: "refused",
            reason: r.reason,
            status: r.status,
            rowId: null,
            detail,
          },
          keep,
        );
      }
      for (const c of counts) count(c.connectionId, c.day, c.kind, c.n);
    },

    async listWebhookDeliveries(connectionId, query) {
      const entries = kept(connectionId, query.keep).filter((e) => entryMatches(e, query));
      if (query.order === "newest") entries.reverse();
      return cloneJson(entries.slice(0, query.limit));
    },

    async getWebhookDelivery(connectionId, deliveryId, keep) {
      const found = kept(connectionId, keep).find((e) => e.id === deliveryId);
      return found ? cloneJson(found) : null;
    },

    async webhookDeliveryCounts({ teamId, fromDay, toDay }) {
      const out: Array<DeliveryCount & { connection: string }> = [];
      for (const c of counters.values()) {
        const connection = state.connections.get(c.connectionId);
        if (!connection || connection.teamId !== teamId || c.day < fromDay || c.day > toDay) continue;
        out.push({ ...c, connection: connection.name });
      }
      return out;
    },

    async updateWebhookSettings(connectionId, settings) {
      const connection = state.connections.get(connectionId);
      if (!connection || connection.type !== "webhook") return null;
      const datasetId = datasetOf(state, connectionId);
      if (datasetId === null) return null;
      connection.config = webhookConfigWith(connection.config, settings);
      // The settings carry no time: the trim is stored at the store's clock.
      if (typeof settings.retainRows === "number") trim(datasetId, Math.max(1, settings.retainRows), Date.now());
      return endpointOf(connection, datasetId);
    },

    async createWebhookConnection({ connection, endpoint, dataset }) {
      if (state.connections.has(connection.id)) throw new Error(`connection ${connection.id} exists`);
      if (state.datasets.has(dataset.id) || state.tables.has(dataset.id))
        throw new Error(`dataset ${dataset.id} exists`);
      if (lookup(endpoint.endpointId)) throw new Error("endpointId is taken");
      const record: ConnectionRecord = {
        ...connection,
        type: "webhook",
        config: newWebhookConfig(endpoint),
      };
      state.connections.set(record.id, record);
      state.datasets.set(dataset.id, {
        id: dataset.id,
        teamId: connection.teamId,
        name: dataset.name,
        type: "connection",
        connectionId: connection.id,
        source: null,
        columns: [],
        rowCount: 0,
        lastRefreshedAt: null,
        updatedAt: connection.createdAt,
      });
      state.datasetRows.set(dataset.id, []);
      return endpointOf(record, dataset.id);
    },
  };
}

/** A connection's delivery log: the entries from `head` on are kept, oldest first; those before it are dropped. */
interface ConnectionLog {
  items: Array<{ entry: DeliveryLogEntry; receivedMs: number }>;
  head: number;
}

/** A trimmed row's dedup key goes with it. */
function forget(index: DedupKeys, rowId: string): void {
  const key = index.keyByRowId.get(rowId);
  if (key === undefined) return;
  index.keyByRowId.delete(rowId);
  index.rowIdByKey.delete(key);
}

function datasetOf(state: MemoryState, connectionId: string): string | null {
  for (const d of state.datasets.values()) if (d.connectionId === connectionId) return d.id;
  return null;
}
