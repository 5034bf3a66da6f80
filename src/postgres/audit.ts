import type { PoolClient } from "pg";
import type { AuditEvent } from "../domain/model.js";
import type { AuditStore, StoredAuditEvent } from "../ports/storage/audit.js";
import type { Db } from "./db.js";
import { json, num } from "./db.js";

/**
 * The audit log on PostgreSQL. A position is (xid, seq): the id of the
 * transaction that stored the event (`pg_current_xact_id()`) and a sequence
 * within the table. Transactions commit out of order, so a read returns only
 * events whose xid is below `pg_snapshot_xmin(pg_current_snapshot())` — the
 * oldest transaction still running anywhere in the cluster. Every
 * transaction below it has finished, so no event can later appear before a
 * position already handed out. Pages are keyset reads on the (xid, seq)
 * primary key, so their cost does not grow with the log.
 */
export function postgresAudit(db: Db, options: { visibilityWaitMs?: number } = {}): AuditStore {
  const { t } = db;
  const waitMs = options.visibilityWaitMs ?? 50;
  return {
    async appendAuditEvent(event, storedAt) {
      // The unique event_id makes an id already stored fail, storing nothing.
      await appendAudit(db.pool, t, event, storedAt);
    },
    async appendAuditEvents(events, storedAt) {
      // First of each id in the call; the rest is ON CONFLICT's: an id stored
      // already (or by a concurrent call, which this one waits for) is skipped.
      const byId = new Map<string, AuditEvent>();
      for (const event of events) if (!byId.has(event.id)) byId.set(event.id, event);
      const fresh = [...byId.values()];
      if (fresh.length === 0) return 0;
      // One statement, one transaction (one xid): the sequence is drawn after
      // the sort, so positions follow the events' order.
      const rows = await db.query(
        `insert into ${t("audit_events")} (team_id, category, time_ms, stored_at, event, event_id)
         select x.value ->> 'teamId', x.value ->> 'category', ($2::bigint[])[x.ord], $3, x.value, x.value ->> 'id'
           from json_array_elements($1::json) with ordinality as x(value, ord)
          order by x.ord
         on conflict (event_id) do nothing
         returning 1`,
        [json(fresh), fresh.map((e) => timeMs(e.time)), storedAt],
      );
      return rows.length;
    },
    async readAuditEvents(query) {
      if (query.teamIds.length === 0 || query.categories.length === 0 || query.limit <= 0) return { events: [], hasMore: false };
      const after = query.after === null ? null : parsePosition(query.after);
      if (query.after !== null && after === null) throw new RangeError("not an audit position");
      const since = query.since === null ? null : Date.parse(query.since);
      const params: unknown[] = [[...query.teamIds], [...query.categories], after?.xid ?? "0", after?.seq ?? "0", query.limit + 1];
      let where = `team_id = any($1) and category = any($2) and (xid, seq) > ($3::xid8, $4::bigint)`;
      if (since !== null && Number.isFinite(since)) where += ` and time_ms >= $${params.push(since)}`;
      // The horizon cuts the log as a prefix: the first event after `after`
      // stored later than `storedBefore`, of ANY team or category, ends the
      // read. Only recent events can be past the horizon, so that search
      // goes through the stored_at index.
      params.push(query.storedBefore);
      const sql = `with horizon as (select pg_snapshot_xmin(pg_current_snapshot()) as xmin),
        recent as materialized (select xid, seq from ${t("audit_events")} where stored_at > $${params.length}),
        cut as (select xid, seq from recent where (xid, seq) > ($3::xid8, $4::bigint) order by xid, seq limit 1)
        select xid::text as xid_text, seq, stored_at, event, xid < (select xmin from horizon) as visible
          from ${t("audit_events")}
         where ${where} and ((select count(*) from cut) = 0 or (xid, seq) < (select xid, seq from cut))
         order by ${t("audit_events")}.xid, seq limit $5`;
      // The text form has its own name: ORDER BY resolves a bare name to an
      // output column first, and xids sorted as text put "100000" before
      // "99999" — out of order each time the counter gains a digit.
      // A committed event can sit behind a transaction still running
      // elsewhere; wait briefly for such short transactions to finish.
      const deadline = Date.now() + waitMs;
      for (;;) {
        const rows = await db.query<AuditRow>(sql, params);
        const page = toPage(rows, query.limit);
        if (!page.heldBack || Date.now() >= deadline) return { events: page.events, hasMore: page.hasMore };
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
    },
    isAuditPosition(position) {
      return parsePosition(position) !== null;
    },
  };
}

interface AuditRow {
  xid_text: string;
  seq: string;
  stored_at: string;
  event: AuditEvent;
  visible: boolean;
}

/**
 * The page from rows in position order (already cut at the horizon). The
 * xid gate is a prefix too: every event of a transaction below xmin is
 * positioned before every event of one at or above it. `heldBack` says a
 * committed-or-running event stopped the page early.
 */
function toPage(rows: AuditRow[], limit: number): { events: StoredAuditEvent[]; hasMore: boolean; heldBack: boolean } {
  const events: StoredAuditEvent[] = [];
  for (const row of rows) {
    if (!row.visible) return { events, hasMore: false, heldBack: events.length < limit };
    if (events.length === limit) return { events, hasMore: true, heldBack: false };
    events.push({ position: formatPosition(row.xid_text, row.seq), storedAt: num(row.stored_at), event: row.event });
  }
  return { events, hasMore: false, heldBack: false };
}

/** Store one event in the transaction of `client` (or on its own through the pool). */
export async function appendAudit(client: PoolClient | Db["pool"], t: Db["t"], event: AuditEvent, storedAt: number): Promise<void> {
  await client.query(
    `insert into ${t("audit_events")} (team_id, category, time_ms, stored_at, event, event_id) values ($1, $2, $3, $4, $5, $6)`,
    [event.teamId, event.category, timeMs(event.time), storedAt, json(event), event.id],
  );
}

/** The writer's time as epoch ms for `since` filters; null when it is not an instant. */
export function timeMs(time: string): number | null {
  const ms = Date.parse(time);
  return Number.isFinite(ms) ? ms : null;
}

const MAX_U64 = (1n << 64n) - 1n;
const MAX_I64 = (1n << 63n) - 1n;

/** `<xid>.<seq>`, both decimal. */
function formatPosition(xid: string, seq: string): string {
  return `${xid}.${seq}`;
}

function parsePosition(position: string): { xid: string; seq: string } | null {
  const match = /^(0|[1-9]\d{0,19})\.([1-9]\d{0,18})$/.exec(position);
  if (!match) return null;
  const [, xid, seq] = match as unknown as [string, string, string];
  if (BigInt(xid) > MAX_U64 || BigInt(seq) > MAX_I64) return null;
  return { xid, seq };
}
