import { z } from "zod";
import { queryParamDocs } from "./http/query.js";
import type { RouteDef } from "./routing.js";
import { errorEnvelopeSchema } from "./schemas/common.js";

/**
 * The OpenAPI 3.1 document, generated from the route table: the same zod
 * schemas that validate queries and shape responses describe them here, so
 * the document cannot drift from the code.
 */

export type JsonSchema = Record<string, unknown>;

export interface OpenApiOperation {
  operationId: string;
  summary: string;
  tags: string[];
  security: Array<Record<string, string[]>>;
  "x-scope": string | null;
  parameters: OpenApiParameter[];
  requestBody?: { required: boolean; content: Record<string, { schema: JsonSchema }> };
  responses: Record<string, OpenApiResponse | { $ref: string }>;
}

export interface OpenApiParameter {
  name: string;
  in: "path" | "query" | "header";
  required: boolean;
  description?: string;
  schema: JsonSchema;
  style?: "form";
  explode?: boolean;
}

export interface OpenApiResponse {
  description: string;
  headers?: Record<string, { $ref: string } | { description: string; schema: JsonSchema }>;
  content?: Record<string, { schema: JsonSchema }>;
}

export interface OpenApiDocument {
  openapi: "3.1.0";
  info: { title: string; version: string; description: string };
  jsonSchemaDialect: string;
  servers: Array<{ url: string; description?: string; variables?: Record<string, { default: string; description: string }> }>;
  tags: Array<{ name: string }>;
  paths: Record<string, Partial<Record<"get" | "post" | "put" | "patch" | "delete", OpenApiOperation>>>;
  components: {
    securitySchemes: Record<string, unknown>;
    schemas: Record<string, JsonSchema>;
    responses: Record<string, OpenApiResponse>;
    headers: Record<string, { description: string; schema: JsonSchema }>;
  };
}

export interface OpenApiOptions {
  /** The application origin; paths carry their mount (`/api/v1/...`). Default: a `{app_url}` server variable. */
  serverUrl?: string;
  /** Document version (default: the package's API version, `1.0.0`). */
  version?: string;
  /** Default: `Dataport Data Access API`. */
  title?: string;
}

type RouteEntry = { readonly mount: string; readonly route: RouteDef };

/** Error statuses with the codes each may carry (see the README's error table). */
const ERROR_RESPONSES: Record<number, { name: string; codes: string }> = {
  400: { name: "BadRequest", codes: "`invalid_parameter` (details.parameter names it), `invalid_body`, `team_required`" },
  401: { name: "Unauthorized", codes: "`unauthorized` (with `WWW-Authenticate: Bearer`), `invalid_signature` (webhooks)" },
  403: { name: "Forbidden", codes: "`plan_required`, `insufficient_scope` (details.required names the scope), `forbidden`" },
  404: { name: "NotFound", codes: "`not_found`: unknown id, outside the key's allowlist, or a team the person is not in (indistinguishable)" },
  405: { name: "MethodNotAllowed", codes: "`method_not_allowed`: the storage area this change belongs to is read-only (the host supplies it)" },
  409: { name: "Conflict", codes: "`conflict` (details.current holds the current row), `idempotency_key_in_use`" },
  413: { name: "PayloadTooLarge", codes: "`payload_too_large`" },
  415: { name: "UnsupportedMediaType", codes: "`unsupported_media_type`" },
  422: { name: "UnprocessableEntity", codes: "`validation_failed` (details.unknownColumns / invalidColumns; on the admin API details.path names the first problem), `idempotency_key_reused`" },
  429: { name: "TooManyRequests", codes: "`rate_limited`, with `Retry-After` (seconds) and `RateLimit-*` headers" },
  500: { name: "InternalError", codes: "`internal`; the message reveals no internals" },
  502: { name: "BadGateway", codes: "`upstream_unavailable`: the connection's source failed" },
  503: { name: "ServiceUnavailable", codes: "`storage_unavailable`: a storage call ran past the server's storage timeout (with `Retry-After`)" },
  504: { name: "GatewayTimeout", codes: "`upstream_timeout`: the connection's source did not answer within the upstream timeout" },
};

const DESCRIPTION = `Data Access API and inbound webhook receiver.

* **Authentication**: every \`/api/v1\` call sends \`Authorization: Bearer <token>\` — an API key (scoped, allowlisted) or a session token (membership is the boundary; send \`teamId\` where asked). Each operation names the scope a key needs in \`x-scope\`.
* **Errors**: every error has the body \`{ "error": { "code", "message", "details"?, "requestId" } }\` (schema \`Error\`).
* **CORS**: every response carries \`Access-Control-Allow-Origin: *\` and \`X-Request-Id\`; a preflight \`OPTIONS\` answers 204.
* **Paging**: rows pages with \`offset\` until \`metadata.hasMore\` is false; the audit feed follows its opaque \`cursor\`.
* **Versioning**: \`/api/v1\` keeps working at least 12 months after \`/api/v2\` ships; webhooks carry no version.`;

const methods = { GET: "get", POST: "post", PUT: "put", PATCH: "patch", DELETE: "delete" } as const;

/** Build the document for a route table (`api.routes`). */
export function createOpenApiDocument(routes: ReadonlyArray<RouteEntry>, options: OpenApiOptions = {}): OpenApiDocument {
  const paths: OpenApiDocument["paths"] = {};
  const tags: string[] = [];
  for (const { mount, route } of routes) {
    const path = mount + toOpenApiPath(route.path);
    const item = (paths[path] ??= {});
    item[methods[route.method]] = operation(route);
    if (!tags.includes(route.tag)) tags.push(route.tag);
  }
  const responses: Record<string, OpenApiResponse> = {};
  for (const [status, { name, codes }] of Object.entries(ERROR_RESPONSES)) {
    responses[name] = errorResponse(Number(status), codes);
  }
  return {
    openapi: "3.1.0",
    info: { title: options.title ?? "Dataport Data Access API", version: options.version ?? "1.0.0", description: DESCRIPTION },
    jsonSchemaDialect: "https://spec.openapis.org/oas/3.1/dialect/base",
    servers: options.serverUrl
      ? [{ url: options.serverUrl }]
      : [{ url: "{app_url}", variables: { app_url: { default: "http://127.0.0.1:8787", description: "the application origin" } } }],
    tags: tags.map((name) => ({ name })),
    paths,
    components: {
      securitySchemes: {
        bearerAuth: { type: "http", scheme: "bearer", description: "An API key (`dp_live_…`) or a session token." },
        adminAuth: { type: "http", scheme: "bearer", description: "The admin token configured with `adminToken` (`--admin-token`)." },
      },
      schemas: { Error: toJsonSchema(errorEnvelopeSchema, "output") },
      responses,
      headers: {
        RequestId: { description: "Identifies the request; equals `error.requestId` on errors.", schema: { type: "string" } },
        RetryAfter: { description: "Seconds to wait before retrying.", schema: { type: "integer", minimum: 0 } },
        RateLimitLimit: { description: "Requests allowed in the window.", schema: { type: "integer" } },
        RateLimitRemaining: { description: "Requests left in the window.", schema: { type: "integer" } },
        RateLimitReset: { description: "Seconds until the window resets.", schema: { type: "integer" } },
        WwwAuthenticate: { description: "`Bearer`.", schema: { type: "string" } },
      },
    },
  };
}

/** `/datasets/:id/rows` → `/datasets/{id}/rows`. */
export function toOpenApiPath(pattern: string): string {
  return pattern.replace(/:([A-Za-z0-9_]+)\??/g, "{$1}");
}

function operation(route: RouteDef): OpenApiOperation {
  const pathParams = [...route.path.matchAll(/:([A-Za-z0-9_]+)/g)].map((m) => m[1]!);
  const parameters: OpenApiParameter[] = pathParams.map((name) => ({ name, in: "path", required: true, schema: { type: "string" } }));
  parameters.push(...queryParameters(route));
  parameters.push(...headerParameters(route));

  const op: OpenApiOperation = {
    operationId: operationId(route),
    summary: route.summary,
    tags: [route.tag],
    // OpenAPI 3.1 lets a non-OAuth requirement list role names: the scope an API key needs (session tokens need none).
    security: route.auth === "bearer" ? [{ bearerAuth: route.scope ? [route.scope] : [] }] : route.auth === "admin" ? [{ adminAuth: [] }] : [],
    "x-scope": route.auth === "bearer" ? route.scope : null,
    parameters,
    responses: successResponses(route),
  };
  if (route.body) op.requestBody = requestBody(route);
  for (const status of errorStatuses(route, pathParams.length > 0)) {
    const declared = route.responses?.[status];
    op.responses[String(status)] = declared
      ? { description: ERROR_RESPONSES[status]?.codes ?? "error", headers: requestIdHeader(), content: json(toJsonSchema(declared, "output")) }
      : { $ref: `#/components/responses/${ERROR_RESPONSES[status]!.name}` };
  }
  return op;
}

function operationId(route: RouteDef): string {
  const words = route.path
    .split("/")
    .filter(Boolean)
    .map((segment) => (segment.startsWith(":") ? `by-${segment.slice(1).replace(/\?$/, "")}` : segment));
  const camel = words
    .join("-")
    .split(/[^A-Za-z0-9]+/)
    .filter(Boolean)
    .map((w) => w[0]!.toUpperCase() + w.slice(1))
    .join("");
  return route.method.toLowerCase() + camel;
}

function queryParameters(route: RouteDef): OpenApiParameter[] {
  if (!route.query) return [];
  const schema = toJsonSchema(route.query, "input");
  const properties = (schema.properties ?? {}) as Record<string, JsonSchema>;
  const required = new Set((schema.required ?? []) as string[]);
  const shape = route.query instanceof z.ZodObject ? (route.query.shape as Record<string, z.ZodType>) : {};
  return Object.entries(properties).map(([name, property]) => {
    const { description, ...rest } = property;
    // A default of a transformed parameter is an output value, which zod leaves out of the input view.
    const field = shape[name];
    if (rest.default === undefined && field instanceof z.ZodDefault) rest.default = field.def.defaultValue;
    const param: OpenApiParameter = { name, in: "query", required: required.has(name), schema: rest };
    if (typeof description === "string") param.description = description;
    if (rest.type === "array") {
      param.style = "form";
      param.explode = true;
    }
    return param;
  });
}

function headerParameters(route: RouteDef): OpenApiParameter[] {
  const out: OpenApiParameter[] = [];
  if (route.method === "POST") {
    out.push({
      name: "Idempotency-Key",
      in: "header",
      required: false,
      description:
        route.auth === "bearer"
          ? "Replays the first response for a repeat with the same body (kept at least 24 hours, scoped to the credential and the table)."
          : "A delivery id: a repeat is stored once and answers with the first row's id and `duplicate: true`.",
      schema: { type: "string", maxLength: 255 },
    });
  }
  if (route.body?.kind === "raw") {
    for (const name of ["X-Webhook-Signature", "X-Hub-Signature-256"]) {
      out.push({
        name,
        in: "header",
        required: false,
        description: "Hex HMAC-SHA256 of the raw body keyed with the signing secret (`sha256=` prefix allowed); required when the connection has a secret.",
        schema: { type: "string" },
      });
    }
  }
  return out;
}

function requestBody(route: RouteDef): NonNullable<OpenApiOperation["requestBody"]> {
  const declared = (route.body as { schema?: z.ZodType } | undefined)?.schema;
  const schema: JsonSchema = declared ? toJsonSchema(declared, "input") : bodyByConvention(route);
  if (route.body?.kind === "raw") {
    return { required: true, content: { "application/json": { schema }, "application/x-www-form-urlencoded": { schema } } };
  }
  if (route.body?.kind === "stream") {
    const rows = { description: "Rows: a JSON array of objects, NDJSON (one object per line) or CSV with a header row." };
    return {
      required: true,
      content: { "application/json": { schema: { type: "array", items: { type: "object" } } }, "application/x-ndjson": { schema: { type: "string", ...rows } }, "text/csv": { schema: { type: "string", ...rows } } },
    };
  }
  return { required: true, content: json(schema) };
}

/** Bodies are payloads (rows, webhook events) that never pass through a schema; describe what the API expects of them. */
function bodyByConvention(route: RouteDef): JsonSchema {
  if (route.body?.kind === "raw") {
    return { type: "object", description: "One event, stored as one row: nested objects flatten to dot-separated columns, arrays are kept as JSON strings." };
  }
  const values = "Column values; only declared columns (any, when the table declares none), no `_`-prefixed names.";
  if (route.method === "PATCH") {
    return {
      type: "object",
      description: `${values} With \`expectedUpdatedAt\`, a row changed since then is refused with 409.`,
      properties: { expectedUpdatedAt: { type: "string", format: "date-time" } },
    };
  }
  return { type: "object", description: values };
}

function successResponses(route: RouteDef): OpenApiOperation["responses"] {
  const out: OpenApiOperation["responses"] = {};
  for (const [status, schema] of Object.entries(route.responses ?? {})) {
    if (Number(status) >= 400) continue;
    if (status === "204") {
      out[status] = { description: route.summary, headers: requestIdHeader() };
      continue;
    }
    out[status] = { description: route.summary, headers: requestIdHeader(), content: json(toJsonSchema(schema, "output")) };
  }
  if (Object.keys(out).length === 0) {
    const content = route.produces ? { [route.produces]: { schema: { type: "string" } } } : json({});
    out["200"] = { description: route.summary, headers: requestIdHeader(), content };
  }
  return out;
}

/** The error statuses a route can answer, from what it takes (auth, query, body, path ids) and what it declares. */
function errorStatuses(route: RouteDef, hasPathParams: boolean): number[] {
  // 503: any route may meet a storage call past the storage timeout.
  const statuses = new Set<number>([500, 503]);
  const bearer = route.auth === "bearer";
  if (route.query || route.body) statuses.add(400);
  if (bearer) [401, 403, 429].forEach((s) => statuses.add(s));
  if (hasPathParams || (route.query && "teamId" in ((toJsonSchema(route.query, "input").properties ?? {}) as JsonSchema))) statuses.add(404);
  if (route.body) [413, 415].forEach((s) => statuses.add(s));
  if (route.body?.kind === "raw") [401, 429].forEach((s) => statuses.add(s));
  if (route.body?.kind === "json-object" && bearer) statuses.add(422);
  if (route.auth === "admin") {
    statuses.add(401);
    if (route.method !== "GET") [404, 405, 409, 422].forEach((s) => statuses.add(s));
  }
  if (bearer && (route.method === "PATCH" || (route.method === "POST" && route.body))) statuses.add(409);
  for (const status of Object.keys(route.responses ?? {})) if (Number(status) >= 400) statuses.add(Number(status));
  return [...statuses].sort((a, b) => a - b);
}

function errorResponse(status: number, codes: string): OpenApiResponse {
  const headers: NonNullable<OpenApiResponse["headers"]> = requestIdHeader();
  if (status === 401) headers["WWW-Authenticate"] = { $ref: "#/components/headers/WwwAuthenticate" };
  if (status === 503) headers["Retry-After"] = { $ref: "#/components/headers/RetryAfter" };
  if (status === 429) {
    headers["Retry-After"] = { $ref: "#/components/headers/RetryAfter" };
    headers["RateLimit-Limit"] = { $ref: "#/components/headers/RateLimitLimit" };
    headers["RateLimit-Remaining"] = { $ref: "#/components/headers/RateLimitRemaining" };
    headers["RateLimit-Reset"] = { $ref: "#/components/headers/RateLimitReset" };
  }
  return { description: `Error ${status}: ${codes}.`, headers, content: json({ $ref: "#/components/schemas/Error" }) };
}

function requestIdHeader(): NonNullable<OpenApiResponse["headers"]> {
  return { "X-Request-Id": { $ref: "#/components/headers/RequestId" } };
}

function json(schema: JsonSchema): Record<string, { schema: JsonSchema }> {
  return { "application/json": { schema } };
}

/**
 * zod → JSON Schema (2020-12, OpenAPI 3.1's dialect). Query schemas are read
 * in their "input" form, with each registered helper (integers, lists, JSON
 * objects) described as a client sends it.
 */
export function toJsonSchema(schema: z.ZodType, io: "input" | "output"): JsonSchema {
  const { $schema: _dialect, ...rest } = z.toJSONSchema(schema, {
    target: "draft-2020-12",
    io,
    unrepresentable: "any",
    override(ctx) {
      const doc = queryParamDocs.get(ctx.zodSchema as unknown as z.ZodType);
      if (!doc) return;
      const description = ctx.jsonSchema.description;
      for (const key of Object.keys(ctx.jsonSchema)) delete (ctx.jsonSchema as JsonSchema)[key];
      Object.assign(ctx.jsonSchema, doc.openapi, description ? { description } : {});
    },
  }) as JsonSchema;
  return rest;
}
