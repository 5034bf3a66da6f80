import { actorOf } from "../core/auth.js";
import type { AuthedContext } from "../context/handler.js";
import { decodeChangeCursor, encodeChangeCursor } from "../domain/changes.js";
import { ApiError, invalidParameter } from "../base/api-error.js";
import { WaitersFull } from "../core/change-watch.js";
import type { ChangesPage, ChangesQuery } from "../ports/storage/changes.js";
import { reachableDataset } from "./datasets.js";
import { reachableTable } from "./tables.js";

export interface ChangesParams {
  cursor?: string;
  limit: number;
  /** Seconds to hold the request while no change is ready (long-poll); 0: answer at once. */
  wait: number;
}

/** What a feed's reader needs: whose feed, and how to read it. */
interface Feed {
  target: { type: "table" | "dataset"; id: string; teamId: string };
  read(query: ChangesQuery): Promise<ChangesPage>;
}

/** GET /tables/{id}/changes: the table's changes after the cursor (../shared/changes.md). */
export async function readTableChanges(ctx: AuthedContext, id: string, params: ChangesParams) {
  const table = await reachableTable(ctx, id);
  return readChanges(ctx, tableFeed(ctx, table), params);
}

/** GET /datasets/{id}/changes: an upload's, connection's or webhook dataset's changes after the cursor. */
export async function readDatasetChanges(ctx: AuthedContext, id: string, params: ChangesParams) {
  const dataset = await reachableDataset(ctx, id);
  if (dataset.type === "input_table") {
    throw invalidParameter("id", `dataset ${id} is an input table; follow its changes with GET /api/v1/tables/${id}/changes`);
  }
  return readChanges(ctx, datasetFeed(ctx, dataset), params);
}

export function tableFeed(ctx: AuthedContext, table: { id: string; teamId: string }): Feed {
  return { target: { type: "table", id: table.id, teamId: table.teamId }, read: (q) => ctx.storage.tables.readTableChanges(table.id, q) };
}

export function datasetFeed(ctx: AuthedContext, dataset: { id: string; teamId: string }): Feed {
  return { target: { type: "dataset", id: dataset.id, teamId: dataset.teamId }, read: (q) => ctx.storage.rows.readDatasetChanges(dataset.id, q) };
}

/**
 * One page of a feed after the cursor: the audit feed's rules (send the
 * cursor back; an empty page returns the cursor sent; `hasMore` says read on
 * at once). A cursor retention has passed is 410 `cursor_expired`.
 */
async function readChanges(ctx: AuthedContext, feed: Feed, params: ChangesParams) {
  const after = startOf(params.cursor, feed.target.id);
  ctx.operations.changeRetention?.due();
  const query = { after, limit: params.limit };
  let page = await feed.read(query);
  if (page.changes.length === 0 && params.wait > 0 && !page.expired) page = await waitForChanges(ctx, feed, query, page, params.wait * 1000);
  if (page.expired) {
    throw new ApiError(410, "cursor_expired", "changes after this cursor are no longer kept: re-read the rows and follow their changesCursor");
  }
  const last = page.changes.at(-1);
  const cursor = last
    ? encodeChangeCursor({ feedId: feed.target.id, position: last.position })
    : (params.cursor ?? encodeChangeCursor({ feedId: feed.target.id, position: after ?? "0" }));
  if (page.changes.length > 0) await auditChangesRead(ctx, feed.target, page.changes.length);
  // A write still open holds the feed back: the page says how far it really reads.
  const lagSeconds = Math.ceil((page.heldBackMs ?? 0) / 1000);
  return { changes: page.changes.map((c) => c.change), cursor, hasMore: page.hasMore, lagSeconds };
}

/**
 * Long-poll: hold the request while the feed has nothing after the cursor,
 * woken by the instance's one watcher (no store query while asleep), for
 * at most `ms`. A wake-up can come before the write commits (PostgreSQL
 * draws positions first), and a write still open can hold the horizon:
 * then the feed is read again after a short pause, doubling to a second.
 * Ends early, with the page as it is, when the client goes away or the
 * instance drains.
 */
async function waitForChanges(ctx: AuthedContext, feed: Feed, query: ChangesQuery, first: ChangesPage, ms: number): Promise<ChangesPage> {
  const watch = ctx.operations.changeWatch;
  if (!watch) return first;
  const end = performance.now() + ms;
  let page = first;
  let pause = 0;
  for (;;) {
    const left = end - performance.now();
    if (left <= 0) return page;
    const soon = pause > 0 || (page.heldBackMs ?? 0) > 0;
    let ended;
    try {
      ended = await watch.wait(feed.target.type, feed.target.id, soon ? Math.min(left, Math.max(pause, 50)) : left, ctx.signal);
    } catch (error) {
      if (error instanceof WaitersFull) {
        throw new ApiError(429, "rate_limited", "too many change-feed requests are waiting here; retry shortly", { headers: { "retry-after": "1" } });
      }
      throw error;
    }
    if (ended === "aborted" || ended === "draining") return page;
    if (ended === "timeout" && !soon) return page;
    page = await feed.read(query);
    if (page.changes.length > 0 || page.expired) return page;
    // Woken, yet nothing to read: the write has not committed (or is held back) yet, or it was another
    // feed's. Look again shortly, doubling the pause; after about 1.5 s, sleep until the next wake-up.
    pause = pause >= 800 ? 0 : Math.max(50, pause * 2);
  }
}

/** The position after which to read: the cursor's, or null (the oldest change kept) without one. */
function startOf(cursor: string | undefined, feedId: string): string | null {
  if (cursor === undefined) return null;
  const parsed = decodeChangeCursor(cursor);
  if (parsed === null || parsed.feedId !== feedId) {
    throw invalidParameter("cursor", "cursor is not one this feed returned; send back the cursor exactly as received");
  }
  return parsed.position;
}

function auditChangesRead(ctx: AuthedContext, target: Feed["target"], returned: number): Promise<void> {
  return ctx.audit({
    teamId: target.teamId,
    category: "data_access",
    action: `${target.type}.changes.read`,
    actor: actorOf(ctx.credential),
    target: { type: target.type, id: target.id },
    outcome: "success",
    ip: ctx.clientAddress,
    userAgent: ctx.userAgent,
    details: { requestId: ctx.requestId, returnedChanges: returned },
  });
}
