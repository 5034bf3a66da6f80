import type { ConnectionRecord, Row } from "../domain/model.js";
import { matchesFilters, selectColumns } from "../domain/rows.js";
import {
  type Connector,
  type ConnectorQuery,
  type ConnectorResult,
  InvalidQueryError,
  UpstreamUnavailableError,
} from "../ports/connector.js";

/** A layer's record cap when its config names none (ArcGIS's usual default). */
export const DEFAULT_MAX_RECORD_COUNT = 1000;

interface MemoryLayer {
  featureCollection: { features: unknown[] } & Record<string, unknown>;
  maxRecordCount: number;
}

/**
 * The reference connector: sources held inline in the connection's config.
 * `config.tables[source]` is an array of rows; `config.layers[source]` is
 * `{ featureCollection, maxRecordCount }`. A layer answers GeoJSON (the first
 * `maxRecordCount` features, `truncated` when there were more; ArcGIS-style
 * `resultOffset`/`resultRecordCount` in `params` page it) and, tabular, the
 * features' properties as rows.
 */
export function memoryConnector(): Connector {
  return {
    // In-process data has no upstream to protect; a connection's config can still set a limit (to try stale serving).
    guardDefaults: { ratePerSecond: 1000, burst: 1000 },
    isSpatial(connection, source) {
      return source !== null && layerOf(connection, source) !== null;
    },
    async query(connection, query) {
      if (query.source === null) throw new UpstreamUnavailableError("the dataset names no source");
      const layer = layerOf(connection, query.source);
      if (query.format === "geojson") {
        if (!layer) throw new UpstreamUnavailableError(`source ${query.source} is not a layer`);
        return layerPage(layer, query.params);
      }
      const rows = layer ? layer.featureCollection.features.map(propertiesOf) : tableOf(connection, query.source);
      if (!rows) throw new UpstreamUnavailableError(`source ${query.source} does not exist`);
      return tablePage(rows, query);
    },
  };
}

/** Filter, order and page an array of rows as a SQL source would. */
export function tablePage(rows: readonly Row[], query: ConnectorQuery): ConnectorResult {
  const known = new Set<string>();
  for (const row of rows) for (const key of Object.keys(row)) known.add(key);
  for (const key of Object.keys(query.filters ?? {})) {
    if (!known.has(key)) throw new InvalidQueryError("filters", `unknown column ${key} in filters`);
  }
  if (query.orderBy !== null && !known.has(query.orderBy)) {
    throw new InvalidQueryError("orderBy", `orderBy names no column: ${query.orderBy}`);
  }
  let matching = query.filters ? rows.filter((row) => matchesFilters(row, query.filters)) : [...rows];
  if (query.orderBy !== null) {
    const column = query.orderBy;
    const descending = query.orderDirection === "DESC";
    matching = matching.sort((a, b) => compareValues(valueOf(a, column), valueOf(b, column), descending));
  }
  const page = matching.slice(query.offset, query.offset + query.limit).map((row) => selectColumns(row, null));
  return { kind: "rows", rows: page, hasMore: query.offset + page.length < matching.length };
}

function layerPage(layer: MemoryLayer, params: Record<string, unknown> | null): ConnectorResult {
  const features = layer.featureCollection.features;
  const offset = nonNegativeInt(params?.resultOffset) ?? 0;
  const requested = nonNegativeInt(params?.resultRecordCount);
  const count = Math.min(layer.maxRecordCount, requested ?? layer.maxRecordCount);
  const page = features.slice(offset, offset + count);
  // Like a feature service: truncated only when the fixed cap (not the client's own count) cut the answer.
  const truncated = count === layer.maxRecordCount && offset + page.length < features.length;
  const untouched = page.length === features.length;
  return {
    kind: "geojson",
    featureCollection: untouched ? layer.featureCollection : { ...layer.featureCollection, features: page },
    truncated,
  };
}

function layerOf(connection: ConnectionRecord, source: string): MemoryLayer | null {
  const layer = ownEntry(connection.config.layers, source);
  if (!isObject(layer) || !isObject(layer.featureCollection)) return null;
  const features = layer.featureCollection.features;
  if (!Array.isArray(features)) return null;
  const max = nonNegativeInt(layer.maxRecordCount);
  return {
    featureCollection: layer.featureCollection as MemoryLayer["featureCollection"],
    maxRecordCount: max !== null && max > 0 ? max : DEFAULT_MAX_RECORD_COUNT,
  };
}

function tableOf(connection: ConnectionRecord, source: string): Row[] | null {
  const rows = ownEntry(connection.config.tables, source);
  return Array.isArray(rows) ? rows.filter(isObject) : null;
}

/** `container[key]` only when it is the container's own entry (`constructor` is not a table). */
function ownEntry(container: unknown, key: string): unknown {
  return isObject(container) && Object.hasOwn(container, key) ? container[key] : undefined;
}

function propertiesOf(feature: unknown): Row {
  return isObject(feature) && isObject(feature.properties) ? feature.properties : Object.create(null);
}

function valueOf(row: Row, column: string): unknown {
  return Object.hasOwn(row, column) ? row[column] : null;
}

/** Order of two JSON values: nulls last either way, numbers numerically, then by type name, then by text. */
export function compareValues(a: unknown, b: unknown, descending = false): number {
  const aNull = a === null || a === undefined;
  const bNull = b === null || b === undefined;
  if (aNull || bNull) return aNull === bNull ? 0 : aNull ? 1 : -1;
  const sign = descending ? -1 : 1;
  if (typeof a === "number" && typeof b === "number") return sign * (a - b);
  if (typeof a !== typeof b) return sign * (typeof a < typeof b ? -1 : 1);
  const x = typeof a === "string" ? a : JSON.stringify(a);
  const y = typeof b === "string" ? b : JSON.stringify(b);
  return sign * (x < y ? -1 : x > y ? 1 : 0);
}

function nonNegativeInt(value: unknown): number | null {
  const n = typeof value === "string" && /^\d{1,9}$/.test(value) ? Number(value) : value;
  return typeof n === "number" && Number.isInteger(n) && n >= 0 ? n : null;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === "object" && !Array.isArray(value);
}
