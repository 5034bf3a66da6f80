import type { PoolClient } from "pg";
import type { AuditEvent } from "../domain/model.js";
import type { AuditStore, StoredAuditEvent } from "../ports/storage/audit.js";
import type { Db } from "./db.js";
import { json, num } from "./db.js";
import { feedPositions, readToHorizon } from "./feed-horizon.js";

/**
 * The audit log on PostgreSQL. A position is the `position` column, drawn
 * by the column's default from the log's sequence after the writing
 * transaction registered under the feed (`feed-horizon.ts`): a read returns
 * only positions below the feed's horizon, so an event that commits late can
 * never appear before a position already handed out, and only Dataport's own
 * open appends to this log hold a read back. Pages are keyset reads on the
 * primary key, so their cost does not grow with the log. Events stored before
 * migration 9 were positioned by (xid, seq); a cursor of that form
 * (`<xid>.<seq>`) continues after the same event.
 */
export function postgresAudit(db: Db, options: { visibilityWaitMs?: number } = {}): AuditStore {
  const { t } = db;
  const waitMs = options.visibilityWaitMs ?? 50;
  const feed = feedPositions(db, "audit_positions");
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
      // One statement, one transaction: positions are drawn after the sort, so they follow the events' order.
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
      if (query.teamIds.length === 0 || query.categories.length === 0 || query.limit <= 0)
        return { events: [], hasMore: false };
      const after = query.after === null ? "0" : await positionOf(query.after);
      const since = query.since === null ? null : Date.parse(query.since);
      const { teamIds, categories, limit, storedBefore } = query;
      const params: unknown[] = [[...teamIds], [...categories], after, limit + 1, storedBefore, null];
      let where = "team_id = any($1) and category = any($2) and position > $3 and position < (select below from bound)";
      if (since !== null && Number.isFinite(since)) where += ` and time_ms >= $${params.push(since)}`;
      // The read ends at the feed's horizon ($6) or at the first event after `after` stored later than
      // `storedBefore`, of ANY team or category, whichever comes first. Only recent events can be past
      // `storedBefore`, so that search goes through the stored_at index.
      const sql = `with recent as materialized (select position from ${t("audit_events")} where stored_at > $5),
        bound as (select least($6::bigint, (select min(position) from recent where position > $3)) as below)
        select position::text as position_text, stored_at, event from ${t("audit_events")}
         where ${where} order by position limit $4`;
      // The text form has its own name: ORDER BY resolves a bare name to an output column first, and
      // positions sorted as text put "10" before "9".
      // A committed event can sit behind an append still open; wait briefly for such short ones to finish.
      const { page, heldBackMs } = await readToHorizon(feed, null, waitMs, async (below) => {
        params[5] = below;
        const rows = await db.query<AuditRow>(sql, params);
        return { rows, full: rows.length > query.limit };
      });
      const events = page.rows.slice(0, query.limit).map((row): StoredAuditEvent => ({
        position: row.position_text,
        storedAt: num(row.stored_at),
        event: row.event,
      }));
      return heldBackMs > 0 ? { events, hasMore: page.full, heldBackMs } : { events, hasMore: page.full };
    },
    async auditHorizon() {
      const horizon = await feed.horizon();
      return { heldBackMs: horizon.held ? horizon.heldBackMs : 0 };
    },
    isAuditPosition(position) {
      return parsePosition(position) !== null;
    },
  };

  /** A cursor's position: as it is, or, for the (xid, seq) of an event from before migration 9, that event's. */
  async function positionOf(text: string): Promise<string> {
    const parsed = parsePosition(text);
    if (parsed === null) throw new RangeError("not an audit position");
    if (typeof parsed === "string") return parsed;
    const [row] = await db.query<{ position: string }>(
      `select coalesce((select position from ${t("audit_events")}
                         where xid is not null and (xid, seq) <= ($1::xid8, $2::bigint)
                         order by xid desc, seq desc limit 1), 0)::text as position`,
      [parsed.xid, parsed.seq],
    );
    return row?.position ?? "0";
  }
}

interface AuditRow {
  position_text: string;
  stored_at: string;
  event: AuditEvent;
}

/** Store one event in the transaction of `client` (or on its own through the pool). */
export async function appendAudit(
  client: PoolClient | Db["pool"],
  t: Db["t"],
  event: AuditEvent,
  storedAt: number,
): Promise<void> {
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

/** A position (decimal), or the `<xid>.<seq>` of an event stored before migration 9; null when neither. */
function parsePosition(position: string): string | { xid: string; seq: string } | null {
  if (/^[1-9]\d{0,18}$/.test(position)) return BigInt(position) <= MAX_I64 ? position : null;
  const match = /^(0|[1-9]\d{0,19})\.([1-9]\d{0,18})$/.exec(position);
  if (!match) return null;
  const [, xid, seq] = match as unknown as [string, string, string];
  if (BigInt(xid) > MAX_U64 || BigInt(seq) > MAX_I64) return null;
  return { xid, seq };
}
