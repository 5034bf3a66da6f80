import { actorOf } from "../core/auth.js";
import type { AuthedContext } from "../context/handler.js";
import { decodeChangeCursor, encodeChangeCursor } from "../domain/changes.js";
import { Reply } from "../http/reply.js";
import { ApiError, invalidParameter } from "../base/api-error.js";
import { WaitersFull } from "../core/change-watch.js";
import type { ChangesPage, ChangesQuery } from "../ports/storage/changes.js";
import { reachableDataset } from "./datasets.js";
import { reachableTable } from "./tables.js";

/**
 * What a changes request takes from its headers: `Accept` (an event stream?) and `Last-Event-ID` (where a stream
 * resumes).
 */
export interface ChangesHeaders {
  accept: string | null;
  lastEventId: string | null;
}

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
export async function readTableChanges(
  ctx: AuthedContext,
  id: string,
  params: ChangesParams,
  headers: ChangesHeaders = NO_HEADERS,
) {
  const table = await reachableTable(ctx, id);
  return answerChanges(ctx, tableFeed(ctx, table), params, headers);
}

/** GET /datasets/{id}/changes: an upload's, connection's or webhook dataset's changes after the cursor. */
export async function readDatasetChanges(
  ctx: AuthedContext,
  id: string,
  params: ChangesParams,
  headers: ChangesHeaders = NO_HEADERS,
) {
  const dataset = await reachableDataset(ctx, id);
  if (dataset.type === "input_table") {
    throw invalidParameter(
      "id",
      `dataset ${id} is an input table; follow its changes with GET /api/v1/tables/${id}/changes`,
    );
  }
  return answerChanges(ctx, datasetFeed(ctx, dataset), params, headers);
}

const NO_HEADERS: ChangesHeaders = { accept: null, lastEventId: null };

/** A page as JSON, or, when `Accept` asks for `text/event-stream`, the same changes as Server-Sent Events. */
function answerChanges(ctx: AuthedContext, feed: Feed, params: ChangesParams, headers: ChangesHeaders) {
  if (!/\btext\/event-stream\b/i.test(headers.accept ?? "")) return readChanges(ctx, feed, params);
  return streamChanges(ctx, feed, { ...params, cursor: headers.lastEventId ?? params.cursor });
}

/** A comment line this often keeps proxies from closing a quiet stream, in ms. */
const KEEP_ALIVE_MS = 15_000;

/**
 * Server-Sent Events: `id:` the cursor after the change, `event: change`,
 * `data:` the change as JSON; a comment line every 15 s while nothing
 * happens. The first page is read before the answer starts, so a bad or
 * expired cursor is an ordinary error answer. The stream ends after
 * `maxStreamSeconds`, when the instance drains or the client goes away,
 * and at a cursor retention has passed (a reconnect then gets the 410).
 */
async function streamChanges(ctx: AuthedContext, feed: Feed, params: ChangesParams): Promise<Reply> {
  const after = startOf(params.cursor, feed.target.id);
  ctx.operations.changeRetention?.due();
  const first = await feed.read({ after, limit: params.limit });
  if (first.expired) throw expiredCursor();
  const end = performance.now() + Math.max(1, ctx.settings.maxStreamSeconds) * 1000;
  const watch = ctx.operations.changeWatch;
  const signal = ctx.signal?.();
  async function* events(): AsyncGenerator<string> {
    let page = first;
    let position = after;
    let quietSince = performance.now();
    for (;;) {
      if (page.changes.length > 0) {
        let text = "";
        for (const { position: at, change } of page.changes) {
          position = at;
          text += `id: ${encodeChangeCursor({ feedId: feed.target.id, position: at })}\nevent: change\ndata: ${JSON.stringify(change)}\n\n`;
        }
        await auditChangesRead(ctx, feed.target, page.changes.length);
        yield text;
        quietSince = performance.now();
      }
      if (!page.hasMore) {
        const left = end - performance.now();
        if (left <= 0 || !watch || signal?.aborted) return;
        const untilKeepAlive = quietSince + KEEP_ALIVE_MS - performance.now();
        let ended;
        try {
          ended = await watch.wait(
            feed.target.type,
            feed.target.id,
            Math.max(1, Math.min(left, untilKeepAlive, (page.heldBackMs ?? 0) > 0 ? 100 : left)),
            signal,
          );
        } catch (error) {
          if (error instanceof WaitersFull) return;
          throw error;
        }
        if (ended === "aborted" || ended === "draining") return;
        if (performance.now() - quietSince >= KEEP_ALIVE_MS) {
          yield ": keep-alive\n\n";
          quietSince = performance.now();
        }
      }
      page = await feed.read({ after: position, limit: params.limit });
      if (page.expired) return;
    }
  }
  return new Reply(200, events(), { "content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache" });
}

export function tableFeed(ctx: AuthedContext, table: { id: string; teamId: string }): Feed {
  return {
    target: { type: "table", id: table.id, teamId: table.teamId },
    read: (q) => ctx.storage.tables.readTableChanges(table.id, q),
  };
}

export function datasetFeed(ctx: AuthedContext, dataset: { id: string; teamId: string }): Feed {
  return {
    target: { type: "dataset", id: dataset.id, teamId: dataset.teamId },
    read: (q) => ctx.storage.rows.readDatasetChanges(dataset.id, q),
  };
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
  if (page.changes.length === 0 && params.wait > 0 && !page.expired)
    page = await waitForChanges(ctx, feed, query, page, params.wait * 1000);
  if (page.expired) throw expiredCursor();
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
async function waitForChanges(
  ctx: AuthedContext,
  feed: Feed,
  query: ChangesQuery,
  first: ChangesPage,
  ms: number,
): Promise<ChangesPage> {
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
      ended = await watch.wait(
        feed.target.type,
        feed.target.id,
        soon ? Math.min(left, Math.max(pause, 50)) : left,
        ctx.signal?.(),
      );
    } catch (error) {
      if (error instanceof WaitersFull) {
        throw new ApiError(429, "rate_limited", "too many change-feed requests are waiting here; retry shortly", {
          headers: { "retry-after": "1" },
        });
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

function expiredCursor(): ApiError {
  return new ApiError(
    410,
    "cursor_expired",
    "changes after this cursor are no longer kept: re-read the rows and follow their changesCursor",
  );
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
