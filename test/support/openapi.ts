import { z } from "zod";
import type { DataApi } from "../../src/server/api.js";
import {
  createOpenApiDocument,
  type JsonSchema,
  type OpenApiDocument,
  type OpenApiResponse,
} from "../../src/routes/openapi-document.js";

/**
 * Checks responses against the OpenAPI document the API serves. `setup().call`
 * runs every response of the handler tests through it, so a route whose
 * answers drift from its declared schemas fails the tests that exercise it.
 */
export interface ResponseCheck {
  method: string;
  path: string;
  status: number;
  contentType: string | null;
  json: unknown;
}

const documents = new WeakMap<DataApi["routes"], OpenApiDocument>();
const validators = new Map<string, z.ZodType>();

export function documentOf(api: Pick<DataApi, "routes">): OpenApiDocument {
  let document = documents.get(api.routes);
  if (!document) {
    document = createOpenApiDocument(api.routes);
    documents.set(api.routes, document);
  }
  return document;
}

/** Throws when a JSON response of a documented operation is undocumented or does not match its schema. */
export function assertMatchesDocument(api: Pick<DataApi, "routes">, check: ResponseCheck): void {
  const document = documentOf(api);
  const template = findPath(document, check.path);
  if (!template) return; // not an operation (unknown path: the router's 404)
  const operation = document.paths[template]![check.method.toLowerCase() as "get"];
  if (!operation) return; // 405 or a preflight: not an operation either
  const where = `${check.method} ${template}`;
  const documented = operation.responses[String(check.status)];
  if (!documented) {
    throw new Error(
      `${where} answered ${check.status}, which the OpenAPI document does not list; declare it in the route's responses`,
    );
  }
  const response = resolve<OpenApiResponse>(document, documented);
  const schema = response.content?.["application/json"]?.schema;
  if (!schema) return;
  // A download (text/csv, application/x-ndjson) the operation documents besides JSON.
  const mediaType = check.contentType?.split(";")[0]!.trim();
  if (mediaType && mediaType !== "application/json" && response.content?.[mediaType]) return;
  if (!check.contentType?.startsWith("application/json")) {
    throw new Error(`${where} ${check.status}: documented as application/json, answered ${check.contentType}`);
  }
  const key = `${where} ${check.status}`;
  let validator = validators.get(key);
  if (!validator) {
    validator = z.fromJSONSchema(inline(document, schema) as Parameters<typeof z.fromJSONSchema>[0]);
    validators.set(key, validator);
  }
  const result = validator.safeParse(check.json);
  if (!result.success) {
    throw new Error(`${where} ${check.status} does not match the OpenAPI document:\n${z.prettifyError(result.error)}`);
  }
}

/** The document path template matching a concrete path (`/api/v1/datasets/ds_1` → `/api/v1/datasets/{id}`). */
export function findPath(document: OpenApiDocument, path: string): string | undefined {
  const pathname = new URL(path, "http://x").pathname;
  const params = (template: string) => template.split("{").length;
  // A literal segment wins over a parameter (`/space/{object}` vs a fixed path).
  const templates = Object.keys(document.paths).sort((a, b) => params(a) - params(b));
  return templates.find((template) => {
    const pattern = template
      .split(/\{[^}]+\}/)
      .map((part) => part.replace(/[.*+?^$()|[\]\\]/g, "\\$&"))
      .join("[^/]+");
    return new RegExp(`^${pattern}$`).test(pathname);
  });
}

function resolve<T>(document: OpenApiDocument, value: T | { $ref: string }): T {
  if (value && typeof value === "object" && "$ref" in value) {
    const [, , section, name] = value.$ref.split("/");
    return (document.components as unknown as Record<string, Record<string, T>>)[section!]![name!]!;
  }
  return value as T;
}

/** Replace `#/components/schemas/X` references by the schemas themselves. */
function inline(document: OpenApiDocument, schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map((item) => inline(document, item));
  if (!schema || typeof schema !== "object") return schema;
  const ref = (schema as { $ref?: unknown }).$ref;
  if (typeof ref === "string" && ref.startsWith("#/components/schemas/")) {
    return inline(document, document.components.schemas[ref.slice("#/components/schemas/".length)]);
  }
  const out: JsonSchema = {};
  for (const [key, value] of Object.entries(schema)) out[key] = inline(document, value);
  return out;
}
