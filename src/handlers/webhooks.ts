import type { HandlerContext } from "../context/handler.js";
import { MAX_DATASET_COLUMNS, typeOfValue } from "../domain/columns.js";
import { idSource } from "../domain/crypto.js";
import { dedupKeyOf } from "../domain/dedup.js";
import { flattenPayload } from "../domain/flatten.js";
import { isoTime } from "../domain/time.js";
import type { Column, Row } from "../domain/model.js";
import { emptyRow } from "../domain/rows.js";
import {
  SIGNATURE_TOLERANCE_SECONDS,
  type SignatureRefusal,
  type VerifiedBy,
  verifySignature,
} from "../domain/signatures.js";
import { ApiError, invalidBody, notFound } from "../base/api-error.js";
import { isRateLimit, rateLimitHeaders, tokenBucket } from "../core/rate-limit.js";
import {
  decodeUtf8,
  isFormType,
  isJsonType,
  JsonRefusal,
  parseJsonObject,
  parseJsonText,
  textProblem,
} from "../http/body.js";
import { Reply } from "../http/reply.js";
import type { HeaderReader } from "../base/headers.js";
import type { RawBody } from "../http/types.js";
import type { WebhookEndpoint } from "../domain/webhook-config.js";
import {
  inboxKeep,
  loggedBody,
  loggedHeaders,
  type RefusalLogInput,
  type RefusalReason,
} from "../domain/webhook-inbox.js";
import type { WebhookReceipt } from "../ports/storage/webhooks.js";
import type { WebhookInbox } from "../core/webhook-inbox.js";

/** Row ids, `whr_<16 hex>-<counter>`: unique across processes (random prefix), no randomness drawn per delivery. */
const nextRowId = idSource("whr_");

const SIGNATURE_MESSAGES: Record<SignatureRefusal, string> = {
  signature_missing: "missing webhook signature",
  signature_invalid: "invalid webhook signature",
  timestamp_out_of_tolerance: `webhook signature timestamp more than ${SIGNATURE_TOLERANCE_SECONDS / 60} minutes from the server's clock`,
};

/** 401 `invalid_signature`, `details.reason` saying why (never the secret or the signature). */
export const invalidSignature = (reason: SignatureRefusal) =>
  new ApiError(401, "invalid_signature", SIGNATURE_MESSAGES[reason], { details: { reason } });

/**
 * Check a delivery's signature when the endpoint has a secret (401 otherwise):
 * which secret verified it, or null for an unsigned endpoint.
 */
export function verifyDelivery(
  endpoint: WebhookEndpoint,
  body: RawBody,
  headers: HeaderReader,
  nowMs: number,
): VerifiedBy | null {
  if (endpoint.signingSecret === null) return null;
  const verdict = verifySignature({
    signature: endpoint.signature,
    secrets: { current: endpoint.signingSecret, previous: endpoint.previousSecret },
    body: body.bytes,
    headers,
    nowMs,
  });
  if (!verdict.ok) throw invalidSignature(verdict.reason);
  return verdict.verifiedBy;
}

/**
 * POST /api/webhooks/{endpointId}: one delivery becomes one row. Order of
 * refusals: unknown endpoint 404, body over the limit 413, rate limit 429,
 * signature 401, media type 415, body 400 — and a refused delivery stores
 * nothing. Every delivery to a known endpoint is recorded in its log
 * (webhook-inbox.md): a stored or duplicate one with its row, in the same
 * commit; a refused one through `ctx.inbox`, off the sender's path.
 */
export async function receiveWebhook(
  ctx: HandlerContext,
  endpointId: string,
  body: RawBody,
  headers: HeaderReader,
): Promise<Reply> {
  const endpoint = await ctx.storage.webhooks.getWebhookEndpoint(endpointId);
  if (!endpoint) throw notFound("webhook endpoint");
  const now = ctx.clock.now();
  const delivery: DeliveryFacts = {
    id: nextDeliveryId(),
    receivedAt: isoTime(now),
    receivedMs: now,
    sourceIp: ctx.clientAddress,
    verifiedBy: null,
    replayOf: null,
  };
  try {
    if (body.tooLarge) throw body.tooLarge;
    // One token from the connection's bucket, or 429; the RateLimit-* headers are a fresh object the receipt takes
    // over.
    const rate = ctx.settings.webhookRatePerSecond;
    let rateHeaders: Record<string, string> = {};
    if (isRateLimit(rate)) {
      const limit = tokenBucket(rate);
      const decision = await ctx.rateLimiter.take(`webhook:${endpoint.connectionId}`, limit, now);
      rateHeaders = rateLimitHeaders(decision, limit, DELIVERY_REFUSAL, ctx.settings.rateLimitHeaders, "webhook");
    }
    delivery.verifiedBy = verifyDelivery(endpoint, body, headers, now);
    const result = await ingestDelivery(ctx, endpoint, body, headers, delivery);
    ctx.operations.metrics?.webhook(result.duplicate ? "duplicate" : "stored", null, endpoint.connectionId);
    ctx.operations.changeRetention?.due();
    // The receipt as text directly (the one response every delivery gets); the same JSON as JSON.stringify.
    // A new row's id is ours (`whr_`, hex, `-`, base36): nothing to escape. A first delivery's id came from the store.
    const idJson = result.duplicate ? JSON.stringify(result.id) : `"${result.id}"`;
    const text = `{"ok":true,"id":${idJson},"duplicate":${result.duplicate}}`;
    return Reply.adoptJsonText(200, text, rateHeaders);
  } catch (error) {
    refused(ctx, endpoint, body, headers, delivery, error);
    throw error;
  }
}

/** What the log says of a delivery besides what the body and headers say. */
export interface DeliveryFacts {
  id: string;
  receivedAt: string;
  /** `receivedAt` in epoch ms. */
  receivedMs: number;
  sourceIp: string | null;
  verifiedBy: VerifiedBy | null;
  replayOf: string | null;
}

/** Delivery log ids, `whd_<16 hex>-<counter>` (as row ids: unique across processes, nothing random per delivery). */
export const nextDeliveryId = idSource("whd_");

/**
 * A checked delivery into its endpoint's dataset: parsed (415, 400), flattened
 * (400 past MAX_DATASET_COLUMNS columns), stored with its log entry in one
 * commit. What the receiver and a replay share.
 */
export async function ingestDelivery(
  ctx: {
    storage: HandlerContext["storage"];
    settings: HandlerContext["settings"];
    inbox: Pick<WebhookInbox, "bounds" | "takeSuppressed">;
  },
  endpoint: WebhookEndpoint,
  body: RawBody,
  headers: HeaderReader,
  delivery: DeliveryFacts,
): Promise<WebhookReceipt> {
  const payload = parsePayload(body);
  const { receivedAt, sourceIp } = delivery;
  const id = nextRowId();
  const row: Row = emptyRow();
  row._id = id;
  row._receivedAt = receivedAt;
  row._sourceIp = sourceIp;
  flattenPayload(payload, row);
  // Metadata wins over payload fields of the same name (their columns stay first).
  row._id = id;
  row._receivedAt = receivedAt;
  row._sourceIp = sourceIp;
  const columns = columnsOf(row);
  if (columns.length > MAX_DATASET_COLUMNS) {
    throw new ApiError(
      400,
      "invalid_body",
      `body: the payload has ${columns.length - 3} fields once flattened; at most ${MAX_DATASET_COLUMNS - 3} are stored`,
      {
        details: { reason: "too_many_columns", limit: MAX_DATASET_COLUMNS - 3 },
      },
    );
  }
  const dedupKey = dedupKeyOf(headers, payload);
  const { inbox } = ctx;
  return ctx.storage.webhooks.ingestWebhookRow({
    datasetId: endpoint.datasetId,
    dedupKey,
    row,
    columns,
    retainRows: endpoint.retainRows ?? ctx.settings.webhookRetainRows,
    receivedAt,
    log: {
      id: delivery.id,
      connectionId: endpoint.connectionId,
      receivedAt,
      detail: {
        sourceIp,
        deliveryKey: dedupKey,
        headers: loggedHeaders(headers),
        body: null,
        bodyEncoding: null,
        bodyTruncated: false,
        contentType: body.contentType,
        verifiedBy: delivery.verifiedBy,
        suppressed: inbox.takeSuppressed(endpoint.connectionId),
        replayOf: delivery.replayOf,
      },
      keep: inboxKeep(inbox.bounds, delivery.receivedMs),
    },
  });
}

/**
 * Refusals the receiver counted in metrics itself (with their connection), so the request observer does not count them
 * again.
 */
export const countedRefusals = new WeakSet<object>();

/** A refused delivery into the log (and the metrics), as `refusalOf` names it. Never throws. */
function refused(
  ctx: Pick<HandlerContext, "inbox" | "operations">,
  endpoint: WebhookEndpoint,
  body: RawBody,
  headers: HeaderReader,
  delivery: DeliveryFacts,
  error: unknown,
): void {
  ctx.inbox.refused(refusalEntry(ctx.inbox.bounds.bodyBytes, endpoint, body, headers, delivery, error));
  const metrics = ctx.operations.metrics;
  if (metrics && error !== null && typeof error === "object") {
    metrics.webhook("rejected", error instanceof ApiError ? error.code : "internal", endpoint.connectionId);
    countedRefusals.add(error);
  }
}

/**
 * The log entry of a refused delivery: its reason and status, its headers (redacted) and up to `bodyBytes` of its body.
 */
export function refusalEntry(
  bodyBytes: number,
  endpoint: WebhookEndpoint,
  body: RawBody,
  headers: HeaderReader,
  delivery: DeliveryFacts,
  error: unknown,
): RefusalLogInput {
  const { reason, status } = refusalOf(error);
  return {
    id: delivery.id,
    connectionId: endpoint.connectionId,
    receivedAt: delivery.receivedAt,
    reason,
    status,
    detail: {
      sourceIp: delivery.sourceIp,
      deliveryKey: null,
      headers: loggedHeaders(headers),
      ...loggedBody(body.tooLarge ? null : body.bytes, bodyBytes),
      contentType: body.contentType,
      verifiedBy: null,
      suppressed: 0,
      replayOf: delivery.replayOf,
    },
  };
}

/**
 * The log's reason and status of a failure (webhook-inbox.md): the refusal's own, a store's fault, or an unexpected one
 * (500).
 */
export function refusalOf(error: unknown): { reason: RefusalReason; status: number } {
  if (!(error instanceof ApiError)) return { reason: "storage_unavailable", status: 500 };
  const { status } = error;
  const detail = error.details?.reason;
  if (
    status === 401 &&
    (detail === "signature_missing" || detail === "signature_invalid" || detail === "timestamp_out_of_tolerance")
  )
    return { reason: detail, status };
  if (status === 401) return { reason: "signature_invalid", status };
  if (status === 413) return { reason: "body_too_large", status };
  if (status === 415) return { reason: "unsupported_media_type", status };
  if (status === 429 || error.code === "rate_limiter_unavailable") return { reason: "rate_limited", status };
  if (status === 400 && detail === "too_many_columns") return { reason: "too_many_columns", status };
  if (status >= 500) return { reason: "storage_unavailable", status };
  return { reason: "invalid_body", status };
}

const DELIVERY_REFUSAL = "too many deliveries to this webhook endpoint; retry later";

/**
 * A JSON object, or a form whose fields become string columns (GitHub's form
 * mode: one `payload` field holding JSON). Both follow the rules of every
 * JSON body (parseJsonValue): a field name or value holding NUL is 400.
 */
export function parsePayload(body: RawBody): Record<string, unknown> {
  if (isJsonType(body.contentType)) return parseJsonObject(body.bytes);
  if (!isFormType(body.contentType)) {
    throw new ApiError(
      415,
      "unsupported_media_type",
      "send the body as application/json or application/x-www-form-urlencoded",
    );
  }
  if (body.bytes.byteLength === 0) throw invalidBody("body is empty; send at least one form field");
  const form = new URLSearchParams(decodeUtf8(body.bytes));
  const fields: Record<string, unknown> = Object.create(null);
  let count = 0;
  for (const [key, value] of form) {
    count++;
    checkFormText(key, "a field name");
    checkFormText(value, JSON.stringify(key));
    const previous = fields[key];
    if (previous === undefined) fields[key] = value;
    else if (Array.isArray(previous)) previous.push(value);
    else fields[key] = [previous, value];
  }
  if (count === 0) throw invalidBody("body has no form fields");
  const single = count === 1 ? fields.payload : undefined;
  if (typeof single === "string") {
    let value: unknown;
    try {
      value = parseJsonText(single);
    } catch (error) {
      // Not JSON after all: kept as an ordinary `payload` field. JSON that breaks a rule is refused like a JSON body.
      if (!(error instanceof JsonRefusal) || error.problem !== "not_json") throw payloadRefusal(error);
    }
    if (value !== null && typeof value === "object" && !Array.isArray(value)) return value as Record<string, unknown>;
  }
  return fields;
}

function checkFormText(text: string, what: string): void {
  const problem = textProblem(text);
  if (problem !== null)
    throw new ApiError(
      400,
      "invalid_body",
      `body: form field ${what} ${problem}; text may not contain NUL or unpaired surrogates`,
    );
}

function payloadRefusal(error: unknown): unknown {
  if (!(error instanceof JsonRefusal)) return error;
  return new ApiError(
    400,
    "invalid_body",
    `body: the payload field: ${error.message}`,
    error.at === undefined ? {} : { details: { path: error.at } },
  );
}

function columnsOf(row: Row): Column[] {
  const columns: Column[] = [];
  for (const name of Object.keys(row)) columns.push({ name, type: typeOfValue(row[name]) });
  return columns;
}
