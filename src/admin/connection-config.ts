import { type AddressPolicy, hostProblem } from "../domain/addresses.js";
import { featureCollectionProblem } from "../domain/geojson.js";
import type { ConnectorRegistry } from "../ports/connector.js";
import { signatureProblem } from "../domain/signature-schemes.js";
import { MAX_RETAIN_ROWS } from "./webhooks.js";
import { validationFailed } from "./schemas.js";

/**
 * A connection's config checked before it is stored, by type. Upstream
 * addresses follow the SSRF rules: http(s) or postgres URLs only, no
 * credentials inside an http URL, and never a link-local, unspecified or
 * multicast host (cloud metadata services live at 169.254.169.254), in any
 * spelling that reaches one (`domain/addresses.ts`). Loopback and private
 * networks stay allowed unless the policy says otherwise: a host's ArcGIS
 * server or warehouse is often internal. A name is judged again, by the
 * addresses it resolves to, when a connector dials it.
 */
export function checkConnectionConfig(
  type: string,
  config: Record<string, unknown>,
  connectors: ConnectorRegistry,
  policy: AddressPolicy = { allowPrivate: true },
): void {
  switch (type) {
    case "webhook":
      return checkWebhookConfig(config);
    case "memory":
      return checkMemoryConfig(config);
    case "arcgis":
      checkHttpUrl(config.url, "$.config.url", policy);
      return optionalString(config, "token");
    case "postgres":
      return checkPostgresUrl(config.url, "$.config.url", policy);
    default:
      if (!Object.hasOwn(connectors, type))
        throw validationFailed("$.type", `no connector handles connections of type ${type}`);
  }
}

const ENDPOINT_ID = /^[A-Za-z0-9_-]{8,200}$/;

function checkWebhookConfig(config: Record<string, unknown>): void {
  for (const key of Object.keys(config)) {
    if (!["endpointId", "signingSecret", "retainRows", "signature"].includes(key))
      throw validationFailed(`$.config.${key}`, "unknown field");
  }
  const { endpointId, signingSecret, retainRows, signature } = config;
  if (endpointId !== undefined && (typeof endpointId !== "string" || !ENDPOINT_ID.test(endpointId))) {
    throw validationFailed("$.config.endpointId", "an endpoint id is 8 to 200 letters, digits, '-' or '_'");
  }
  if (signingSecret !== undefined && signingSecret !== null) {
    if (typeof signingSecret !== "string" || signingSecret.trim() === "" || signingSecret.length > 1024) {
      throw validationFailed("$.config.signingSecret", "a signing secret is 1 to 1024 characters, or null");
    }
  }
  if (retainRows !== undefined && retainRows !== null) {
    if (
      typeof retainRows !== "number" ||
      !Number.isInteger(retainRows) ||
      retainRows < 1 ||
      retainRows > MAX_RETAIN_ROWS
    ) {
      throw validationFailed("$.config.retainRows", `retainRows is an integer from 1 to ${MAX_RETAIN_ROWS}`);
    }
  }
  // null removes it (back to auto), as every webhook field.
  const problem = signature === undefined || signature === null ? null : signatureProblem(signature);
  if (problem) throw validationFailed(`$.config.signature${problem.path}`, problem.message);
}

function checkMemoryConfig(config: Record<string, unknown>): void {
  const { tables, layers } = config;
  if (tables !== undefined) {
    if (!isObject(tables)) throw validationFailed("$.config.tables", "tables is an object of source name to rows");
    for (const [name, rows] of Object.entries(tables)) {
      if (!Array.isArray(rows)) throw validationFailed(`$.config.tables.${name}`, "a table is an array of rows");
      rows.forEach((row, i) => {
        if (!isObject(row)) throw validationFailed(`$.config.tables.${name}[${i}]`, "a row is a JSON object");
      });
    }
  }
  if (layers !== undefined) {
    if (!isObject(layers)) throw validationFailed("$.config.layers", "layers is an object of layer id to layer");
    for (const [name, layer] of Object.entries(layers)) {
      if (!isObject(layer) || !isObject(layer.featureCollection)) {
        throw validationFailed(
          `$.config.layers.${name}.featureCollection`,
          "a layer carries a GeoJSON featureCollection",
        );
      }
      const problem = featureCollectionProblem(layer.featureCollection);
      if (problem) {
        const where = `$.config.layers.${name}.featureCollection${problem.path ? `.${problem.path}` : ""}`;
        throw validationFailed(where, problem.message);
      }
      const max = layer.maxRecordCount;
      if (max !== undefined && (typeof max !== "number" || !Number.isInteger(max) || max < 1)) {
        throw validationFailed(`$.config.layers.${name}.maxRecordCount`, "maxRecordCount is a positive integer");
      }
    }
  }
}

function checkUrl(value: unknown, path: string, protocols: readonly string[]): URL {
  let url: URL;
  try {
    if (typeof value !== "string") throw new Error();
    url = new URL(value);
  } catch {
    throw validationFailed(path, "a valid URL is required");
  }
  if (!protocols.includes(url.protocol))
    throw validationFailed(path, `the URL must start with ${protocols.map((p) => `${p}//`).join(" or ")}`);
  return url;
}

/** An ArcGIS service: an http(s) URL with a host the policy allows (the WHATWG parser read it as a request will). */
function checkHttpUrl(value: unknown, path: string, policy: AddressPolicy): void {
  const url = checkUrl(value, path, ["http:", "https:"]);
  if (url.username !== "" || url.password !== "") {
    throw validationFailed(path, "credentials do not belong in the URL; use the connector's token setting");
  }
  if (url.hostname === "") throw validationFailed(path, "the URL needs a host");
  refuseHost(url.hostname, path, policy);
}

/**
 * A PostgreSQL URL, every host in it judged as the driver will dial it: the
 * URL's host (percent-decoded, possibly a comma-separated list), `host=` and
 * `hostaddr=` in its query (which take the URL host's place), any spelling
 * of an address. A host that is a path is a local socket.
 */
function checkPostgresUrl(value: unknown, path: string, policy: AddressPolicy): void {
  const url = checkUrl(value, path, ["postgres:", "postgresql:"]);
  const hosts: string[] = [];
  try {
    for (const given of [url.hostname, ...url.searchParams.getAll("host"), ...url.searchParams.getAll("hostaddr")]) {
      hosts.push(
        ...decodeURIComponent(given)
          .split(",")
          .map((h) => h.trim())
          .filter((h) => h !== ""),
      );
    }
  } catch {
    throw validationFailed(path, "the URL's host is not valid percent-encoding");
  }
  if (!policy.allowPrivate) {
    if (hosts.length === 0) {
      throw validationFailed(path, "the URL needs a host (without one the driver connects to this machine)");
    }
    for (const file of ["sslcert", "sslkey", "sslrootcert"]) {
      if (url.searchParams.has(file)) {
        throw validationFailed(path, `${file} names a file of this machine; connections may not`);
      }
    }
  }
  for (const host of hosts) {
    if (host.startsWith("/")) {
      if (!policy.allowPrivate) {
        throw validationFailed(path, "the URL's host is a local socket, which connections may not reach");
      }
      continue;
    }
    refuseHost(host, path, policy);
  }
}

function refuseHost(host: string, path: string, policy: AddressPolicy): void {
  const problem = hostProblem(host, policy);
  if (problem !== null) throw validationFailed(path, `the URL's host is ${problem}, which connections may not reach`);
}

function optionalString(config: Record<string, unknown>, key: string): void {
  if (config[key] !== undefined && typeof config[key] !== "string")
    throw validationFailed(`$.config.${key}`, `${key} is a string`);
}

function isObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === "object" && !Array.isArray(value);
}
