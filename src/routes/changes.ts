import { z } from "zod";
import { readDatasetChanges, readTableChanges } from "../handlers/changes.js";
import { intParam } from "../http/query.js";
import { changesPageSchema } from "../schemas/changes.js";
import { errorEnvelopeSchema } from "../schemas/common.js";
import type { HeaderReader } from "../base/headers.js";
import { authed } from "./route-def.js";

const changesQuery = z.object({
  cursor: z
    .string()
    .min(1)
    .max(512, "is not a cursor this feed returned")
    .optional()
    .describe("from a changes page, or a rows read's changesCursor; absent: the oldest change kept"),
  limit: intParam({ min: 1, max: 1000 }).default(200),
  wait: intParam({ min: 0, max: 30 })
    .default(0)
    .describe("seconds to hold the request while no change is ready (long-poll)"),
});

const streamHeaders = (headers: HeaderReader) => ({
  accept: headers.get("accept"),
  lastEventId: headers.get("last-event-id"),
});

const responses = { 200: changesPageSchema, 410: errorEnvelopeSchema };

export const changeRoutes = [
  authed({
    method: "GET",
    path: "/tables/:id/changes",
    operationId: "readTableChanges",
    auth: "bearer",
    scope: "data:read",
    tag: "Input tables",
    summary:
      "The table's row changes after a cursor, each once, in order (long-poll with wait; SSE with Accept: " +
      "text/event-stream)",
    query: changesQuery,
    responses,
    alsoProduces: ["text/event-stream"],
    handle: ({ params, query, headers }, ctx) => readTableChanges(ctx, params.id!, query, streamHeaders(headers)),
  }),
  authed({
    method: "GET",
    path: "/datasets/:id/changes",
    operationId: "readDatasetChanges",
    auth: "bearer",
    scope: "data:read",
    tag: "Datasets",
    summary:
      "The dataset's row changes after a cursor, each once, in order (long-poll with wait; SSE with Accept: " +
      "text/event-stream)",
    query: changesQuery,
    responses,
    alsoProduces: ["text/event-stream"],
    handle: ({ params, query, headers }, ctx) => readDatasetChanges(ctx, params.id!, query, streamHeaders(headers)),
  }),
];
