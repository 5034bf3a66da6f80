import type { ConnectionRecord, Row } from "../domain/model.js";
import { selectColumns } from "../domain/rows.js";
import {
  type Connector,
  type ConnectorQuery,
  type ConnectorResult,
  InvalidQueryError,
  UpstreamThrottledError,
  UpstreamUnavailableError,
} from "../ports/connector.js";
import type { Resolver } from "../domain/addresses.js";
import { ForbiddenAddressError } from "./dial-guard.js";
import { type GuardedHttp, guardedHttp, type UpstreamResponse } from "./guarded-http.js";
import { connectionSecrets, scrubUpstreamText } from "./scrub.js";

export interface ArcgisConnectorOptions {
  /** Upstream call timeout when the connection's config sets none (`config.timeoutMs`), ms. Default 10 s. */
  timeoutMs?: number;
  /** Largest upstream response body (`config.maxResponseBytes`), bytes. Default 10 MiB. */
  maxResponseBytes?: number;
  /**
   * Whether services on loopback and private networks may be reached.
   * Default true: a host's ArcGIS server is often internal. Set false when
   * the people who write connection URLs are not trusted with the host's
   * network (`createDataApi` passes its `allowPrivateUpstreams`).
   * Link-local (cloud metadata), unspecified and multicast addresses are
   * never reached either way.
   */
  allowPrivateAddresses?: boolean;
  /** How the service's host name becomes addresses (default `dns.lookup`); each is judged before it is dialled. */
  resolve?: Resolver;
}

/**
 * An ArcGIS FeatureServer layer over HTTP. `config.url` is the service
 * (`https://host/arcgis/rest/services/X/FeatureServer`), the dataset's
 * source is the layer id, and `config.token` (optional) is sent as `token`.
 *
 * GeoJSON: `GET {url}/{layer}/query?f=geojson&<params>`; `truncated` from
 * `exceededTransferLimit` (under `properties` or at top level). Tabular:
 * `f=json` with `where`, `orderByFields`, `resultOffset` and
 * `resultRecordCount` built from the query; rows are the features' attributes.
 *
 * SSRF: the origin and path come only from the configuration; `params`
 * become query-string values and cannot change host, scheme, port or path;
 * redirects are never followed; every call has a timeout and a size cap.
 * The host is judged as it is dialled: a literal address in any spelling,
 * and a name by every address it resolves to, the very addresses connected
 * to (sockets come from this connector's own pool, all opened so).
 */
export function arcgisConnector(options: ArcgisConnectorOptions = {}): Connector {
  const http = guardedHttp({ allowPrivate: options.allowPrivateAddresses ?? true, resolve: options.resolve });
  return {
    isSpatial: () => true,
    async query(connection, query) {
      const target = queryUrl(connection, query);
      const body = await fetchJson(
        target,
        {
          timeoutMs: positiveInt(connection.config.timeoutMs) ?? options.timeoutMs ?? 10_000,
          maxBytes: positiveInt(connection.config.maxResponseBytes) ?? options.maxResponseBytes ?? 10 * 1024 * 1024,
          signal: query.signal,
          secrets: connectionSecrets(connection.config),
        },
        http,
      );
      if (query.format === "geojson") {
        const { features } = body;
        if (!Array.isArray(features))
          throw new UpstreamUnavailableError("the upstream answer is not a FeatureCollection");
        const properties = isObject(body.properties) ? body.properties : {};
        const truncated = body.exceededTransferLimit === true || properties.exceededTransferLimit === true;
        return { kind: "geojson", featureCollection: { ...body, features }, truncated };
      }
      if (!Array.isArray(body.features)) throw new UpstreamUnavailableError("the upstream answer has no features");
      const rows: Row[] = body.features.map((f) =>
        selectColumns(isObject(f) && isObject(f.attributes) ? f.attributes : {}, null),
      );
      const hasMore = rows.length > query.limit || body.exceededTransferLimit === true;
      return { kind: "rows", rows: rows.slice(0, query.limit), hasMore };
    },
    async close() {
      http.close();
    },
  };
}

/** The one URL this query may reach: the configured origin and path, `/{layer}/query`, and a query string. */
export function queryUrl(connection: ConnectionRecord, query: ConnectorQuery): URL {
  const configured = connection.config.url;
  let base: URL;
  try {
    base = new URL(typeof configured === "string" ? configured : "");
  } catch {
    throw new UpstreamUnavailableError("the connection has no valid service url");
  }
  if (base.protocol !== "https:" && base.protocol !== "http:")
    throw new UpstreamUnavailableError("the service url must be http or https");
  if (query.source === null || !/^\d{1,9}$/.test(query.source)) {
    throw new UpstreamUnavailableError("the dataset's source must be a numeric layer id");
  }
  const target = new URL(base.href);
  target.pathname = `${base.pathname.replace(/\/+$/, "")}/${query.source}/query`;
  target.hash = "";
  const search = new URLSearchParams();
  if (query.format === "geojson") {
    for (const [name, value] of Object.entries(query.params ?? {})) {
      if (name === "f" || name === "token" || value === null || value === undefined) continue;
      search.append(name, typeof value === "object" ? JSON.stringify(value) : String(value));
    }
    if (!search.has("where")) search.set("where", "1=1");
    if (!search.has("outFields")) search.set("outFields", "*");
    search.set("f", "geojson");
  } else {
    search.set("where", whereClause(query.filters));
    search.set("outFields", "*");
    search.set("returnGeometry", "false");
    if (query.orderBy !== null)
      search.set("orderByFields", `${fieldName(query.orderBy, "orderBy")} ${query.orderDirection}`);
    search.set("resultOffset", String(query.offset));
    search.set("resultRecordCount", String(query.limit + 1));
    search.set("f", "json");
  }
  if (typeof connection.config.token === "string") search.set("token", connection.config.token);
  target.search = search.toString();
  // Belt and braces: nothing above can move the call elsewhere, and this says so.
  if (target.origin !== base.origin)
    throw new UpstreamUnavailableError("refusing a call outside the configured service");
  return target;
}

/** An SQL-92 `where` of exact matches; field names are plain identifiers, strings are quoted. */
function whereClause(filters: Record<string, unknown> | null): string {
  const terms = Object.entries(filters ?? {}).map(([name, value]) => {
    const field = fieldName(name, "filters");
    if (value === null) return `${field} IS NULL`;
    if (typeof value === "string") return `${field} = '${value.replace(/'/g, "''")}'`;
    if (typeof value === "number" && Number.isFinite(value)) return `${field} = ${value}`;
    if (typeof value === "boolean") return `${field} = ${value ? 1 : 0}`;
    throw new InvalidQueryError(
      "filters",
      `filter values on an ArcGIS layer are strings, numbers, booleans or null (${name})`,
    );
  });
  return terms.length > 0 ? terms.join(" AND ") : "1=1";
}

function fieldName(name: string, parameter: string): string {
  if (!/^[A-Za-z_][A-Za-z0-9_]{0,127}$/.test(name)) throw new InvalidQueryError(parameter, `not a field name: ${name}`);
  return name;
}

async function fetchJson(
  target: URL,
  limits: { timeoutMs: number; maxBytes: number; signal: AbortSignal | undefined; secrets: readonly string[] },
  http: GuardedHttp,
): Promise<Record<string, unknown>> {
  const timeout = AbortSignal.timeout(limits.timeoutMs);
  const signal = AbortSignal.any([timeout, ...(limits.signal ? [limits.signal] : [])]);
  const unreachable = (error: unknown) => {
    if (error instanceof ForbiddenAddressError) return new UpstreamUnavailableError(error.message);
    const why = timeout.aborted ? `no answer within ${limits.timeoutMs} ms` : "cannot reach the service";
    return new UpstreamUnavailableError(why);
  };
  let response: UpstreamResponse;
  try {
    response = await http.get(target, { signal, headers: { accept: "application/geo+json, application/json" } });
  } catch (error) {
    throw unreachable(error);
  }
  if (response.status === 429) {
    response.discard();
    throw new UpstreamThrottledError("the service is throttling requests", retryAfter(response.header("retry-after")));
  }
  if (response.status >= 300 && response.status < 400) {
    response.discard();
    throw new UpstreamUnavailableError("the service answered with a redirect, which is not followed");
  }
  if (response.status < 200 || response.status >= 300) {
    response.discard();
    throw new UpstreamUnavailableError(`the service answered HTTP ${response.status}`);
  }
  const text = await readCapped(response, limits.maxBytes, () => (timeout.aborted ? unreachable(null) : null));
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    throw new UpstreamUnavailableError("the service answered something other than JSON");
  }
  if (!isObject(body)) throw new UpstreamUnavailableError("the service answered something other than a JSON object");
  // ArcGIS reports many failures as HTTP 200 with an `error` object.
  if (isObject(body.error)) {
    const code = body.error.code;
    if (code === 429) throw new UpstreamThrottledError("the service is throttling requests");
    // The service's own words may echo the request (its URL, the token): scrubbed before a client or a log sees them.
    const message =
      typeof body.error.message === "string"
        ? scrubUpstreamText(body.error.message, limits.secrets, 200)
        : "unknown error";
    throw new UpstreamUnavailableError(
      `the service reported an error${typeof code === "number" ? ` ${code}` : ""}: ${message}`,
    );
  }
  return body;
}

/** The body as text, refusing more than `maxBytes` (declared or streamed); `interrupted` says why it was cut off. */
async function readCapped(
  response: UpstreamResponse,
  maxBytes: number,
  interrupted: () => Error | null,
): Promise<string> {
  const tooLarge = () => new UpstreamUnavailableError(`the service's answer is larger than ${maxBytes} bytes`);
  const declared = Number(response.header("content-length"));
  if (Number.isFinite(declared) && declared > maxBytes) {
    response.discard();
    throw tooLarge();
  }
  const decoder = new TextDecoder();
  let size = 0;
  let text = "";
  try {
    for await (const chunk of response.body) {
      size += chunk.byteLength;
      if (size > maxBytes) {
        response.discard();
        throw tooLarge();
      }
      text += decoder.decode(chunk, { stream: true });
    }
  } catch (error) {
    if (error instanceof UpstreamUnavailableError) throw error;
    throw interrupted() ?? new UpstreamUnavailableError("the service's answer was cut off");
  }
  return text + decoder.decode();
}

function retryAfter(header: string | null): number | null {
  if (header === null || !/^\d{1,6}$/.test(header.trim())) return null;
  return Number(header.trim());
}

function positiveInt(value: unknown): number | null {
  return typeof value === "number" && Number.isInteger(value) && value > 0 ? value : null;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === "object" && !Array.isArray(value);
}
