import type { HandlerContext } from "../context/handler.js";
import { Reply } from "../http/reply.js";
import { withTimeout } from "../base/timeout.js";

export type CheckState = "ok" | "error";

export interface Readiness {
  status: "ok" | "unavailable" | "draining";
  checks: { storage: CheckState; rateLimiter: CheckState; cache: CheckState };
  /** What the checks do not fail on, when there is something to say: an audit feed held back a second or more. */
  details?: { auditFeed: AuditFeedState };
}

/** How long an append still open has held the audit feed back, and whether that is past `auditStallSeconds`. */
export interface AuditFeedState {
  heldBackSeconds: number;
  stalled: boolean;
}

const NO_STORE = { "cache-control": "no-store" };

/** GET /api/health/live: the process answers. No dependency is touched. */
export function liveness(): Reply {
  return Reply.json(200, { status: "ok" }, NO_STORE);
}

/**
 * GET /api/health/ready: one round trip to the store and, when they live on
 * a server (Redis), to the rate limiter and the cache, in parallel, each
 * bounded by `healthTimeoutMs`. 200 when every check passes and the API is
 * not draining; otherwise 503 with the same body naming what failed.
 * Ports without `ping` are in-process: nothing to reach, so "ok".
 * `details.auditFeed` reports an audit feed held back by an append still
 * open (a second or more), and whether it is stalled, without failing: no
 * instance taken out of rotation would end the append that holds it.
 */
export async function readiness(ctx: HandlerContext): Promise<Reply> {
  const limit = ctx.settings.healthTimeoutMs;
  const [storage, rateLimiter, cache, auditFeed] = await Promise.all([
    check(() => ctx.storage.ping(), limit),
    check(ctx.rateLimiter.ping && (() => ctx.rateLimiter.ping!()), limit),
    check(ctx.cache.ping && (() => ctx.cache.ping!()), limit),
    auditFeedState(ctx),
  ]);
  const checks = { storage, rateLimiter, cache };
  const failed = storage === "error" || rateLimiter === "error" || cache === "error";
  const status: Readiness["status"] = ctx.operations.draining ? "draining" : failed ? "unavailable" : "ok";
  const held = auditFeed !== null && auditFeed.heldBackSeconds >= 1;
  const body: Readiness = { status, checks, ...(held && { details: { auditFeed } }) };
  return Reply.json(status === "ok" ? 200 : 503, body, NO_STORE);
}

/**
 * The audit feed's horizon now (the store's `auditHorizon`, within
 * `healthTimeoutMs`), also handed to metrics; null when the store cannot
 * say (no `auditHorizon`, a failure, no answer in time).
 */
export async function auditFeedState(ctx: HandlerContext): Promise<AuditFeedState | null> {
  const audit = ctx.storage.audit;
  if (!audit.auditHorizon) return null;
  const measured = await withTimeout(
    Promise.resolve().then(() => audit.auditHorizon!()),
    ctx.settings.healthTimeoutMs,
    () => new Error("no answer in time"),
  ).catch(() => null);
  if (measured === null) return null;
  const seconds = measured.heldBackMs / 1000;
  ctx.operations.metrics?.auditFeedHeldBack?.(seconds);
  return { heldBackSeconds: Math.round(seconds), stalled: seconds > ctx.settings.auditStallSeconds };
}

/** "ok" when the ping resolves within `timeoutMs`; a rejection or a hang is "error", never a thrown request. */
async function check(ping: (() => Promise<void>) | undefined, timeoutMs: number): Promise<CheckState> {
  if (!ping) return "ok";
  return withTimeout(Promise.resolve().then(ping), timeoutMs, () => new Error("no answer in time")).then(
    (): CheckState => "ok",
    (): CheckState => "error",
  );
}
