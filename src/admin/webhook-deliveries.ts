import type { HeaderReader } from "../base/headers.js";
import { ApiError, invalidParameter, notFound } from "../base/api-error.js";
import { utcDay } from "../domain/days.js";
import { isoTime } from "../domain/time.js";
import type { WebhookEndpoint } from "../domain/webhook-config.js";
import {
  countKind,
  DELIVERY_OUTCOMES,
  type DeliveryLogEntry,
  type DeliveryOutcome,
  deliveryCursor,
  type InboxKeep,
  inboxKeep,
  keptBodyBytes,
  readDeliveryCursor,
  REFUSAL_REASONS,
  type RefusalReason,
} from "../domain/webhook-inbox.js";
import { ingestDelivery, nextDeliveryId, refusalEntry } from "../handlers/webhooks.js";
import { actorFor, type AdminDeps, type ChangeOptions, type ListPage, recordChange } from "./change.js";
import { parseBody, webhookReplayBody } from "./schemas.js";

/** One delivery of an endpoint's log, as the host reads it (webhook-inbox.md). */
export interface WebhookDeliveryRecord {
  id: string;
  connectionId: string;
  receivedAt: string;
  sourceIp: string | null;
  outcome: DeliveryOutcome;
  /** Why it was refused; null unless `outcome` is `refused`. */
  reason: RefusalReason | null;
  /** The HTTP status the sender was answered. */
  status: number;
  /** The de-duplication key used, if any. */
  deliveryKey: string | null;
  /** The stored row (`stored`; for `duplicate`, the first delivery's). */
  rowId: string | null;
  /** Which secret verified it (`current` or `previous`); null when unsigned, refused or replayed. */
  verifiedBy: "current" | "previous" | null;
  /** Refusals before this one the log counted but did not keep (a flood). */
  suppressed: number;
  /** The delivery this one replays, if it is a replay. */
  replayOf: string | null;
  contentType: string | null;
  /** Request headers (lower-case), `Authorization`, `Cookie` and `Proxy-Authorization` values `[redacted]`. */
  headers: Record<string, string>;
  /** A refused delivery's raw body as received, up to `inboxBodyBytes`; null when none is kept. */
  body: string | null;
  /** `utf8`, or `base64` when the body is not UTF-8; null without a body. */
  bodyEncoding: "utf8" | "base64" | null;
  /** Whether the body was cut at `inboxBodyBytes` (or not read: a body over the request limit). */
  bodyTruncated: boolean;
}

/** A listed delivery: the record without its headers and body. */
export type WebhookDeliverySummary = Omit<WebhookDeliveryRecord, "headers" | "body">;

export interface WebhookDeliveryQuery {
  outcome?: DeliveryOutcome;
  reason?: RefusalReason;
  /** ISO instant: only deliveries received at or after it. */
  since?: string;
  /** 1 to 1000, default 100. */
  limit?: number;
  cursor?: string | null;
}

/** Which kept deliveries a bulk replay takes: every filter given must match. */
export interface WebhookReplayFilter {
  outcome?: DeliveryOutcome;
  reason?: RefusalReason;
  /** ISO instants: received at or after `since`, before `until`. */
  since?: string;
  until?: string;
}

/** What a bulk replay did: how many deliveries matched, and the outcome of each one replayed. */
export interface WebhookReplaySummary {
  matched: number;
  replayed: number;
  stored: number;
  duplicate: number;
  refused: number;
  /** Matches without a complete kept body (stored deliveries, a body cut at the bound): not replayed. */
  skipped: number;
}

export interface WebhookDeliveryAdmin {
  /** An endpoint's delivery log, newest first (outcome, reason, since; limit and cursor as every listing). */
  listWebhookDeliveries(connectionId: string, query?: WebhookDeliveryQuery): Promise<ListPage<WebhookDeliverySummary>>;
  /** One delivery, with its headers and kept body. */
  getWebhookDelivery(connectionId: string, deliveryId: string): Promise<WebhookDeliveryRecord>;
  /**
   * Ingest a delivery's kept body again as a new delivery, under today's
   * rules except the signature check and the rate limit (the host vouches
   * for it); de-duplication still applies. Answers the new delivery (its
   * `replayOf` names this one). 409 `conflict` when no complete body is kept.
   * Audited as `webhook.delivery.replayed`.
   */
  replayWebhookDelivery(
    connectionId: string,
    deliveryId: string,
    options?: ChangeOptions,
  ): Promise<WebhookDeliveryRecord>;
  /**
   * Replay every kept delivery matching `filter`, oldest first (each as `replayWebhookDelivery`); answers the counts.
   */
  replayWebhookDeliveries(
    connectionId: string,
    filter?: WebhookReplayFilter,
    options?: ChangeOptions,
  ): Promise<WebhookReplaySummary>;
}

export function webhookDeliveryAdmin(deps: AdminDeps): WebhookDeliveryAdmin {
  const { storage, clock } = deps.ports;
  const { settings } = deps;
  const bounds = { size: settings.inboxSize, days: settings.inboxDays, bodyBytes: settings.inboxBodyBytes };
  const keep = (): InboxKeep => inboxKeep(bounds, clock.now());

  async function endpointOf(connectionId: string): Promise<WebhookEndpoint> {
    const connection = await storage.catalog.getConnection(connectionId);
    const endpointId = connection?.type === "webhook" ? connection.config.endpointId : undefined;
    const endpoint = typeof endpointId === "string" ? await storage.webhooks.getWebhookEndpoint(endpointId) : null;
    if (!endpoint || endpoint.connectionId !== connectionId) throw notFound("webhook connection");
    return endpoint;
  }

  async function entryOf(connectionId: string, deliveryId: string): Promise<DeliveryLogEntry> {
    const entry = await storage.webhooks.getWebhookDelivery(connectionId, deliveryId, keep());
    if (!entry) throw notFound("webhook delivery");
    return entry;
  }

  /**
   * One replay: the new delivery's record (stored, duplicate or refused). A store fault is thrown, as on the receiver.
   */
  async function replay(endpoint: WebhookEndpoint, entry: DeliveryLogEntry): Promise<WebhookDeliveryRecord> {
    const bytes = entry.detail.bodyTruncated ? null : keptBodyBytes(entry.detail);
    if (bytes === null)
      throw new ApiError(409, "conflict", "no complete body of this delivery is kept: it cannot be replayed", {
        details: { deliveryId: entry.id },
      });
    const headers = headerReader(entry.detail.headers);
    const body = { bytes, contentType: entry.detail.contentType };
    const nowMs = clock.now();
    const facts = {
      id: nextDeliveryId(),
      receivedAt: isoTime(nowMs),
      receivedMs: nowMs,
      sourceIp: entry.detail.sourceIp,
      verifiedBy: null,
      replayOf: entry.id,
    };
    try {
      const receipt = await ingestDelivery(
        { storage, settings, inbox: { bounds, takeSuppressed: () => 0 } },
        endpoint,
        body,
        headers,
        facts,
      );
      // The new delivery as its log holds it (its de-duplication key included).
      const stored = await storage.webhooks.getWebhookDelivery(endpoint.connectionId, facts.id, keep());
      if (stored) return recordOf(stored);
      const outcome = receipt.duplicate ? "duplicate" : "stored";
      return recordOf({
        seq: 0,
        id: facts.id,
        connectionId: endpoint.connectionId,
        receivedAt: facts.receivedAt,
        outcome,
        reason: null,
        status: 200,
        rowId: receipt.id,
        detail: {
          ...entry.detail,
          body: null,
          bodyEncoding: null,
          bodyTruncated: false,
          verifiedBy: null,
          suppressed: 0,
          replayOf: entry.id,
        },
      });
    } catch (error) {
      if (!(error instanceof ApiError) || error.status >= 500) throw error;
      const refusal = refusalEntry(bounds.bodyBytes, endpoint, body, headers, facts, error);
      const counts = [
        {
          connectionId: endpoint.connectionId,
          day: utcDay(facts.receivedAt),
          kind: countKind("refused", refusal.reason),
          n: 1,
        },
      ];
      await storage.webhooks.recordWebhookDeliveries({ refusals: [refusal], counts, keep: keep() });
      return recordOf({ ...refusal, seq: 0, outcome: "refused", rowId: null });
    }
  }

  async function audited(
    endpoint: WebhookEndpoint,
    entry: DeliveryLogEntry,
    options: ChangeOptions | undefined,
    replayed: WebhookDeliveryRecord,
  ) {
    await recordChange(deps, {
      teamIds: [endpoint.teamId],
      action: "webhook.delivery.replayed",
      actor: await actorFor(storage, options),
      target: { type: "connection", id: endpoint.connectionId },
      details: { deliveryId: entry.id, replayId: replayed.id, outcome: replayed.outcome },
    });
  }

  return {
    async listWebhookDeliveries(connectionId, query = {}) {
      const limit = query.limit ?? 100;
      if (!Number.isInteger(limit) || limit < 1 || limit > 1000)
        throw invalidParameter("limit", "limit is an integer from 1 to 1000");
      const beforeSeq =
        query.cursor === undefined || query.cursor === null ? undefined : readDeliveryCursor(query.cursor);
      if (beforeSeq === null) throw invalidParameter("cursor", "cursor is not one this listing gave");
      await endpointOf(connectionId);
      const entries = await storage.webhooks.listWebhookDeliveries(connectionId, {
        ...checkedFilter(query),
        beforeSeq,
        limit: limit + 1,
        order: "newest",
        keep: keep(),
      });
      const page = entries.slice(0, limit);
      const hasMore = entries.length > limit;
      return {
        data: page.map((e) => {
          const { headers: _headers, body: _body, ...summary } = recordOf(e);
          return summary;
        }),
        hasMore,
        nextCursor: hasMore ? deliveryCursor(page.at(-1)!.seq) : null,
      };
    },

    async getWebhookDelivery(connectionId, deliveryId) {
      await endpointOf(connectionId);
      return recordOf(await entryOf(connectionId, deliveryId));
    },

    async replayWebhookDelivery(connectionId, deliveryId, options) {
      const endpoint = await endpointOf(connectionId);
      const entry = await entryOf(connectionId, deliveryId);
      await actorFor(storage, options);
      const replayed = await replay(endpoint, entry);
      await audited(endpoint, entry, options, replayed);
      return replayed;
    },

    async replayWebhookDeliveries(connectionId, filter = {}, options) {
      const endpoint = await endpointOf(connectionId);
      const checked = checkedFilter(parseBody(webhookReplayBody, filter) as WebhookReplayFilter);
      await actorFor(storage, options);
      // Every match at once (the log holds at most inboxSize), read before the replays add to the log.
      const entries = await storage.webhooks.listWebhookDeliveries(connectionId, {
        ...checked,
        limit: bounds.size,
        order: "oldest",
        keep: keep(),
      });
      const summary: WebhookReplaySummary = {
        matched: entries.length,
        replayed: 0,
        stored: 0,
        duplicate: 0,
        refused: 0,
        skipped: 0,
      };
      for (const entry of entries) {
        if (entry.detail.bodyTruncated || entry.detail.body === null) {
          summary.skipped++;
          continue;
        }
        const replayed = await replay(endpoint, entry);
        await audited(endpoint, entry, options, replayed);
        summary.replayed++;
        summary[replayed.outcome]++;
      }
      return summary;
    },
  };
}

/** A log entry as the host reads it. */
function recordOf(entry: DeliveryLogEntry): WebhookDeliveryRecord {
  const { detail } = entry;
  return {
    id: entry.id,
    connectionId: entry.connectionId,
    receivedAt: entry.receivedAt,
    sourceIp: detail.sourceIp,
    outcome: entry.outcome,
    reason: entry.reason,
    status: entry.status,
    deliveryKey: detail.deliveryKey,
    rowId: entry.rowId,
    verifiedBy: detail.verifiedBy,
    suppressed: detail.suppressed,
    replayOf: detail.replayOf,
    contentType: detail.contentType,
    headers: { ...detail.headers },
    body: detail.body,
    bodyEncoding: detail.bodyEncoding,
    bodyTruncated: detail.bodyTruncated,
  };
}

/**
 * The filters, checked: a known outcome and reason, ISO instants (400 `invalid_parameter` naming the first wrong one).
 */
function checkedFilter(filter: WebhookReplayFilter): WebhookReplayFilter {
  if (filter.outcome !== undefined && !DELIVERY_OUTCOMES.includes(filter.outcome)) {
    throw invalidParameter("outcome", `outcome is one of ${DELIVERY_OUTCOMES.join(", ")}`);
  }
  if (filter.reason !== undefined && !REFUSAL_REASONS.includes(filter.reason))
    throw invalidParameter("reason", `reason is one of ${REFUSAL_REASONS.join(", ")}`);
  for (const name of ["since", "until"] as const) {
    const value = filter[name];
    if (
      value !== undefined &&
      (typeof value !== "string" || !ISO_INSTANT.test(value) || Number.isNaN(Date.parse(value)))
    ) {
      throw invalidParameter(name, `${name} is an ISO 8601 instant with its offset, e.g. 2026-11-01T00:00:00Z`);
    }
  }
  const { outcome, reason, since, until } = filter;
  return {
    ...(outcome !== undefined && { outcome }),
    ...(reason !== undefined && { reason }),
    ...(since !== undefined && { since }),
    ...(until !== undefined && { until }),
  };
}

const ISO_INSTANT = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:\d{2})$/;

/** The kept headers, read as a request's (names lower-case). */
function headerReader(headers: Record<string, string>): HeaderReader {
  return {
    get: (name) => {
      const key = name.toLowerCase();
      return Object.hasOwn(headers, key) ? headers[key]! : null;
    },
    keys: () => Object.keys(headers),
  };
}
