import type { Column, Row } from "../../domain/model.js";

/** A webhook connection as the receiver needs it. */
export interface WebhookEndpoint {
  connectionId: string;
  teamId: string;
  name: string;
  /** The dataset its rows land in. */
  datasetId: string;
  /** The path segment of /api/webhooks/{endpointId}. */
  endpointId: string;
  signingSecret: string | null;
  /** Most recent rows kept; older rows are trimmed. */
  retainRows: number;
}

export interface WebhookStore {
  getWebhookEndpoint(endpointId: string): Promise<WebhookEndpoint | null>;
  /**
   * MUST be atomic: when `dedupKey` is non-null and a retained row of this
   * dataset was stored with it, nothing is written and that row's `_id` is
   * returned with `duplicate: true` — 20 concurrent calls with one key store
   * exactly one row. Otherwise the row is appended (its `_id` is in `row`),
   * the dataset's columns widen by `columns`, rowCount/updatedAt move, and the
   * oldest rows beyond `retainRows` are trimmed (their dedup keys with them).
   * Resolves only once the row is durable.
   */
  ingestWebhookRow(input: {
    datasetId: string;
    dedupKey: string | null;
    row: Row;
    columns: Column[];
    retainRows: number;
    receivedAt: string;
  }): Promise<{ id: string; duplicate: boolean }>;
  /** Change signing secret and/or retention of a webhook connection. Returns null when unknown. */
  updateWebhookSettings(
    connectionId: string,
    settings: { signingSecret?: string | null; retainRows?: number },
  ): Promise<WebhookEndpoint | null>;
  /** Create a webhook connection and its (empty) dataset in one transaction. */
  createWebhookConnection(input: {
    connection: { id: string; teamId: string; name: string; createdAt: string };
    endpoint: { endpointId: string; signingSecret: string | null; retainRows: number };
    dataset: { id: string; name: string };
  }): Promise<WebhookEndpoint>;
}
