import type * as Database from "./driver.js";
import { utcDay } from "../domain/days.js";
import {
  countKind,
  type DeliveryCount,
  detailFrom,
  detailText,
  type DeliveryLogEntry,
  type DeliveryLogQuery,
  entryMatches,
  type InboxKeep,
  type RefusalLogInput,
  refusalEntry,
  sumCounts,
} from "../domain/webhook-inbox.js";
import type { IngestLog } from "../ports/storage/webhooks.js";
import { parseJson } from "./db.js";

/**
 * Entries of one connection in one stored chunk at most: what a chunk may hold past the log's bounds until it is
 * trimmed.
 */
const CHUNK_ENTRIES = 64;

export type SqliteDeliveryLog = ReturnType<typeof sqliteDeliveryLog>;

/** An entry as a chunk holds it (the connection is the chunk's). */
type ChunkEntry = Omit<DeliveryLogEntry, "connectionId">;

/**
 * The delivery log on SQLite (webhook-inbox.md). A connection's entries are
 * numbered 1, 2, 3… (`seq`, read once per transaction under the write lock,
 * so every process on the file continues the same sequence) and stored in
 * chunks: one row per connection per transaction (at most CHUNK_ENTRIES
 * entries), so a group commit of 50 deliveries writes one log row, not 50.
 * A stored delivery's entry is written inside the ingest group's
 * transaction (`delivered`, then `endBatch`); refusals in theirs (`record`).
 * Every CHUNK_ENTRIES entries a write drops the connection's chunks wholly
 * past its bounds (so at most two chunks' worth is held past them); reads
 * apply the bounds exactly (the newest `size` seqs, none received before
 * `afterMs`).
 */
export function sqliteDeliveryLog(db: Database.Database) {
  const insertChunk = db.prepare<[string, number, number, number, number, string]>(
    "INSERT INTO webhook_deliveries (connection_id, first_seq, last_seq, first_ms, last_ms, entries) VALUES (?, ?, " +
      "?, ?, ?, ?)",
  );
  const lastSeq = db.prepare<[string], { last_seq: number }>(
    "SELECT last_seq FROM webhook_deliveries WHERE connection_id = ? ORDER BY first_seq DESC LIMIT 1",
  );
  const addCount = db.prepare<[string, string, string, number]>(
    `INSERT INTO webhook_delivery_counts (connection_id, day, kind, n) VALUES (?, ?, ?, ?)
     ON CONFLICT (connection_id, day, kind) DO UPDATE SET n = n + excluded.n`,
  );
  const trimChunks = db.prepare<[string, number, number]>(
    "DELETE FROM webhook_deliveries WHERE connection_id = ? AND (last_seq < ? OR last_ms < ?)",
  );
  /** A connection's chunks holding seqs from `floor` on, below `before`, newest first. */
  const chunksDown = db.prepare<[string, number, number], { entries: string }>(
    "SELECT entries FROM webhook_deliveries WHERE connection_id = ? AND last_seq >= ? AND first_seq < ? ORDER BY " +
      "first_seq DESC",
  );
  const countsOf = db.prepare<
    [string, string, string],
    { connection_id: string; connection: string; day: string; kind: string; n: number }
  >(
    `SELECT k.connection_id, c.name AS connection, k.day, k.kind, k.n
       FROM webhook_delivery_counts k JOIN connections c ON c.id = k.connection_id
      WHERE c.team_id = ? AND k.day >= ? AND k.day <= ?`,
  );

  /** What the transaction under way appends, per connection: its entries (JSON text each) and bounds. */
  interface Pending {
    entries: string[];
    firstSeq: number;
    /** The earliest and latest `receivedAt` (ISO instants in UTC, which compare as text). */
    firstAt: string;
    lastAt: string;
    keep: InboxKeep;
  }
  let pending = new Map<string, Pending>();
  /** The batch's counters by connection, day and kind. */
  let batchCounts = new Map<string, DeliveryCount>();
  /** The counter `delivered` moved last, and what it was moved for: deliveries in a row mostly move the same one. */
  let lastCount: { counter: DeliveryCount; receivedAt: string; outcome: string } | null = null;

  function add(connectionId: string, keep: InboxKeep, entry: Omit<ChunkEntry, "seq">): void {
    let at = pending.get(connectionId);
    if (!at) {
      at = {
        entries: [],
        firstSeq: (lastSeq.get(connectionId)?.last_seq ?? 0) + 1,
        firstAt: entry.receivedAt,
        lastAt: entry.receivedAt,
        keep,
      };
      pending.set(connectionId, at);
    }
    if (entry.receivedAt < at.firstAt) at.firstAt = entry.receivedAt;
    if (entry.receivedAt > at.lastAt) at.lastAt = entry.receivedAt;
    at.keep = keep;
    const seq = at.firstSeq + at.entries.length;
    // The entry's JSON as JSON.stringify writes it, the detail last (the one part of any size).
    at.entries.push(
      `{"seq":${seq},"id":${JSON.stringify(entry.id)},"receivedAt":${JSON.stringify(entry.receivedAt)},"outcome":"${entry.outcome}",` +
        `"reason":${entry.reason === null ? "null" : `"${entry.reason}"`},"status":${entry.status},"rowId":${entry.rowId === null ? "null" : JSON.stringify(entry.rowId)},` +
        `"detail":${detailText(entry.detail)}}`,
    );
  }

  /** The pending chunks written, in rows of CHUNK_ENTRIES at most; each connection's chunks past its bounds dropped. */
  function writePending(): void {
    for (const [connectionId, at] of pending) {
      for (let from = 0; from < at.entries.length; from += CHUNK_ENTRIES) {
        const part = at.entries.slice(from, from + CHUNK_ENTRIES);
        insertChunk.run(
          connectionId,
          at.firstSeq + from,
          at.firstSeq + from + part.length - 1,
          Date.parse(at.firstAt),
          Date.parse(at.lastAt),
          `[${part.join(",")}]`,
        );
      }
      // Chunks wholly past the bounds go each time the sequence crosses a multiple of CHUNK_ENTRIES.
      const next = at.firstSeq + at.entries.length;
      if (Math.floor((next - 1) / CHUNK_ENTRIES) !== Math.floor((at.firstSeq - 1) / CHUNK_ENTRIES)) {
        trimChunks.run(connectionId, next - at.keep.size, at.keep.afterMs);
      }
    }
    pending = new Map();
  }

  /** The connection's entries within `keep` and below `beforeSeq`, newest first, as long as `wanted` says. */
  function* newestFirst(
    connectionId: string,
    keep: InboxKeep,
    beforeSeq = Number.MAX_SAFE_INTEGER,
  ): Generator<DeliveryLogEntry> {
    const last = lastSeq.get(connectionId)?.last_seq;
    if (last === undefined) return;
    const floor = last - keep.size + 1;
    for (const chunk of chunksDown.iterate(connectionId, floor, beforeSeq)) {
      const entries = parseJson<ChunkEntry[]>(chunk.entries);
      for (let i = entries.length - 1; i >= 0; i--) {
        const e = entries[i]!;
        if (e.seq < floor || e.seq >= beforeSeq || Date.parse(e.receivedAt) < keep.afterMs) continue;
        yield { ...e, connectionId, detail: detailFrom(e.detail) };
      }
    }
  }

  return {
    beginBatch() {
      pending = new Map();
      batchCounts = new Map();
      lastCount = null;
    },
    /** A stored or duplicate delivery's entry, inside the ingest transaction. */
    delivered(log: IngestLog, outcome: "stored" | "duplicate", rowId: string) {
      add(log.connectionId, log.keep, {
        id: log.id,
        receivedAt: log.receivedAt,
        outcome,
        reason: null,
        status: 200,
        rowId,
        detail: log.detail,
      });
      const last = lastCount;
      // The same connection and outcome received at the same instant: the same day's counter.
      if (
        last !== null &&
        last.receivedAt === log.receivedAt &&
        last.outcome === outcome &&
        last.counter.connectionId === log.connectionId
      ) {
        last.counter.n++;
        return;
      }
      const day = utcDay(log.receivedAt);
      const key = `${log.connectionId}\u0000${day}\u0000${outcome}`;
      let counter = batchCounts.get(key);
      if (counter) counter.n++;
      else {
        counter = { connectionId: log.connectionId, day, kind: countKind(outcome, null), n: 1 };
        batchCounts.set(key, counter);
      }
      lastCount = { counter, receivedAt: log.receivedAt, outcome };
    },
    /** The batch's chunks and counters, once per connection, day and kind. */
    endBatch() {
      if (batchCounts.size === 0) return;
      writePending();
      for (const c of batchCounts.values()) addCount.run(c.connectionId, c.day, c.kind, c.n);
    },
    /** Refusals and counters, inside the caller's transaction. */
    record(batch: { refusals: readonly RefusalLogInput[]; counts: readonly DeliveryCount[]; keep: InboxKeep }) {
      pending = new Map();
      for (const r of batch.refusals) add(r.connectionId, batch.keep, refusalEntry(r));
      writePending();
      for (const c of sumCounts(batch.counts)) addCount.run(c.connectionId, c.day, c.kind, c.n);
    },
    list(connectionId: string, query: DeliveryLogQuery): DeliveryLogEntry[] {
      const { order, limit } = query;
      const matching: DeliveryLogEntry[] = [];
      for (const entry of newestFirst(connectionId, query.keep, query.beforeSeq)) {
        if (!entryMatches(entry, query)) continue;
        matching.push(entry);
        if (order === "newest" && matching.length >= limit) break;
      }
      return order === "newest" ? matching : matching.reverse().slice(0, limit);
    },
    get(connectionId: string, deliveryId: string, keep: InboxKeep): DeliveryLogEntry | null {
      for (const entry of newestFirst(connectionId, keep)) if (entry.id === deliveryId) return entry;
      return null;
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
