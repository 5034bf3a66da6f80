import type { PoolClient } from "pg";
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
import type { IngestLog, WebhookDelivery } from "../ports/storage/webhooks.js";
import { type Db, num } from "./db.js";

/**
 * Entries a connection gains on this instance between two trims of its log (reads apply the bounds exactly meanwhile).
 */
const TRIM_EVERY = 64;

/** Entries of one connection in one stored chunk at most: what a chunk may hold past the log's bounds until trimmed. */
const CHUNK_ENTRIES = 64;

/** An entry as a chunk holds it: its seq is the chunk's `first_seq` plus its index, its connection the chunk's. */
type ChunkEntry = Omit<DeliveryLogEntry, "seq" | "connectionId">;

/**
 * The delivery log on PostgreSQL (webhook-inbox.md), stored in chunks as on
 * SQLite: one row per connection per statement (at most CHUNK_ENTRIES
 * entries each), so a group commit of 50 deliveries writes one log row, not
 * 50. A connection's entries are numbered 1, 2, 3… (`seq`) by its row in
 * `webhook_delivery_seqs`, which the writing statement bumps: the row's lock,
 * held to the commit, makes every instance on the database continue the
 * same sequence, in commit order. A stored delivery's entry and counter are
 * written by the statement that stores it (the fast path's CTEs,
 * `fastLogSql`) or in its transaction (`logDelivered`): no round trip of
 * their own. Refusals arrive in batches and take one statement per batch
 * (`record`). Each connection's chunks wholly past its bounds are dropped
 * every TRIM_EVERY entries this instance writes, off the delivery's path;
 * reads apply the bounds exactly (the newest `size` seqs, none received
 * before `afterMs`).
 */
export function postgresDeliveryLog(db: Db) {
  const { t } = db;
  const chunks = t("webhook_delivery_chunks");
  const seqs = t("webhook_delivery_seqs");
  const counters = t("webhook_delivery_counts");
  const sinceTrim = new Map<string, number>();
  /**
   * Per connection, the lowest first_seq a chunk can have after this instance's last trim (every chunk wholly below
   * its floor went then), so the next trim reads from there and not over the chunks deleted before (they stay in the
   * index until a vacuum).
   */
  const trimmedFrom = new Map<string, number>();
  const upsertCounts = `on conflict (connection_id, day, kind) do update set n = ${counters}.n + excluded.n`;

  /**
   * CTEs appending the entries of `source` (connection_id, n: their order, received_ms, entry: the entry's JSON
   * without seq): each connection's seqs drawn from its row (locked in connection order, the same in every
   * statement), its entries in chunks of CHUNK_ENTRIES at most.
   */
  const appendSql = (source: string) => `, log_seqs as (
       insert into ${seqs} (connection_id, last_seq)
       select connection_id, count(*) from ${source} group by connection_id order by connection_id
       on conflict (connection_id) do update set last_seq = ${seqs}.last_seq + excluded.last_seq
       returning connection_id, last_seq
     ), log_numbered as (
       select e.connection_id, e.received_ms, e.entry,
              s.last_seq - count(*) over (partition by e.connection_id)
                + row_number() over (partition by e.connection_id order by e.n) as seq
         from ${source} e join log_seqs s on s.connection_id = e.connection_id
     ), log_chunks as (
       insert into ${chunks} (connection_id, first_seq, last_seq, first_ms, last_ms, entries)
       select connection_id, min(seq), max(seq), min(received_ms), max(received_ms), json_agg(entry order by seq)
         from log_numbered group by connection_id, (seq - 1) / ${CHUNK_ENTRIES}
     )`;

  /**
   * Drop a connection's chunks wholly past its bounds when this instance wrote TRIM_EVERY entries to it since the
   * last trim: off the path, failures ignored.
   */
  function wrote(connectionId: string, keep: InboxKeep): void {
    const n = (sinceTrim.get(connectionId) ?? 0) + 1;
    if (n < TRIM_EVERY) {
      sinceTrim.set(connectionId, n);
      return;
    }
    sinceTrim.delete(connectionId);
    void db
      .query<{ floor: string }>(
        `with s as materialized (select last_seq - $3::bigint + 1 as floor from ${seqs} where connection_id = $1),
              d as (delete from ${chunks} c using s where c.connection_id = $1 and c.first_seq >= $4
                      and (c.last_seq < s.floor or c.last_ms < $2))
         select floor from s`,
        [connectionId, keep.afterMs, Math.max(1, keep.size), trimmedFrom.get(connectionId) ?? 0],
      )
      .then(([row]) => {
        // A chunk left holds a seq from the floor on, and at most CHUNK_ENTRIES entries.
        const from = num(row?.floor ?? 0) - CHUNK_ENTRIES + 1;
        if (from > (trimmedFrom.get(connectionId) ?? 0)) trimmedFrom.set(connectionId, from);
      })
      .catch(() => {});
  }

  /** The connection's entries within `keep` and below `beforeSeq`, newest first. */
  async function newestFirst(connectionId: string, keep: InboxKeep, beforeSeq?: number): Promise<DeliveryLogEntry[]> {
    const rows = await db.query<{ last: string; first_seq: string; entries: string }>(
      `select s.last_seq as last, c.first_seq, c.entries::text as entries
         from ${seqs} s join ${chunks} c on c.connection_id = s.connection_id
        where s.connection_id = $1 and c.last_seq > s.last_seq - $2::bigint and c.last_ms >= $3 and c.first_seq < $4
        order by c.first_seq desc`,
      [connectionId, Math.max(1, keep.size), keep.afterMs, beforeSeq ?? Number.MAX_SAFE_INTEGER],
    );
    const out: DeliveryLogEntry[] = [];
    for (const row of rows) {
      const floor = num(row.last) - keep.size + 1;
      const first = num(row.first_seq);
      const entries = JSON.parse(row.entries) as ChunkEntry[];
      for (let i = entries.length - 1; i >= 0; i--) {
        const e = entries[i]!;
        const seq = first + i;
        if (seq < floor || (beforeSeq !== undefined && seq >= beforeSeq)) continue;
        if (Date.parse(e.receivedAt) < keep.afterMs) continue;
        out.push({
          seq,
          id: e.id,
          connectionId,
          receivedAt: e.receivedAt,
          outcome: e.outcome,
          reason: e.reason,
          status: e.status,
          rowId: e.rowId,
          detail: detailFrom(e.detail),
        });
      }
    }
    return out;
  }

  /** The statement appending entries given as JSON texts, with their counters. */
  const appendEntriesSql = `with log_in as (
       select connection_id, n, received_ms, entry::json as entry
         from unnest($1::text[], $2::bigint[], $3::text[]) with ordinality as l(connection_id, received_ms, entry, n)
     )${appendSql("log_in")}
     insert into ${counters} (connection_id, day, kind, n)
     select * from unnest($4::text[], $5::text[], $6::text[], $7::bigint[]) order by 1, 2, 3 ${upsertCounts}`;

  return {
    wrote,
    /**
     * CTEs for the fast ingest statement (postgres/webhooks.ts): the entries
     * and counters of the deliveries it applies, their outcome read from its
     * `x`, `applied` and `held`. Parameters from `first`: see `fastLogParams`.
     */
    fastLogSql(first: number): string {
      return `, log_in as materialized (
         select l.connection_id, l.n, l.received_ms, left(x.received_at, 10) as day,
                case when h.id is null then 'stored' else 'duplicate' end as outcome,
                json_build_object('id', l.id, 'receivedAt', x.received_at,
                  'outcome', case when h.id is null then 'stored' else 'duplicate' end, 'reason', null, 'status', 200,
                  'rowId', coalesce(h.id, l.row_id), 'detail', l.detail) as entry
           from json_to_recordset($${first}::json) as l(n bigint, id text, connection_id text, received_ms bigint, row_id text, detail json)
           join x on x.n = l.n join applied a on a.id = x.dataset_id left join held h on h.n = l.n
       )${appendSql("log_in")}, counted as (
         insert into ${counters} (connection_id, day, kind, n)
         select connection_id, day, outcome, count(*) from log_in group by 1, 2, 3 order by 1, 2, 3
         ${upsertCounts}
       )`;
    },
    /**
     * The one parameter of `fastLogSql`: the entries as a JSON array (one text, its details
     * written once: a text array would escape every quote of every detail again).
     */
    fastLogParams(inputs: readonly WebhookDelivery[]): unknown[] {
      const parts: string[] = [];
      inputs.forEach((input, i) => {
        const { log } = input;
        if (!log) return;
        parts.push(
          `{"n":${i + 1},"id":${JSON.stringify(log.id)},"connection_id":${JSON.stringify(log.connectionId)},` +
            `"received_ms":${Date.parse(log.receivedAt)},"row_id":${JSON.stringify(String(input.row._id ?? ""))},"detail":${detailText(log.detail)}}`,
        );
      });
      return [`[${parts.join(",")}]`];
    },
    /** The entries and counters of deliveries the transaction path decided, in its transaction. */
    async logDelivered(
      client: PoolClient,
      decided: ReadonlyArray<{ log: IngestLog; outcome: "stored" | "duplicate"; rowId: string }>,
    ): Promise<void> {
      if (decided.length === 0) return;
      const counts = sumCounts(
        decided.map((d) => ({
          connectionId: d.log.connectionId,
          day: utcDay(d.log.receivedAt),
          kind: countKind(d.outcome, null),
          n: 1,
        })),
      );
      await client.query(appendEntriesSql, [
        decided.map((d) => d.log.connectionId),
        decided.map((d) => Date.parse(d.log.receivedAt)),
        decided.map((d) =>
          entryText({
            id: d.log.id,
            receivedAt: d.log.receivedAt,
            outcome: d.outcome,
            reason: null,
            status: 200,
            rowId: d.rowId,
            detail: d.log.detail,
          }),
        ),
        ...countParams(counts),
      ]);
    },
    /** Refusals and counters in one statement. */
    async record(batch: {
      refusals: readonly RefusalLogInput[];
      counts: readonly DeliveryCount[];
      keep: InboxKeep;
    }): Promise<void> {
      const { refusals } = batch;
      const counts = sumCounts(batch.counts);
      if (refusals.length === 0 && counts.length === 0) return;
      await db.query(appendEntriesSql, [
        refusals.map((r) => r.connectionId),
        refusals.map((r) => Date.parse(r.receivedAt)),
        refusals.map((r) => entryText(refusalEntry(r))),
        ...countParams(counts),
      ]);
      for (const r of refusals) wrote(r.connectionId, batch.keep);
    },
    async list(connectionId: string, query: DeliveryLogQuery): Promise<DeliveryLogEntry[]> {
      const { order, limit } = query;
      const matching: DeliveryLogEntry[] = [];
      for (const entry of await newestFirst(connectionId, query.keep, query.beforeSeq)) {
        if (!entryMatches(entry, query)) continue;
        matching.push(entry);
        if (order === "newest" && matching.length >= limit) break;
      }
      return order === "newest" ? matching : matching.reverse().slice(0, limit);
    },
    async get(connectionId: string, deliveryId: string, keep: InboxKeep): Promise<DeliveryLogEntry | null> {
      for (const entry of await newestFirst(connectionId, keep)) if (entry.id === deliveryId) return entry;
      return null;
    },
    async counts(query: {
      teamId: string;
      fromDay: string;
      toDay: string;
    }): Promise<Array<DeliveryCount & { connection: string }>> {
      const rows = await db.query<{ connection_id: string; connection: string; day: string; kind: string; n: string }>(
        `select k.connection_id, c.name as connection, k.day, k.kind, k.n
           from ${counters} k join ${t("connections")} c on c.id = k.connection_id
          where c.team_id = $1 and k.day >= $2 and k.day <= $3`,
        [query.teamId, query.fromDay, query.toDay],
      );
      return rows.map((r) => ({
        connectionId: r.connection_id,
        connection: r.connection,
        day: r.day,
        kind: r.kind,
        n: num(r.n),
      }));
    },
  };
}

/** An entry's JSON as a chunk holds it (no seq, no connection), the detail last (the one part of any size). */
function entryText(entry: ChunkEntry): string {
  return (
    `{"id":${JSON.stringify(entry.id)},"receivedAt":${JSON.stringify(entry.receivedAt)},"outcome":"${entry.outcome}",` +
    `"reason":${entry.reason === null ? "null" : `"${entry.reason}"`},"status":${entry.status},` +
    `"rowId":${entry.rowId === null ? "null" : JSON.stringify(entry.rowId)},"detail":${detailText(entry.detail)}}`
  );
}

export type PostgresDeliveryLog = ReturnType<typeof postgresDeliveryLog>;

function countParams(counts: readonly DeliveryCount[]): unknown[] {
  return [
    counts.map((c) => c.connectionId),
    counts.map((c) => c.day),
    counts.map((c) => c.kind),
    counts.map((c) => c.n),
  ];
}
