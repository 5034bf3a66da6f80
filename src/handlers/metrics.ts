import { unauthorized } from "../core/auth.js";
import type { HandlerContext } from "../context/handler.js";
import { safeEqual, sha256Hex } from "../domain/crypto.js";
import { ApiError } from "../base/api-error.js";
import { Reply } from "../http/reply.js";
import { auditFeedState } from "./health.js";
import type { HeaderReader } from "../base/headers.js";

const encoder = new TextEncoder();

/**
 * GET /api/metrics: the Prometheus exposition. 404 when metrics are off;
 * with `metricsToken` set, `Authorization: Bearer <token>` is required (401
 * otherwise), compared in constant time.
 */
export async function exposeMetrics(ctx: HandlerContext, headers: HeaderReader): Promise<Reply> {
  const metrics = ctx.operations.metrics;
  if (!metrics) throw new ApiError(404, "not_found", "metrics are not enabled on this server");
  const token = ctx.settings.metricsToken;
  if (token !== null && !bearerMatches(headers.get("authorization"), token)) {
    throw unauthorized("a valid metrics token is required");
  }
  // Measured at each scrape, so the gauge is current even when nobody reads the feed.
  await auditFeedState(ctx);
  const { contentType, body } = await metrics.expose();
  return new Reply(200, body, { "content-type": contentType, "cache-control": "no-store" });
}

function bearerMatches(authorization: string | null, token: string): boolean {
  const match = authorization === null ? null : /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(authorization);
  // Hashes first: equal lengths, so the comparison time says nothing about the token's length either.
  const sent = encoder.encode(sha256Hex(match?.[1] ?? ""));
  return safeEqual(sent, encoder.encode(sha256Hex(token))) && match !== null;
}
