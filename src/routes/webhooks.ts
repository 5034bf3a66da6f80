import { z } from "zod";
import { receiveWebhook } from "../handlers/webhooks.js";
import { open, type RawBody } from "../routing.js";

const receiptSchema = z.object({
  ok: z.literal(true),
  id: z.string().describe("`_id` of the stored row; for a duplicate, the first delivery's row"),
  duplicate: z.boolean(),
});

export const webhookReceiverRoutes = [
  open<Record<string, never>, RawBody>({
    method: "POST",
    path: "/webhooks/:id",
    auth: "none",
    tag: "Webhooks",
    summary: "Receive a webhook delivery (JSON or form-encoded) and store it as one row",
    body: { kind: "raw" },
    responses: { 200: receiptSchema },
    // Deliveries are not API calls: no credential, and the usage log would double the writes on the hot path.
    logged: false,
    handle: ({ params, body, headers }, ctx) => receiveWebhook(ctx, params.id!, body, headers),
  }),
];
