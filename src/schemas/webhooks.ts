import { z } from "zod";

export const webhookReceiptSchema = z
  .object({
    ok: z.literal(true),
    id: z.string().describe("`_id` of the stored row; for a duplicate, the first delivery's row"),
    duplicate: z.boolean().describe("true when this delivery was stored before (same delivery id)"),
  })
  .meta({ id: "WebhookReceipt", description: "The delivery is stored (or was already)" });

/** The request body, for the document only: the handler flattens whatever object arrives. */
export const webhookPayloadSchema = z.record(z.string(), z.unknown()).meta({
  id: "WebhookPayload",
  description:
    "One event, stored as one row: nested objects flatten to dot-separated columns, arrays are kept as JSON strings.",
});
