import { createHash } from "node:crypto";
import type { PoolClient } from "pg";
import { type Change, changeFromRecord, changeRecord, type ChangeOp } from "../domain/changes.js";
import type { Row } from "../domain/model.js";
import type { ChangeFeedReads, ChangeRetention, StoredChange, WatchChanges } from "../ports/storage/changes.js";
import { type Db, json, num } from "./db.js";
import { feedPositions, readToHorizon } from "./feed-horizon.js";
import { pollingWatch } from "../storage/change-feeds.js";
import type { SchemaListener } from "./listener.js";

/**
 * How often a watched log looks at its sequence for writes of any instance while it cannot hear notifications (no
 * listening connection), in ms.
 */
const WATCH_INTERVAL_MS = 250;

/** Changes one retention call removes at most, so it stays one short statement. */
const TRIM_MAX_CHANGES = 50_000;

/**
 * The change log on PostgreSQL: one mechanism with the audit log
 * (feed-horizon.ts). A change's position is drawn from `change_positions`
 * after its transaction registered under the feed's part, the dataset or
 * table id: a read of that feed returns only positions below the part's
 * horizon, so a change that commits late never appears behind a position
 * already handed out, and only Dataport's own open writes to that same
 * feed hold a read back (a busy dataset never delays a quiet one).
 */
export interface PostgresChangeLog extends ChangeFeedReads, ChangeRetention {
  /**
   * SQL of an insert of one change of `feedSql` (a parameter, e.g. `$1`),
   * with `op`, `row_id`, `row` and `stored_at` as the SQL given (a CTE or
   * a statement of its own, in the writer's transaction).
   */
  insertSql(feedSql: string, values: { op: string; rowId: string; row: string; storedAt: string }): string;
  /**
   * SQL of the next position of the feed `feedSql` (registering the transaction under it), for an INSERT … SELECT of
   * many changes.
   */
  positionSql(feedSql: string): string;
  /** Append one change in the caller's transaction (its own statement). */
  append(client: PoolClient, feedId: string, storedAt: number, change: Change): Promise<void>;
  /**
   * The log's signal: migration 13's trigger notifies the schema's changes
   * channel as a statement's changes commit, with the feed's id (one
   * notification per feed, folded within a transaction by PostgreSQL; an
   * empty payload, any feed, when a statement recorded many feeds), and the
   * store's listening connection hears it: no query while waiting, however
   * many wait. While that connection is down (not open yet, lost, being
   * reconnected every second), the sequence is looked at every
   * WATCH_INTERVAL_MS instead (one query per instance), and every waiter
   * is woken once as hearing stops and once as it starts again, so a change
   * notified while not listening is never a lost wake-up. A woken reader may
   * still find the feed held back by another open write (the handler looks
   * again shortly). Without `options.notifications`, the sequence
   * is looked at always.
   */
  watch: WatchChanges;
  /** SQL deleting a feed's changes and its retention mark (a dataset's or table's delete), `$1` the feed id. */
  forgetSql(): string[];
}

export function postgresChangeLog(
  db: Db,
  options: {
    visibilityWaitMs?: number;
    /** The store's listening connection, listening on `channel` (`changesChannel` of the schema). */
    notifications?: { listener: SchemaListener; channel: string };
  } = {},
): PostgresChangeLog {
  const { t } = db;
  const waitMs = options.visibilityWaitMs ?? 50;
  const feed = feedPositions(db, "change_positions");
  const insertSql: PostgresChangeLog["insertSql"] = (feedSql, v) =>
    `insert into ${t("changes")} (feed_id, position, op, row_id, row, stored_at)
     values (${feedSql}, ${feed.nextPositionSql(feedSql)}, ${v.op}, ${v.rowId}, ${v.row}, ${v.storedAt})`;
  const appendSql = insertSql("$1::text", { op: "$2", rowId: "$3", row: "$4::json", storedAt: "$5" });
  // The page and the feed's retention mark in ONE statement (one snapshot): retention committing between
  // two statements could otherwise remove changes the page then silently lacks.
  const pageSql = `select m.through, c.position::text as position_text, c.op, c.row_id, c.row, c.stored_at
      from (select coalesce((select trimmed_through from ${t("change_feeds")} where feed_id = $1::text), 0) as through) m
      left join lateral (
        select position, op, row_id, row, stored_at from ${t("changes")}
         where feed_id = $1 and position > coalesce($2::bigint, m.through) and position < $3::bigint
           and ($2::bigint is null or m.through <= $2::bigint)
         order by position limit $4) c on true
     order by c.position`;
  const trimSql = `with old as (
       select feed_id, position from ${t("changes")} where stored_at < $1 limit ${TRIM_MAX_CHANGES}
     ), removed as (
       delete from ${t("changes")} c using old where c.feed_id = old.feed_id and c.position = old.position
       returning c.feed_id, c.position
     )
     insert into ${t("change_feeds")} (feed_id, trimmed_through)
     select feed_id, max(position) from removed group by feed_id
     on conflict (feed_id) do update set trimmed_through = greatest(${t("change_feeds")}.trimmed_through, excluded.trimmed_through)`;
  const lastSql = `select coalesce(pg_sequence_last_value('${t("change_positions").replaceAll("'", "''")}'::regclass), 0)::text as last`;
  const polling = pollingWatch(
    async () => (await db.query<{ last: string }>(lastSql))[0]?.last ?? "0",
    WATCH_INTERVAL_MS,
    () => !db.pool.ending,
    (message, error) => db.log(message, error),
  );
  return {
    watch: options.notifications
      ? notifiedWatch(options.notifications.listener, options.notifications.channel, polling)
      : polling,
    insertSql,
    positionSql: (feedSql) => feed.nextPositionSql(feedSql),
    async append(client, feedId, storedAt, change) {
      const r = changeRecord(change, storedAt);
      await client.query(appendSql, [feedId, r.op, r.rowId, r.row === null ? null : json(r.row), storedAt]);
    },
    forgetSql() {
      return [`delete from ${t("changes")} where feed_id = $1`, `delete from ${t("change_feeds")} where feed_id = $1`];
    },
    async read(feedId, { after, limit }) {
      const { page, heldBackMs } = await readToHorizon(feed, feedId, waitMs, async (below) => {
        const rows = await db.query<PageRow>(pageSql, [feedId, after, below, limit + 1]);
        const expired = after !== null && rows.length > 0 && BigInt(rows[0]!.through) > BigInt(after);
        const found = rows.filter((r) => r.position_text !== null);
        return { found, expired, full: found.length > limit };
      });
      if (page.expired) return { changes: [], hasMore: false, expired: true };
      const changes = page.found.slice(0, limit).map((r): StoredChange => ({
        position: r.position_text!,
        change: changeFromRecord({ op: r.op!, rowId: r.row_id, row: r.row, storedAt: num(r.stored_at) }),
      }));
      const result = { changes, hasMore: page.full, expired: false };
      return heldBackMs > 0 ? { ...result, heldBackMs } : result;
    },
    async head(feedId) {
      // Every position of the feed below the horizon has committed: a read made after this sees them all.
      const horizon = await feed.horizon(feedId);
      return (BigInt(horizon.below) - 1n).toString();
    },
    async trimChanges(storedBefore) {
      await db.query(trimSql, [storedBefore]);
    },
  };
}

interface PageRow {
  through: string;
  position_text: string | null;
  op: ChangeOp | null;
  row_id: string | null;
  row: Row | null;
  stored_at: string | null;
}

/**
 * The statements a bulk write's publishing transaction records its changes
 * with (`$1` the dataset id, `$2` stored_at): a replace's `reset`; an
 * append's inserts, copied from its published rows at [`$3`, `$4`) in
 * position order.
 */
export function publishChangesSql(t: Db["t"]): { reset: string; inserts: string } {
  const sequence = `'${t("change_positions").replaceAll("'", "''")}'::regclass`;
  const position = `${t("feed_position")}(${sequence}, $1::text)`;
  return {
    reset: `insert into ${t("changes")} (feed_id, position, op, row_id, row, stored_at) values ($1, ${position}, 'reset', null, null, $2)`,
    inserts: `insert into ${t("changes")} (feed_id, position, op, row_id, row, stored_at)
      select $1, ${position}, 'insert', null, r.row, $2
        from (select row from ${t("dataset_rows")} where dataset_id = $1 and pos >= $3 and pos < $4 order by pos) r`,
  };
}

/**
 * The channel migration 13's trigger notifies for a schema's changes: its
 * name's md5, as the catalog's (catalog-events.ts), so any schema name fits.
 */
export function changesChannel(schemaName: string): string {
  return `dataport_changes_${createHash("md5").update(schemaName).digest("hex")}`;
}

/**
 * A `WatchChanges` woken by `listener`'s notifications on `channel` (the
 * payload a feed id; empty: any feed), with `fallback` while it does not
 * listen. The connection is held open while someone watches.
 */
function notifiedWatch(listener: SchemaListener, channel: string, fallback: WatchChanges): WatchChanges {
  const watchers = new Set<(feedId: string | null) => void>();
  let release: (() => void) | null = null;
  let stopFallback: (() => void) | null = null;
  const wake = (feedId: string | null) => {
    for (const watcher of watchers) watcher(feedId);
  };
  /** Look at the fallback exactly while someone watches and nothing is heard. */
  const follow = () => {
    if (watchers.size > 0 && !listener.listening()) stopFallback ??= fallback(wake);
    else if (stopFallback) {
      stopFallback();
      stopFallback = null;
    }
  };
  listener.on({
    notification(name, payload) {
      if (name === channel) wake(payload === "" ? null : payload);
    },
    // What was committed while nothing was heard may have been missed: every waiter looks once.
    listening() {
      follow();
      wake(null);
    },
    lost() {
      follow();
      wake(null);
    },
  });
  return (onChange) => {
    watchers.add(onChange);
    if (watchers.size === 1) {
      release = listener.hold();
      follow();
    }
    return () => {
      if (!watchers.delete(onChange) || watchers.size > 0) return;
      release?.();
      release = null;
      follow();
    };
  };
}
