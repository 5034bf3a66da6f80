import { receiveWebhook } from "../handlers/webhooks.js";
import type { RawBody } from "../http/types.js";
import { open } from "./route-def.js";
import { webhookPayloadSchema, webhookReceiptSchema } from "../schemas/webhooks.js";

export const webhookReceiverRoutes = [
  open<Record<string, never>, RawBody>({
    method: "POST",
    path: "/webhooks/:id",
    operationId: "receiveWebhook",
    auth: "none",
    tag: "Webhooks",
    summary: "Receive a webhook delivery (JSON or form-encoded) and store it as one row",
    // A body over the limit is answered by the handler, once it knows the endpoint: the log records the 413.
    body: { kind: "raw", tooLarge: "handler" },
    bodySchema: webhookPayloadSchema,
    responses: { 200: webhookReceiptSchema },
    // Deliveries are not API calls: no credential, and the usage log would double the writes on the hot path.
    logged: false,
    handle: ({ params, body, headers }, ctx) => receiveWebhook(ctx, params.id!, body, headers),
  }),
];

/** The webhook receiver's route template as request log lines and metrics name it. */
export const WEBHOOK_ROUTE = `/api${webhookReceiverRoutes[0]!.path}`;
