import type { ConnectionRecord } from "./model.js";
import { signatureOf, type WebhookSignature } from "./signature-schemes.js";

/**
 * A webhook connection as the receiver needs it. It is read from a
 * connection of type `webhook` whose config is
 * `{ endpointId, signingSecret, retainRows, signature?, previousSigningSecret?, previousSecretValidUntil? }`,
 * and the dataset whose `connectionId` is that connection. The stores build
 * it with `endpointFromConnection` below.
 */
export interface WebhookEndpoint {
  connectionId: string;
  teamId: string;
  name: string;
  /** The dataset its rows land in. */
  datasetId: string;
  /** The path segment of /api/webhooks/{endpointId}. */
  endpointId: string;
  /** null (or an empty/absent config value) means unsigned requests are accepted. */
  signingSecret: string | null;
  /**
   * Most recent rows kept; older rows are trimmed. null (absent in the
   * connection config) means the host's default, `settings.webhookRetainRows`.
   */
  retainRows: number | null;
  /** How deliveries are signed (`config.signature`); `{ scheme: "auto" }` when the config names none. */
  signature: Readonly<WebhookSignature>;
  /**
   * The secret a rotation with overlap replaced, accepted until `validUntilMs`
   * (epoch ms; the receiver compares it with its clock). null: none, and
   * always null when `signingSecret` is.
   */
  previousSecret: { secret: string; validUntilMs: number } | null;
}

/** A change of a webhook connection's settings (`WebhookStore.updateWebhookSettings`); absent fields are left alone. */
export interface WebhookSettings {
  /** The new secret; null removes it and any previous secret with it. */
  signingSecret?: string | null;
  /**
   * With a new `signingSecret`: the secret it replaces (when there is one
   * and it differs) stays valid as the previous secret until this ISO time,
   * replacing any earlier previous secret. Without it (or null), a new
   * secret leaves no previous secret. Ignored without `signingSecret`.
   */
  previousSecretValidUntil?: string | null;
  /** null: back to the host's default. */
  retainRows?: number | null;
  /** null: back to `auto`. */
  signature?: WebhookSignature | null;
}

/** The longest overlap a rotated secret may have: 7 days. */
export const MAX_SECRET_OVERLAP_SECONDS = 7 * 24 * 3600;

/**
 * Where a webhook connection's config keeps the secret a rotation with
 * overlap replaced, and until when (an ISO time) it is still accepted.
 * Next to `signingSecret`, so the two change in one write. Never shown:
 * the admin API answers `signed` instead of the secrets.
 */
export const PREVIOUS_SECRET = "previousSigningSecret";
export const PREVIOUS_SECRET_UNTIL = "previousSecretValidUntil";

/**
 * The endpoint view of a webhook connection's config
 * `{ endpointId, signingSecret, retainRows, signature?, previousSigningSecret?, previousSecretValidUntil? }`.
 * A missing or empty secret reads as none (and then no previous secret
 * either); a missing or invalid retention as the host's default (null); a
 * missing or invalid signature as `auto`.
 */
export function endpointFromConnection(connection: ConnectionRecord, datasetId: string): WebhookEndpoint {
  const { config } = connection;
  const { endpointId, signingSecret, retainRows } = config;
  const secret = typeof signingSecret === "string" && signingSecret !== "" ? signingSecret : null;
  return {
    connectionId: connection.id,
    teamId: connection.teamId,
    name: connection.name,
    datasetId,
    endpointId: String(endpointId),
    signingSecret: secret,
    retainRows: typeof retainRows === "number" && Number.isInteger(retainRows) && retainRows >= 1 ? retainRows : null,
    signature: signatureOf(config.signature),
    previousSecret: secret === null ? null : previousSecretOf(config),
  };
}

function previousSecretOf(config: Record<string, unknown>): WebhookEndpoint["previousSecret"] {
  const secret = config[PREVIOUS_SECRET];
  const until = config[PREVIOUS_SECRET_UNTIL];
  const validUntilMs = typeof until === "string" ? Date.parse(until) : Number.NaN;
  if (typeof secret !== "string" || secret === "" || !Number.isFinite(validUntilMs)) return null;
  return { secret, validUntilMs };
}

/** The config a new webhook connection is stored with (`createWebhookConnection`). */
export function newWebhookConfig(endpoint: {
  endpointId: string;
  signingSecret: string | null;
  retainRows: number | null;
  signature?: WebhookSignature | null;
}): Record<string, unknown> {
  const config: Record<string, unknown> = {
    endpointId: endpoint.endpointId,
    signingSecret: endpoint.signingSecret,
    retainRows: endpoint.retainRows,
  };
  if (endpoint.signature) config.signature = endpoint.signature;
  return config;
}

/**
 * A webhook connection's config after `updateWebhookSettings` (the rule every
 * store applies inside its one atomic write): see `WebhookStore.updateWebhookSettings`.
 */
export function webhookConfigWith(
  current: Readonly<Record<string, unknown>>,
  settings: WebhookSettings,
): Record<string, unknown> {
  const config = { ...current };
  if (settings.signingSecret !== undefined) {
    const replaced = current.signingSecret;
    const keep = settings.previousSecretValidUntil ?? null;
    if (settings.signingSecret === null || keep === null) {
      delete config[PREVIOUS_SECRET];
      delete config[PREVIOUS_SECRET_UNTIL];
    } else if (typeof replaced === "string" && replaced !== "" && replaced !== settings.signingSecret) {
      config[PREVIOUS_SECRET] = replaced;
      config[PREVIOUS_SECRET_UNTIL] = keep;
    }
    config.signingSecret = settings.signingSecret;
  }
  if (settings.retainRows !== undefined) config.retainRows = settings.retainRows;
  if (settings.signature !== undefined) {
    if (settings.signature === null) delete config.signature;
    else config.signature = settings.signature;
  }
  return config;
}

/**
 * A config replaced whole (the admin's `PUT /connections/{id}`): a secret
 * changed there, or removed, leaves no previous secret behind (no overlap,
 * as before rotation had one).
 */
export function withoutStalePreviousSecret(
  before: Readonly<Record<string, unknown>>,
  after: Record<string, unknown>,
): Record<string, unknown> {
  if (before.signingSecret === after.signingSecret) return after;
  const config = { ...after };
  delete config[PREVIOUS_SECRET];
  delete config[PREVIOUS_SECRET_UNTIL];
  return config;
}
