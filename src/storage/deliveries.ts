import type { WebhookDelivery, WebhookReceipt } from "../ports/storage/webhooks.js";

/** A delivery waiting in a store's group commit, answered once its batch is durable (SQLite, PostgreSQL). */
export interface PendingDelivery {
  input: WebhookDelivery;
  resolve: (receipt: WebhookReceipt) => void;
  reject: (error: unknown) => void;
}
