import { isIP } from "node:net";
import type { ConnectorRegistry } from "../ports/connector.js";
import { signatureProblem } from "../domain/signature-schemes.js";
import { MAX_RETAIN_ROWS } from "./webhooks.js";
import { validationFailed } from "./schemas.js";

/**
 * A connection's config checked before it is stored, by type. Upstream
 * addresses follow the SSRF rules: http(s) or postgres URLs only, no
 * credentials inside an http URL, and never a link-local, unspecified or
 * multicast host (cloud metadata services live at 169.254.169.254).
 * Loopback and private networks stay allowed: a host's ArcGIS server or
 * warehouse is often internal.
 */
export function checkConnectionConfig(type: string, config: Record<string, unknown>, connectors: ConnectorRegistry): void {
  switch (type) {
    case "webhook":
      return checkWebhookConfig(config);
    case "memory":
      return checkMemoryConfig(config);
    case "arcgis":
      checkUrl(config.url, "$.config.url", ["http:", "https:"]);
      return optionalString(config, "token");
    case "postgres":
      return checkUrl(config.url, "$.config.url", ["postgres:", "postgresql:"]);
    default:
      if (!Object.hasOwn(connectors, type)) throw validationFailed("$.type", `no connector handles connections of type ${type}`);
  }
}

const ENDPOINT_ID = /^[A-Za-z0-9_-]{8,200}$/;

function checkWebhookConfig(config: Record<string, unknown>): void {
  for (const key of Object.keys(config)) {
    if (!["endpointId", "signingSecret", "retainRows", "signature"].includes(key)) throw validationFailed(`$.config.${key}`, "unknown field");
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
    if (typeof retainRows !== "number" || !Number.isInteger(retainRows) || retainRows < 1 || retainRows > MAX_RETAIN_ROWS) {
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
        throw validationFailed(`$.config.layers.${name}.featureCollection`, "a layer carries a GeoJSON featureCollection");
      }
      const max = layer.maxRecordCount;
      if (max !== undefined && (typeof max !== "number" || !Number.isInteger(max) || max < 1)) {
        throw validationFailed(`$.config.layers.${name}.maxRecordCount`, "maxRecordCount is a positive integer");
      }
    }
  }
}

function checkUrl(value: unknown, path: string, protocols: readonly string[]): void {
  let url: URL;
  try {
    if (typeof value !== "string") throw new Error();
    url = new URL(value);
  } catch {
    throw validationFailed(path, "a valid URL is required");
  }
  if (!protocols.includes(url.protocol)) throw validationFailed(path, `the URL must start with ${protocols.map((p) => `${p}//`).join(" or ")}`);
  if (url.protocol.startsWith("http") && (url.username !== "" || url.password !== "")) {
    throw validationFailed(path, "credentials do not belong in the URL; use the connector's token setting");
  }
  if (url.hostname === "" && url.protocol.startsWith("http")) throw validationFailed(path, "the URL needs a host");
  if (isForbiddenHost(url.hostname)) throw validationFailed(path, "the URL's host is a link-local, unspecified or multicast address");
}

/** Link-local (metadata services), unspecified and multicast addresses, v4 and v6. */
export function isForbiddenHost(hostname: string): boolean {
  const host = hostname.replace(/^\[|\]$/g, "").toLowerCase();
  const version = isIP(host);
  if (version === 4) {
    const [a, b] = host.split(".").map(Number) as [number, number];
    return a === 0 || (a === 169 && b === 254) || (a >= 224 && a <= 239) || a === 255;
  }
  if (version === 6) {
    const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/.exec(host);
    if (mapped) return isForbiddenHost(mapped[1]!);
    return host === "::" || /^fe[89ab]/.test(host) || host.startsWith("ff");
  }
  return false;
}

function optionalString(config: Record<string, unknown>, key: string): void {
  if (config[key] !== undefined && typeof config[key] !== "string") throw validationFailed(`$.config.${key}`, `${key} is a string`);
}

function isObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === "object" && !Array.isArray(value);
}
