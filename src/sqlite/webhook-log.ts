import type Database from "better-sqlite3";
import { utcDay } from "../domain/days.js";
import {
  countKind,
  type DeliveryCount,
  type DeliveryDetail,
  type DeliveryLogEntry,
  type DeliveryLogQuery,
  type InboxKeep,
  type RefusalLogInput,
  type RefusalReason,
  sumCounts,
} from "../domain/webhook-inbox.js";
import type { IngestLog } from "../ports/storage/webhooks.js";
import { parseJson } from "./db.js";

/** Entries a connection gains in this process between two trims of its log (reads apply the bounds exactly meanwhile). */
const TRIM_EVERY = 64;

export type SqliteDeliveryLog = ReturnType<typeof sqliteDeliveryLog>;

interface EntryRow {
  seq: number;
  id: string;
  connection_id: string;
  received_at: string;
  outcome: DeliveryLogEntry["outcome"];
  reason: RefusalReason | null;
  status: number;
  row_id: string | null;
  detail: string;
}

/**
 * The delivery log on SQLite (webhook-inbox.md): one row per entry, its
 * detail as JSON text, and daily counters. A stored delivery's entry is
 * written inside the ingest group's transaction (`delivered`, then
 * `endBatch` writes the batch's counters); refusals arrive in batches
 * (`record`, inside the caller's transaction). Each connection's log is
 * trimmed to its bounds every TRIM_EVERY entries; reads apply the bounds
 * exactly.
 */
export function sqliteDeliveryLog(db: Database.Database) {
  const insert = db.prepare<[string, string, string, number, string, string | null, number, string | null, string]>(
    `INSERT INTO webhook_deliveries (id, connection_id, received_at, received_ms, outcome, reason, status, row_id, detail)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
  );
  const addCount = db.prepare<[string, string, string, number]>(
    `INSERT INTO webhook_delivery_counts (connection_id, day, kind, n) VALUES (?, ?, ?, ?)
     ON CONFLICT (connection_id, day, kind) DO UPDATE SET n = n + excluded.n`,
  );
  const trimStatement = db.prepare<[string, number, string, number]>(
    `DELETE FROM webhook_deliveries WHERE connection_id = ? AND (received_ms < ? OR seq <= (
       SELECT seq FROM webhook_deliveries WHERE connection_id = ? ORDER BY seq DESC LIMIT 1 OFFSET ?))`,
  );
  /** The lowest `seq` within the size bound: the `size`-th newest entry (null: fewer entries than that). */
  const floorOf = db.prepare<[string, number], { seq: number }>(
    "SELECT seq FROM webhook_deliveries WHERE connection_id = ? ORDER BY seq DESC LIMIT 1 OFFSET ?",
  );
  const one = db.prepare<[string, string, number, number], EntryRow>(
    "SELECT * FROM webhook_deliveries WHERE connection_id = ? AND id = ? AND seq >= ? AND received_ms >= ?",
  );
  const countsOf = db.prepare<[string, string, string], { connection_id: string; connection: string; day: string; kind: string; n: number }>(
    `SELECT k.connection_id, c.name AS connection, k.day, k.kind, k.n
       FROM webhook_delivery_counts k JOIN connections c ON c.id = k.connection_id
      WHERE c.team_id = ? AND k.day >= ? AND k.day <= ?`,
  );
  const lists = new Map<string, Database.Statement>();

  /** Entries per connection since its last trim in this process. */
  const sinceTrim = new Map<string, number>();
  let batchCounts: DeliveryCount[] = [];
  /** Entries per connection written by the batch under way, and the bounds they were written with. */
  let batchWrites = new Map<string, { keep: InboxKeep; n: number }>();
  const wrote = (writes: Map<string, { keep: InboxKeep; n: number }>, connectionId: string, keep: InboxKeep) => {
    const found = writes.get(connectionId);
    if (found) {
      found.n++;
      found.keep = keep;
    } else writes.set(connectionId, { keep, n: 1 });
  };

  const append = (connectionId: string, receivedAt: string, id: string, outcome: string, reason: string | null, status: number, rowId: string | null, detail: DeliveryDetail) => {
    insert.run(id, connectionId, receivedAt, Date.parse(receivedAt), outcome, reason, status, rowId, JSON.stringify(detail));
  };

  /** Trim the connections whose entries reached TRIM_EVERY. */
  const trimDue = (writes: ReadonlyMap<string, { keep: InboxKeep; n: number }>) => {
    for (const [connectionId, { keep, n: written }] of writes) {
      const n = (sinceTrim.get(connectionId) ?? 0) + written;
      if (n < TRIM_EVERY) {
        sinceTrim.set(connectionId, n);
        continue;
      }
      sinceTrim.delete(connectionId);
      trimStatement.run(connectionId, keep.afterMs, connectionId, keep.size);
    }
  };

  const seqFloor = (connectionId: string, keep: InboxKeep) => floorOf.get(connectionId, Math.max(0, keep.size - 1))?.seq ?? 0;

  function listStatement(query: DeliveryLogQuery): Database.Statement {
    const conditions = ["connection_id = @connectionId", "seq >= @floor", "received_ms >= @afterMs"];
    if (query.outcome !== undefined) conditions.push("outcome = @outcome");
    if (query.reason !== undefined) conditions.push("reason = @reason");
    if (query.since !== undefined) conditions.push("received_ms >= @since");
    if (query.until !== undefined) conditions.push("received_ms < @until");
    if (query.beforeSeq !== undefined) conditions.push("seq < @beforeSeq");
    const sql = `SELECT * FROM webhook_deliveries WHERE ${conditions.join(" AND ")} ORDER BY seq ${query.order === "newest" ? "DESC" : "ASC"} LIMIT @limit`;
    let statement = lists.get(sql);
    if (!statement) lists.set(sql, (statement = db.prepare(sql)));
    return statement;
  }

  return {
    beginBatch() {
      batchCounts = [];
      batchWrites = new Map();
    },
    /** A stored or duplicate delivery's entry, inside the ingest transaction. */
    delivered(log: IngestLog, outcome: "stored" | "duplicate", rowId: string) {
      append(log.connectionId, log.receivedAt, log.id, outcome, null, 200, rowId, log.detail);
      batchCounts.push({ connectionId: log.connectionId, day: utcDay(log.receivedAt), kind: countKind(outcome, null), n: 1 });
      wrote(batchWrites, log.connectionId, log.keep);
    },
    /** The batch's counters, once per connection, day and kind; then the trims that are due. */
    endBatch() {
      if (batchCounts.length === 0) return;
      for (const c of sumCounts(batchCounts)) addCount.run(c.connectionId, c.day, c.kind, c.n);
      trimDue(batchWrites);
    },
    /** Refusals and counters, inside the caller's transaction. */
    record(batch: { refusals: readonly RefusalLogInput[]; counts: readonly DeliveryCount[]; keep: InboxKeep }) {
      const writes = new Map<string, { keep: InboxKeep; n: number }>();
      for (const r of batch.refusals) {
        append(r.connectionId, r.receivedAt, r.id, "refused", r.reason, r.status, null, r.detail);
        wrote(writes, r.connectionId, batch.keep);
      }
      for (const c of sumCounts(batch.counts)) addCount.run(c.connectionId, c.day, c.kind, c.n);
      trimDue(writes);
    },
    list(connectionId: string, query: DeliveryLogQuery): DeliveryLogEntry[] {
      const rows = listStatement(query).all({
        connectionId,
        floor: seqFloor(connectionId, query.keep),
        afterMs: query.keep.afterMs,
        ...(query.outcome !== undefined && { outcome: query.outcome }),
        ...(query.reason !== undefined && { reason: query.reason }),
        ...(query.since !== undefined && { since: Date.parse(query.since) }),
        ...(query.until !== undefined && { until: Date.parse(query.until) }),
        ...(query.beforeSeq !== undefined && { beforeSeq: query.beforeSeq }),
        limit: query.limit,
      }) as EntryRow[];
      return rows.map(toEntry);
    },
    get(connectionId: string, deliveryId: string, keep: InboxKeep): DeliveryLogEntry | null {
      const row = one.get(connectionId, deliveryId, seqFloor(connectionId, keep), keep.afterMs);
      return row ? toEntry(row) : null;
    },
    counts(query: { teamId: string; fromDay: string; toDay: string }) {
      return countsOf.all(query.teamId, query.fromDay, query.toDay).map((r) => ({
        connectionId: r.connection_id,
        connection: r.connection,
        day: r.day,
        kind: r.kind,
        n: r.n,
      }));
    },
  };
}

function toEntry(row: EntryRow): DeliveryLogEntry {
  return {
    seq: row.seq,
    id: row.id,
    connectionId: row.connection_id,
    receivedAt: row.received_at,
    outcome: row.outcome,
    reason: row.reason,
    status: row.status,
    rowId: row.row_id,
    detail: parseJson<DeliveryDetail>(row.detail),
  };
}
