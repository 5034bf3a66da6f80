import { createHash, randomUUID } from "node:crypto";
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
   * many wait. The trigger notifies only while some instance has someone
   * watching (its row in `change_waiters`, written as the first watcher
   * comes, refreshed every 10 s, deleted 3 s after the last one left): a
   * write nobody waits for sends nothing. While this instance does not hear
   * (its connection not open yet, lost, being reconnected every second; its
   * row not written yet, or its refresh failing), the sequence is looked at
   * every WATCH_INTERVAL_MS instead (one query per instance), and every
   * waiter is woken once as hearing stops and once as it starts again, so a
   * change not notified or not heard meanwhile is never a lost wake-up. A
   * woken reader may still find the feed held back by another open write
   * (the handler looks again shortly). Without `options.notifications`, the
   * sequence is looked at always.
   */
  watch: WatchChanges;
  /** Stop watching for good and delete this instance's row in `change_waiters` (the store's `close`). */
  close(): Promise<void>;
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
  const notified = options.notifications
    ? notifiedWatch(db, options.notifications.listener, options.notifications.channel, polling)
    : null;
  return {
    watch: notified?.watch ?? polling,
    close: async () => notified?.close(),
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

/** How long an instance's row in `change_waiters` is good for after each refresh, in s (the trigger's `until`). */
const WAITERS_TTL_S = 30;

/** How often an instance with waiting readers pushes its `until` ahead, in ms. */
const WAITERS_REFRESH_MS = 10_000;

/**
 * How long the row stays after the last reader stopped waiting, in ms: a reader that comes back meanwhile (the next
 * long-poll of a client following a feed) finds writers still notifying, and costs no registration and no wake-up.
 */
const WAITERS_LINGER_MS = 3000;

/**
 * A `WatchChanges` woken by `listener`'s notifications on `channel` (the
 * payload a feed id; empty: any feed), with `fallback` while it does not
 * hear them. The connection is held open while someone watches.
 *
 * Writers notify only while some instance has a row in `change_waiters`
 * (migration 13's trigger): this one upserts its row as someone starts
 * watching, pushes its `until` ahead every WAITERS_REFRESH_MS while anyone
 * does, and deletes it WAITERS_LINGER_MS after the last one stopped (and on
 * `close`). It hears writes only while it listens AND its row is known
 * good; otherwise the fallback runs. As hearing starts (the row written, the
 * connection listening) every waiter looks once: a write whose trigger ran
 * before the row was visible was not notified, and it committed before that
 * look, or holds the feed's horizon back so the reader looks again until it
 * has.
 */
function notifiedWatch(
  db: Db,
  listener: SchemaListener,
  channel: string,
  fallback: WatchChanges,
): { watch: WatchChanges; close(): Promise<void> } {
  const watchers = new Set<(feedId: string | null) => void>();
  const instanceId = randomUUID();
  const table = db.t("change_waiters");
  const registerSql = `insert into ${table} (instance_id, until) values ($1, now() + interval '${WAITERS_TTL_S} seconds')
    on conflict (instance_id) do update set until = excluded.until`;
  // Rows of instances gone without a goodbye (a crash) are cleared as an instance registers.
  const clearSql = `delete from ${table} where until < now() - interval '1 hour'`;
  const unregisterSql = `delete from ${table} where instance_id = $1`;
  let release: (() => void) | null = null;
  let stopFallback: (() => void) | null = null;
  /** The row is wanted (someone watches, or did under WAITERS_LINGER_MS ago): refreshed meanwhile. */
  let refresh: ReturnType<typeof setInterval> | null = null;
  let linger: ReturnType<typeof setTimeout> | null = null;
  /** The last write of the row succeeded and none since failed or hangs: writers see it. */
  let registered = false;
  /** Registrations and removals, one after the other (on separate pooled connections they could cross). */
  let queue: Promise<void> = Promise.resolve();
  let pending = 0;
  let heard = false;
  let closed = false;
  let failing = false;

  const wake = (feedId: string | null) => {
    for (const watcher of watchers) watcher(feedId);
  };
  /**
   * Follow hearing: look at the fallback exactly while someone watches and nothing is heard, and let every waiter
   * look once as hearing starts or stops (what was committed meanwhile may not have been notified, or not heard).
   */
  const update = () => {
    const now = registered && listener.listening() !== null;
    if (watchers.size > 0 && !now && !closed) stopFallback ??= fallback(wake);
    else if (stopFallback) {
      stopFallback();
      stopFallback = null;
    }
    if (now === heard || closed) return;
    heard = now;
    wake(null);
  };
  const serially = (work: () => Promise<void>) => {
    pending++;
    // `work` catches its own failures; a surprise one must not stop the queue.
    queue = queue
      .then(work)
      .catch((error: unknown) => db.log("the change feeds' waiters could not be updated", error))
      .finally(() => pending--);
  };
  const register = () =>
    serially(async () => {
      if (refresh === null || closed) return;
      try {
        if (!registered) await db.query(clearSql);
        await db.query(registerSql, [instanceId]);
        registered = refresh !== null && !closed;
        failing = false;
      } catch (error) {
        registered = false;
        if (!failing)
          db.log("the change feeds' waiters could not be registered; waiting readers look at the log", error);
        failing = true;
      }
      update();
    });
  const refreshNow = () => {
    // The previous write is still on its way: the row may run out before it lands.
    if (pending > 0 && registered) {
      registered = false;
      update();
    }
    register();
  };
  const unregister = () => {
    if (refresh !== null) clearInterval(refresh);
    refresh = null;
    registered = false;
    update();
    serially(async () => {
      await db.query(unregisterSql, [instanceId]).catch(() => {
        // Gone with the connection: the row runs out by itself within WAITERS_TTL_S.
      });
    });
  };

  listener.on({
    notification(name, payload) {
      if (name === channel) wake(payload === "" ? null : payload);
    },
    listening() {
      // After a lost connection the database may have restarted (its unlogged rows gone): the row is written again.
      if (refresh !== null && !registered && pending === 0) register();
      update();
    },
    lost() {
      registered = false;
      update();
    },
  });

  const watch: WatchChanges = (onChange) => {
    watchers.add(onChange);
    if (watchers.size === 1 && !closed) {
      release = listener.hold();
      if (linger !== null) clearTimeout(linger);
      linger = null;
      if (refresh === null) {
        refresh = setInterval(refreshNow, WAITERS_REFRESH_MS);
        refresh.unref?.();
        register();
      }
      update();
    }
    return () => {
      if (!watchers.delete(onChange) || watchers.size > 0) return;
      release?.();
      release = null;
      update();
      if (refresh === null || closed) return;
      linger = setTimeout(() => {
        linger = null;
        if (watchers.size === 0) unregister();
      }, WAITERS_LINGER_MS);
      linger.unref?.();
    };
  };
  return {
    watch,
    async close() {
      closed = true;
      if (linger !== null) clearTimeout(linger);
      linger = null;
      if (refresh !== null) unregister();
      await queue;
    },
  };
}
