import { resolveTeam } from "../core/access.js";
import { planRequired } from "../core/auth.js";
import type { AuthedContext } from "../context/handler.js";
import { decodeCursor, encodeCursor, type FeedCursor } from "../domain/cursor.js";
import type { AuditCategory } from "../domain/model.js";
import { toOcsf } from "../domain/ocsf.js";
import { ApiError, invalidParameter } from "../base/api-error.js";

export interface AuditFeedQuery {
  cursor?: string;
  limit: number;
  format: "ocsf" | "raw";
  category?: AuditCategory[];
  /** ISO 8601, already normalised to `toISOString()` form. */
  since?: string;
  teamId?: string;
}

/**
 * GET /audit: one page of the business audit log after the cursor, up to
 * the lag horizon. Reading the feed writes no audit event.
 */
export async function readAuditFeed(ctx: AuthedContext, query: AuditFeedQuery) {
  const { storage, clock, settings } = ctx;
  const teamIds = await feedTeams(ctx, query.teamId);
  const start = startOf(query, storage.audit.isAuditPosition);
  const lagSeconds = Math.max(0, Math.round(settings.auditLagSeconds));
  const categories = [...new Set<AuditCategory>(["audit", ...(query.category ?? [])])];
  const page = await storage.audit.readAuditEvents({
    teamIds,
    categories,
    after: start.position,
    since: start.since,
    storedBefore: clock.now() - lagSeconds * 1000,
    limit: query.limit,
  });
  const last = page.events.at(-1);
  const metrics = ctx.operations.metrics;
  // Fixture events are stored at 0: their age says nothing about the feed.
  if (last && last.storedAt > 0) metrics?.auditFeedLag(Math.max(0, clock.now() - last.storedAt) / 1000);
  const heldBackMs = page.heldBackMs ?? 0;
  metrics?.auditFeedHeldBack?.(heldBackMs / 1000);
  // An empty page hands back the cursor that was sent (or, on a first read, one for the start).
  const cursor = last
    ? encodeCursor({ position: last.position, since: start.since })
    : (query.cursor ?? encodeCursor(start));
  const events = page.events.map((stored) =>
    query.format === "raw" ? stored.event : toOcsf(stored.event, stored.storedAt),
  );
  // An append still open holds the read back further than the lag: the feed says how far it really reads.
  return { events, cursor, hasMore: page.hasMore, lagSeconds: Math.max(lagSeconds, Math.ceil(heldBackMs / 1000)) };
}

/**
 * A cursor continues where it stopped (its own `since` applies; the query's is ignored); no cursor starts at the
 * beginning.
 */
function startOf(query: AuditFeedQuery, isPosition: (position: string) => boolean): FeedCursor {
  if (query.cursor === undefined) return { position: null, since: query.since ?? null };
  const cursor = decodeCursor(query.cursor, isPosition);
  if (!cursor)
    throw invalidParameter("cursor", "cursor is not one this feed returned; send back the cursor exactly as received");
  return cursor;
}

/**
 * The teams whose events the credential may read: every team of its
 * business. The team must be on the Business plan (403 plan_required) and
 * the reader a business admin — the key's creator, or the signed-in person
 * (403 forbidden).
 */
async function feedTeams(ctx: AuthedContext, teamId: string | undefined): Promise<string[]> {
  const { credential, storage } = ctx;
  const team = await resolveTeam(credential, teamId, storage);
  if (team.plan !== "business") throw planRequired("the audit feed needs the Business plan");
  // A key reads the feed when its creator is (still) a business admin; only this endpoint needs the creator.
  // A deleted creator is gone for good: a user created later with the same id is someone else.
  const admin =
    credential.kind === "api-key"
      ? credential.key.creatorDeleted !== true &&
        (await storage.identity.getUser(credential.key.createdBy))?.businessAdmin === true
      : credential.user.businessAdmin;
  if (!admin) {
    const who =
      credential.kind === "api-key"
        ? "this key was not created by a business admin"
        : "only a business admin may read the audit feed";
    throw new ApiError(403, "forbidden", who);
  }
  if (team.businessId === null) return [team.id];
  return (await storage.identity.listBusinessTeams(team.businessId)).map((t) => t.id);
}
