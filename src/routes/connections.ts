import { z } from "zod";
import { QUERY_LIMIT, queryConnection } from "../handlers/connections.js";
import { intParam, jsonObjectParam } from "../http/query.js";
import { authed } from "../routing.js";
import { errorEnvelopeSchema } from "../schemas/common.js";

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

const metadataTabular = z.object({
  connectionId: z.string(),
  connectionName: z.string(),
  datasetId: z.string(),
  datasetName: z.string(),
  sourceType: z.string().describe("the connection type: memory, postgres, arcgis or a host's own"),
  returnedRows: z.number().int(),
  offset: z.number().int(),
  limit: z.number().int(),
  hasMore: z.boolean().describe("rows beyond offset + returnedRows may exist; page on with offset"),
  columns: z.array(z.string()),
  orderBy: z.string().nullable(),
  orderDirection: z.enum(["ASC", "DESC"]),
  fetchedAt: z.string().describe("ISO 8601 time the upstream answered (earlier than now when cached or stale)"),
});

const tabularResponse = z.object({
  success: z.boolean(),
  data: z.array(z.record(z.string(), z.unknown())),
  cached: z.boolean(),
  stale: z.literal(true).optional(),
  metadata: metadataTabular,
});

const geojsonResponse = z.object({
  success: z.boolean(),
  geojson: z.record(z.string(), z.unknown()).describe("the upstream FeatureCollection, untouched"),
  metadata: z.object({ connectionId: z.string(), datasetId: z.string(), sourceType: z.string(), truncated: z.boolean() }),
  cached: z.boolean(),
  stale: z.literal(true).optional(),
});

export const connectionRoutes = [
  authed({
    method: "GET",
    path: "/connections/:id/query",
    auth: "bearer",
    scope: "data:read",
    tag: "Connections",
    summary: "Query the source behind a connection (cached, rate-limited; GeoJSON for spatial sources)",
    query: connectionQuery,
    // 502 upstream_unavailable: the source failed and no last good result may be served; 504 upstream_timeout: it took too long.
    responses: { 200: z.union([tabularResponse, geojsonResponse]), 502: errorEnvelopeSchema, 504: errorEnvelopeSchema },
    handle: ({ params, query, headers }, ctx) => queryConnection(ctx, params.id!, query, headers),
  }),
];
