import type { ConnectionRecord, Row } from "../domain/model.js";

/** A query against an upstream source, normalised by the API edge. */
export interface ConnectorQuery {
  /** The dataset's upstream source (table name, layer id). */
  source: string | null;
  limit: number;
  offset: number;
  filters: Record<string, unknown> | null;
  orderBy: string | null;
  orderDirection: "ASC" | "DESC";
  format: "rows" | "geojson";
  /** Upstream parameters passed unchanged (GeoJSON only). */
  params: Record<string, unknown> | null;
  signal?: AbortSignal;
}

export type ConnectorResult =
  | { kind: "rows"; rows: Row[]; hasMore: boolean }
  | { kind: "geojson"; featureCollection: unknown; truncated: boolean };

/** An upstream source type (memory, postgres, arcgis, or a host's own). */
export interface Connector {
  /** Whether `format=geojson` is available. */
  spatial: boolean;
  query(connection: ConnectionRecord, query: ConnectorQuery): Promise<ConnectorResult>;
}

/** Connectors by connection type. */
export type ConnectorRegistry = Readonly<Record<string, Connector>>;
