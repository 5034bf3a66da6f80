import { randomBytes } from "node:crypto";
import type { ApiSettings } from "../context/settings.js";
import type { Ports } from "../context/ports.js";
import { eventId, randomId } from "../domain/crypto.js";
import type { Actor } from "../domain/model.js";
import { signatureProblem, type WebhookSignature } from "../domain/signature-schemes.js";
import { isoTime } from "../domain/time.js";
import { MAX_SECRET_OVERLAP_SECONDS, type WebhookEndpoint, type WebhookSettings } from "../domain/webhook-config.js";
import { ApiError, notFound } from "../base/api-error.js";
import { validationFailed } from "./schemas.js";

/** A webhook connection as the host sees it. The secret itself is never echoed. */
export interface WebhookConnectionInfo {
  connectionId: string;
  datasetId: string;
  teamId: string;
  name: string;
  endpointId: string;
  /** Where the sender POSTs: `{appUrl}/api/webhooks/{endpointId}`. */
  url: string;
  /** Whether deliveries must be signed. */
  signed: boolean;
  /** Rows kept (the host default when the connection sets none). */
  retainRows: number;
  /** How deliveries must be signed (`{ scheme: "auto" }` unless set). */
  signature: WebhookSignature;
  /** While a rotation's overlap lasts: when the replaced secret stops being accepted (ISO time); else null. */
  previousSecretValidUntil: string | null;
}

/** How a new secret replaces the current one, and who makes the change. */
export interface WebhookSecretOptions {
  /**
   * Seconds the replaced secret stays valid too (0 to 7 days, default 0:
   * from now on only the new one), so a sender switched during the overlap
   * never sees a 401. More than 7 days is 422.
   */
  overlapSeconds?: number;
  by?: ChangedBy;
}

/** Who made a change: a user of the host, or the host itself. */
export type ChangedBy = { userId: string } | undefined;

export interface WebhookAdmin {
  /**
   * Create a webhook connection and its empty dataset. Its endpoint id is
   * random and high-entropy (~190 bits): an unsigned endpoint is protected
   * by nothing else. `signingSecret` is optional (see setWebhookSecret).
   */
  createWebhookConnection(input: {
    teamId: string;
    name: string;
    signingSecret?: string | null;
    retainRows?: number;
    /** How deliveries are signed (default `{ scheme: "auto" }`); an unknown scheme is 422. */
    signature?: WebhookSignature;
    createdBy?: ChangedBy;
  }): Promise<WebhookConnectionInfo>;
  getWebhookConnection(connectionId: string): Promise<WebhookConnectionInfo>;
  /**
   * Require signatures made with this secret (1–1024 characters; a `whsec_`
   * secret must carry base64 key bytes). With `overlapSeconds` the secret it
   * replaces is accepted too until the overlap ends (audited with its end).
   */
  setWebhookSecret(
    connectionId: string,
    secret: string,
    options?: WebhookSecretOptions,
  ): Promise<WebhookConnectionInfo>;
  /**
   * Replace the secret by a new random `whsec_` secret, returned once.
   * Deliveries signed with the old one fail from now on, or, with
   * `overlapSeconds`, once the overlap ends.
   */
  rotateWebhookSecret(
    connectionId: string,
    options?: WebhookSecretOptions,
  ): Promise<{ connection: WebhookConnectionInfo; secret: string }>;
  /** How deliveries must be signed from the next one on; null: back to `auto`. An unknown scheme is 422. */
  setWebhookSignature(
    connectionId: string,
    signature: WebhookSignature | null,
    by?: ChangedBy,
  ): Promise<WebhookConnectionInfo>;
  /** Accept unsigned deliveries again (every secret goes). */
  removeWebhookSecret(connectionId: string, by?: ChangedBy): Promise<WebhookConnectionInfo>;
  /** Keep the most recent `retainRows` rows (1–1,000,000); lowering it trims at once. */
  setWebhookRetention(connectionId: string, retainRows: number, by?: ChangedBy): Promise<WebhookConnectionInfo>;
}

export const MAX_RETAIN_ROWS = 1_000_000;

export function webhookAdmin(ports: Ports, settings: ApiSettings): WebhookAdmin {
  const { storage, clock } = ports;
  const isoNow = () => new Date(clock.now()).toISOString();
  const overlapEnd = (overlapSeconds: number | undefined) => overlapEndAt(clock.now(), overlapSeconds);

  const info = (endpoint: WebhookEndpoint): WebhookConnectionInfo => ({
    connectionId: endpoint.connectionId,
    datasetId: endpoint.datasetId,
    teamId: endpoint.teamId,
    name: endpoint.name,
    endpointId: endpoint.endpointId,
    url: `${settings.appUrl}/api/webhooks/${encodeURIComponent(endpoint.endpointId)}`,
    signed: endpoint.signingSecret !== null,
    retainRows: endpoint.retainRows ?? settings.webhookRetainRows,
    signature: { ...endpoint.signature },
    previousSecretValidUntil:
      endpoint.previousSecret && endpoint.previousSecret.validUntilMs > clock.now()
        ? isoTime(endpoint.previousSecret.validUntilMs)
        : null,
  });

  async function actorOf(by: ChangedBy): Promise<Actor> {
    const user = by ? await storage.identity.getUser(by.userId) : null;
    if (by && !user) throw notFound("user");
    return user
      ? { type: "user", id: user.id, email: user.email }
      : { type: "system", id: "host", name: "host application" };
  }

  async function endpointOf(connectionId: string): Promise<WebhookEndpoint> {
    const connection = await storage.catalog.getConnection(connectionId);
    const endpointId = connection?.type === "webhook" ? connection.config.endpointId : undefined;
    const endpoint = typeof endpointId === "string" ? await storage.webhooks.getWebhookEndpoint(endpointId) : null;
    if (!endpoint || endpoint.connectionId !== connectionId) throw notFound("webhook connection");
    return endpoint;
  }

  /** Apply a settings change and write its audit event (never the secret; the overlap's end when one is kept). */
  async function change(
    connectionId: string,
    update: WebhookSettings,
    action: string,
    by: ChangedBy,
    extra: Record<string, unknown> = {},
  ): Promise<WebhookConnectionInfo> {
    const actor = await actorOf(by);
    const updated = await storage.webhooks.updateWebhookSettings(connectionId, update);
    if (!updated) throw notFound("webhook connection");
    const details = { ...extra };
    if (update.previousSecretValidUntil && updated.previousSecret) {
      details.previousSecretValidUntil = isoTime(updated.previousSecret.validUntilMs);
    }
    await storage.audit.appendAuditEvent(
      {
        id: eventId(),
        time: isoNow(),
        teamId: updated.teamId,
        category: "audit",
        action,
        actor,
        target: { type: "connection", id: connectionId },
        outcome: "success",
        ip: null,
        userAgent: null,
        details,
      },
      clock.now(),
    );
    return info(updated);
  }

  return {
    async createWebhookConnection(input) {
      const team = await storage.identity.getTeam(input.teamId);
      if (!team) throw notFound("team");
      const name = input.name.trim();
      if (name === "" || name.length > 200)
        throw invalid("name", "a webhook connection needs a name of 1 to 200 characters");
      const secret = input.signingSecret ?? null;
      if (secret !== null) checkSecret(secret);
      if (input.retainRows !== undefined) checkRetention(input.retainRows);
      if (input.signature !== undefined) checkSignature(input.signature);
      const actor = await actorOf(input.createdBy);
      const connectionId = randomId("conn_");
      const createdAt = isoNow();
      const endpoint = await storage.webhooks.createWebhookConnection({
        connection: { id: connectionId, teamId: team.id, name, createdAt },
        endpoint: {
          endpointId: randomId("whk_", 32),
          signingSecret: secret,
          retainRows: input.retainRows ?? null,
          signature: input.signature ?? null,
        },
        dataset: { id: `ds_${connectionId}`, name },
      });
      await storage.audit.appendAuditEvent(
        {
          id: eventId(),
          time: createdAt,
          teamId: team.id,
          category: "audit",
          action: "webhook.created",
          actor,
          target: { type: "connection", id: connectionId },
          outcome: "success",
          ip: null,
          userAgent: null,
          details: { name, signed: secret !== null, datasetId: endpoint.datasetId },
        },
        clock.now(),
      );
      return info(endpoint);
    },

    async getWebhookConnection(connectionId) {
      return info(await endpointOf(connectionId));
    },

    async setWebhookSecret(connectionId, secret, options = {}) {
      checkSecret(secret);
      const update = { signingSecret: secret, previousSecretValidUntil: overlapEnd(options.overlapSeconds) };
      return change(connectionId, update, "webhook.secret.set", options.by);
    },

    async rotateWebhookSecret(connectionId, options = {}) {
      const previousSecretValidUntil = overlapEnd(options.overlapSeconds);
      const secret = generateWebhookSecret();
      const connection = await change(
        connectionId,
        { signingSecret: secret, previousSecretValidUntil },
        "webhook.secret.rotated",
        options.by,
      );
      return { connection, secret };
    },

    async setWebhookSignature(connectionId, signature, by) {
      if (signature !== null) checkSignature(signature);
      return change(connectionId, { signature }, "webhook.signature.changed", by, {
        signature: signature ?? { scheme: "auto" },
      });
    },

    async removeWebhookSecret(connectionId, by) {
      return change(connectionId, { signingSecret: null }, "webhook.secret.removed", by);
    },

    async setWebhookRetention(connectionId, retainRows, by) {
      checkRetention(retainRows);
      return change(connectionId, { retainRows }, "webhook.retention.changed", by, { retainRows });
    },
  };
}

/**
 * A Standard Webhooks secret: `whsec_` + base64 of 32 random bytes. Works for the hex scheme too (keyed by the whole
 * string).
 */
export function generateWebhookSecret(): string {
  return `whsec_${randomBytes(32).toString("base64")}`;
}

const invalid = (parameter: string, message: string) =>
  new ApiError(400, "invalid_parameter", message, { details: { parameter } });

function checkSecret(secret: string): void {
  if (typeof secret !== "string" || secret.trim() === "" || secret.length > 1024) {
    throw invalid("signingSecret", "a signing secret is 1 to 1024 characters");
  }
  if (secret.startsWith("whsec_") && !/^[A-Za-z0-9+/]+={0,2}$/.test(secret.slice(6))) {
    throw invalid("signingSecret", "a whsec_ secret carries its key in base64 after the prefix");
  }
}

function checkSignature(signature: WebhookSignature): void {
  const problem = signatureProblem(signature);
  if (problem) throw validationFailed(`$.signature${problem.path}`, problem.message);
}

/** When an overlap of `overlapSeconds` from now ends (null: none); 422 beyond 7 days. */
function overlapEndAt(nowMs: number, overlapSeconds: number | undefined): string | null {
  if (overlapSeconds === undefined || overlapSeconds === 0) return null;
  if (!Number.isInteger(overlapSeconds) || overlapSeconds < 0 || overlapSeconds > MAX_SECRET_OVERLAP_SECONDS) {
    throw validationFailed(
      "$.overlapSeconds",
      `overlapSeconds is an integer from 0 to ${MAX_SECRET_OVERLAP_SECONDS} (7 days)`,
    );
  }
  return isoTime(nowMs + overlapSeconds * 1000);
}

function checkRetention(retainRows: number): void {
  if (!Number.isInteger(retainRows) || retainRows < 1 || retainRows > MAX_RETAIN_ROWS) {
    throw invalid("retainRows", `retainRows is an integer from 1 to ${MAX_RETAIN_ROWS}`);
  }
}
