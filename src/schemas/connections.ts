import { z } from "zod";
import { rowSchema } from "./common.js";

const stale = z
  .literal(true)
  .optional()
  .describe("present when the upstream failed or was throttled and this is the last good result");

export const connectionRowsSchema = z
  .object({
    success: z.boolean(),
    data: z.array(rowSchema),
    cached: z.boolean(),
    stale,
    metadata: z.object({
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
    }),
  })
  .meta({ id: "ConnectionQueryRows", description: "A tabular query result (format=json)" });

export const featureCollectionSchema = z
  .object({ features: z.array(z.unknown()) })
  .catchall(z.unknown())
  .meta({ id: "FeatureCollection", description: "The upstream's GeoJSON FeatureCollection, untouched" });

export const connectionGeoJsonSchema = z
  .object({
    success: z.boolean(),
    geojson: featureCollectionSchema,
    metadata: z.object({
      connectionId: z.string(),
      datasetId: z.string(),
      sourceType: z.string(),
      truncated: z.boolean().describe("the upstream capped the answer at its record count: more features exist"),
    }),
    cached: z.boolean(),
    stale,
  })
  .meta({ id: "ConnectionQueryGeoJson", description: "A spatial query result (format=geojson)" });

export const connectionQueryResultSchema = z
  .union([connectionRowsSchema, connectionGeoJsonSchema])
  .meta({ id: "ConnectionQueryResult", description: "Rows (format=json, the default) or GeoJSON (format=geojson)" });
