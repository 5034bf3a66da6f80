import type { ConnectionRecord } from "./model.js";
import type { WebhookEndpoint } from "../ports/storage/webhooks.js";

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
