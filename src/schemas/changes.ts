import { z } from "zod";

const at = z.string().describe("when the change was stored (ISO 8601)");
const row = z.record(z.string(), z.unknown()).describe("the whole row after the change, as a rows read serves it");

export const changeSchema = z
  .discriminatedUnion("op", [
    z.object({
      op: z.literal("insert"),
      rowId: z.string().nullable().describe("the row's _id; null for rows without one (uploads)"),
      row,
      at,
    }),
    z.object({ op: z.literal("update"), rowId: z.string(), row, at }),
    z.object({ op: z.literal("delete"), rowId: z.string(), at }),
    z.object({
      op: z.literal("trim"),
      upTo: z.string().describe("retention removed every webhook row stored up to and including this _id"),
      at,
    }),
    z
      .object({ op: z.literal("reset"), at })
      .describe("the rows were replaced as a whole: re-read them, then follow from that read's changesCursor"),
  ])
  .meta({ id: "Change", description: "One change of a dataset's or input table's rows" });

export const changesPageSchema = z
  .object({
    changes: z.array(changeSchema).describe("oldest first, each exactly once along the cursor"),
    cursor: z.string().describe("opaque; send it back for the next changes (an empty page returns the cursor sent)"),
    hasMore: z.boolean().describe("more changes are ready: read on at once"),
    lagSeconds: z
      .number()
      .int()
      .describe("how far behind the present the feed reads (a write still open holds it back)"),
  })
  .meta({
    id: "ChangesPage",
    description:
      "One page of a change feed. With `Accept: text/event-stream` the same changes come as Server-Sent Events: " +
      "`id:` the cursor after the change, `event: change`, `data:` the change as JSON.",
  });
