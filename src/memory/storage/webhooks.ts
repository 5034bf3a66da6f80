import type { WebhookStore } from "../../ports/storage/webhooks.js";
import type { MemoryState } from "./state.js";

// TODO(issue 5): webhook ingest, de-duplication and retention.
export function memoryWebhooks(_state: MemoryState): WebhookStore {
  const pending = (): never => {
    throw new Error("the webhook receiver is not implemented yet");
  };
  return {
    async getWebhookEndpoint() {
      return null;
    },
    ingestWebhookRow: pending,
    updateWebhookSettings: pending,
    createWebhookConnection: pending,
  };
}
