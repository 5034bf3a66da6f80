import type { ConnectionRecord } from "./model.js";

/**
 * A webhook connection as the receiver needs it. It is read from a
 * connection of type `webhook` whose config is
 * `{ endpointId, signingSecret, retainRows }`, and the dataset whose
 * `connectionId` is that connection.
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
}

/**
 * The endpoint view of a webhook connection's config
 * `{ endpointId, signingSecret, retainRows }`. A missing or empty secret
 * reads as none; a missing or invalid retention as the host's default (null).
 */
export function endpointFromConnection(connection: ConnectionRecord, datasetId: string): WebhookEndpoint {
  const { endpointId, signingSecret, retainRows } = connection.config;
  return {
    connectionId: connection.id,
    teamId: connection.teamId,
    name: connection.name,
    datasetId,
    endpointId: String(endpointId),
    signingSecret: typeof signingSecret === "string" && signingSecret !== "" ? signingSecret : null,
    retainRows: typeof retainRows === "number" && Number.isInteger(retainRows) && retainRows >= 1 ? retainRows : null,
  };
}
