import type { PoolClient } from "pg";
import { utcDay } from "../domain/days.js";
import {
  countKind,
  type DeliveryCount,
  type DeliveryDetail,
  detailFrom,
  detailText,
  type DeliveryLogEntry,
  type DeliveryLogQuery,
  type InboxKeep,
  type RefusalLogInput,
  type RefusalReason,
  sumCounts,
} from "../domain/webhook-inbox.js";
import type { IngestLog, WebhookDelivery } from "../ports/storage/webhooks.js";
import { type Db, num } from "./db.js";

/**
 * Entries a connection gains on this instance between two trims of its log (reads apply the bounds exactly meanwhile).
 */
const TRIM_EVERY = 64;

interface EntryRow {
  seq: string;
  id: string;
  connection_id: string;
  received_at: string;
  outcome: DeliveryLogEntry["outcome"];
  reason: RefusalReason | null;
  status: number;
  row_id: string | null;
  detail: DeliveryDetail;
}

/**
 * The delivery log on PostgreSQL (webhook-inbox.md). A stored delivery's
 * entry and counter are written by the statement that stores it (the fast
 * path's CTEs, `fastLogSql`) or in its transaction (`logDelivered`): no
 * round trip of their own. Refusals arrive in batches and take one
 * statement per batch (`record`). Each connection's log is trimmed to its
 * bounds every TRIM_EVERY entries this instance writes, off the delivery's
 * path; reads apply the bounds exactly.
 */
export function postgresDeliveryLog(db: Db) {
  const { t } = db;
  const deliveries = t("webhook_deliveries");
  const counters = t("webhook_delivery_counts");
  const sinceTrim = new Map<string, number>();
  /**
   * Per connection, the count floor of this instance's last trim: every entry below it was deleted then, so the next
   * trim reads from there (from the connection's first entry, it read every entry deleted before, which stay in the
   * index until a vacuum).
   */
  const trimmedBelow = new Map<string, number>();
  const floor = (connection: string, size: string, from = "0") =>
    `coalesce((select f.seq from ${deliveries} f where f.connection_id = ${connection} and f.seq >= ${from} order by f.seq desc offset ${size} limit 1), 0)`;
  const upsertCounts = `on conflict (connection_id, day, kind) do update set n = ${counters}.n + excluded.n`;

  /**
   * Trim a connection's log when this instance wrote TRIM_EVERY entries to it since the last trim: off the path,
   * failures ignored.
   */
  function wrote(connectionId: string, keep: InboxKeep): void {
    const n = (sinceTrim.get(connectionId) ?? 0) + 1;
    if (n < TRIM_EVERY) {
      sinceTrim.set(connectionId, n);
      return;
    }
    sinceTrim.delete(connectionId);
    const from = trimmedBelow.get(connectionId) ?? 0;
    void db
      .query<{ below: string }>(
        `with f as materialized (select ${floor("$1", "$3", "$4")} as below),
              d as (delete from ${deliveries} where connection_id = $1 and seq >= $4
                      and (received_ms < $2 or seq < (select below from f)))
         select below from f`,
        [connectionId, keep.afterMs, Math.max(0, keep.size - 1), from],
      )
      .then(([row]) => {
        const below = num(row?.below ?? 0);
        if (below > (trimmedBelow.get(connectionId) ?? 0)) trimmedBelow.set(connectionId, below);
      })
      .catch(() => {});
  }

  return {
    wrote,
    /**
     * CTEs for the fast ingest statement (postgres/webhooks.ts): the entries
     * and counters of the deliveries it applies, their outcome read from its
     * `x`, `applied` and `held`. Parameters from `first`: see `fastLogParams`.
     */
    fastLogSql(first: number): string {
      return `, log_in as materialized (
         select l.id, l.connection_id, x.received_at, l.received_ms, l.detail,
                case when h.id is null then 'stored' else 'duplicate' end as outcome, coalesce(h.id, l.row_id) as row_id
           from json_to_recordset($${first}::json) as l(n bigint, id text, connection_id text, received_ms bigint, row_id text, detail json)
           join x on x.n = l.n join applied a on a.id = x.dataset_id left join held h on h.n = l.n
       ), logged as (
         insert into ${deliveries} (id, connection_id, received_at, received_ms, outcome, reason, status, row_id, detail)
         select id, connection_id, received_at, received_ms, outcome, null, 200, row_id, detail from log_in
       ), counted as (
         insert into ${counters} (connection_id, day, kind, n)
         select connection_id, left(received_at, 10), outcome, count(*) from log_in group by 1, 2, 3
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
      await client.query(
        `with logged as (
           insert into ${deliveries} (id, connection_id, received_at, received_ms, outcome, reason, status, row_id, detail)
           select id, connection_id, received_at, received_ms, outcome, null, 200, row_id, detail::json
             from unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::text[], $6::text[], $7::text[])
                    as l(id, connection_id, received_at, received_ms, outcome, row_id, detail)
         )
         insert into ${counters} (connection_id, day, kind, n)
         select * from unnest($8::text[], $9::text[], $10::text[], $11::bigint[]) ${upsertCounts}`,
        [
          decided.map((d) => d.log.id),
          decided.map((d) => d.log.connectionId),
          decided.map((d) => d.log.receivedAt),
          decided.map((d) => Date.parse(d.log.receivedAt)),
          decided.map((d) => d.outcome),
          decided.map((d) => d.rowId),
          decided.map((d) => detailText(d.log.detail)),
          ...countParams(counts),
        ],
      );
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
      await db.query(
        `with logged as (
           insert into ${deliveries} (id, connection_id, received_at, received_ms, outcome, reason, status, row_id, detail)
           select id, connection_id, received_at, received_ms, 'refused', reason, status, null, detail::json
             from unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::text[], $6::integer[], $7::text[])
                    as l(id, connection_id, received_at, received_ms, reason, status, detail)
         )
         insert into ${counters} (connection_id, day, kind, n)
         select * from unnest($8::text[], $9::text[], $10::text[], $11::bigint[]) ${upsertCounts}`,
        [
          refusals.map((r) => r.id),
          refusals.map((r) => r.connectionId),
          refusals.map((r) => r.receivedAt),
          refusals.map((r) => Date.parse(r.receivedAt)),
          refusals.map((r) => r.reason),
          refusals.map((r) => r.status),
          refusals.map((r) => detailText(r.detail)),
          ...countParams(counts),
        ],
      );
      for (const r of refusals) wrote(r.connectionId, batch.keep);
    },
    async list(connectionId: string, query: DeliveryLogQuery): Promise<DeliveryLogEntry[]> {
      const params: unknown[] = [connectionId, Math.max(0, query.keep.size - 1), query.keep.afterMs, query.limit];
      const conditions = ["connection_id = $1", `seq >= ${floor("$1", "$2")}`, "received_ms >= $3"];
      const add = (sql: (p: string) => string, value: unknown) => {
        params.push(value);
        conditions.push(sql(`$${params.length}`));
      };
      if (query.outcome !== undefined) add((p) => `outcome = ${p}`, query.outcome);
      if (query.reason !== undefined) add((p) => `reason = ${p}`, query.reason);
      if (query.since !== undefined) add((p) => `received_ms >= ${p}`, Date.parse(query.since));
      if (query.until !== undefined) add((p) => `received_ms < ${p}`, Date.parse(query.until));
      if (query.beforeSeq !== undefined) add((p) => `seq < ${p}`, query.beforeSeq);
      const rows = await db.query<EntryRow>(
        `select * from ${deliveries} where ${conditions.join(" and ")} order by seq ${query.order === "newest" ? "desc" : "asc"} limit $4`,
        params,
      );
      return rows.map(toEntry);
    },
    async get(connectionId: string, deliveryId: string, keep: InboxKeep): Promise<DeliveryLogEntry | null> {
      const [row] = await db.query<EntryRow>(
        `select * from ${deliveries} where connection_id = $1 and id = $2 and seq >= ${floor("$1", "$3")} and received_ms >= $4`,
        [connectionId, deliveryId, Math.max(0, keep.size - 1), keep.afterMs],
      );
      return row ? toEntry(row) : null;
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

export type PostgresDeliveryLog = ReturnType<typeof postgresDeliveryLog>;

function countParams(counts: readonly DeliveryCount[]): unknown[] {
  return [
    counts.map((c) => c.connectionId),
    counts.map((c) => c.day),
    counts.map((c) => c.kind),
    counts.map((c) => c.n),
  ];
}

function toEntry(row: EntryRow): DeliveryLogEntry {
  return {
    seq: num(row.seq),
    id: row.id,
    connectionId: row.connection_id,
    receivedAt: row.received_at,
    outcome: row.outcome,
    reason: row.reason,
    status: row.status,
    rowId: row.row_id,
    detail: detailFrom(row.detail),
  };
}
