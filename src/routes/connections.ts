import { z } from "zod";
import { QUERY_LIMIT, queryConnection } from "../handlers/connections.js";
import { intParam, jsonObjectParam } from "../http/query.js";
import { authed } from "./route-def.js";
import { errorEnvelopeSchema } from "../schemas/common.js";
import { connectionQueryResultSchema } from "../schemas/connections.js";

const connectionQuery = z.object({
  limit: intParam({ min: 1, max: QUERY_LIMIT.max }).default(QUERY_LIMIT.default),
  offset: intParam({ min: 0 }).default(0),
  filters: jsonObjectParam().optional(),
  orderBy: z.string().min(1, "must name a column").max(256).optional(),
  orderDirection: z
    .string()
    .transform((v) => v.toUpperCase())
    .pipe(z.enum(["ASC", "DESC"], "must be ASC or DESC"))
    .default("ASC"),
  datasetId: z.string().min(1).optional(),
  format: z.enum(["json", "geojson"], "must be json (tabular, the default) or geojson").default("json"),
  params: jsonObjectParam().optional(),
});

export const connectionRoutes = [
  authed({
    method: "GET",
    path: "/connections/:id/query",
    operationId: "queryConnection",
    auth: "bearer",
    scope: "data:read",
    tag: "Connections",
    summary: "Query the source behind a connection (cached, rate-limited; GeoJSON for spatial sources)",
    query: connectionQuery,
    // 502 upstream_unavailable: the source failed and no last good result may be served; 504 upstream_timeout: it took
    // too long.
    responses: { 200: connectionQueryResultSchema, 502: errorEnvelopeSchema, 504: errorEnvelopeSchema },
    handle: ({ params, query, headers }, ctx) => queryConnection(ctx, params.id!, query, headers),
  }),
];
