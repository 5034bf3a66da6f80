import { z } from "zod";
import { MAX_DEDUP_KEY_LENGTH } from "../domain/dedup.js";
import { MAX_IDEMPOTENCY_KEY_LENGTH } from "../domain/idempotency.js";
import { SIGNATURE_TOLERANCE_SECONDS } from "../domain/signatures.js";
import { jsonBodyLimit } from "../http/body.js";
import { queryParamDocs } from "../http/query.js";
import type { Responses, RouteDef } from "./route-def.js";
import { rowsTextSchema, rowsUploadSchema } from "../schemas/admin.js";
import { errorEnvelopeSchema } from "../schemas/common.js";

/**
 * The OpenAPI 3.1 document, generated from the route table: the same zod
 * schemas that validate queries and shape responses describe them here, so
 * the document cannot drift from the code. A schema with an `id`
 * (`.meta({ id: "Dataset" })`) becomes a named component that operations
 * reference, so code generators (openapi-typescript, …) get a type per resource.
 */

export type JsonSchema = Record<string, unknown>;

export interface OpenApiOperation {
  operationId: string;
  summary: string;
  description?: string;
  deprecated?: boolean;
  tags: string[];
  security: Array<Record<string, string[]>>;
  "x-scope": string | null;
  parameters: OpenApiParameter[];
  requestBody?: { required: boolean; description?: string; content: Record<string, { schema: JsonSchema }> };
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
  servers: Array<{
    url: string;
    description?: string;
    variables?: Record<string, { default: string; description: string }>;
  }>;
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
  /**
   * `info.description` (Markdown). Default: the Data Access API's (authentication, errors, CORS, paging, versioning).
   */
  description?: string;
  /**
   * The largest JSON or webhook body the server takes, in bytes, as documented (default 1 MiB, the API's default
   * `maxBodyBytes`).
   */
  maxBodyBytes?: number;
  /** The largest streamed upload (bulk rows), in bytes (default 1 GiB, the API's default `maxUploadBytes`). */
  maxUploadBytes?: number;
}

type RouteEntry = { readonly mount: string; readonly route: RouteDef };

/** Error statuses with the codes each may carry (see the README's error table). */
const ERROR_RESPONSES: Record<number, { name: string; codes: string }> = {
  400: {
    name: "BadRequest",
    codes: "`invalid_parameter` (details.parameter names it), `invalid_body`, `team_required`",
  },
  401: {
    name: "Unauthorized",
    codes: "`unauthorized` (with `WWW-Authenticate: Bearer`), `invalid_signature` (webhooks)",
  },
  403: {
    name: "Forbidden",
    codes: "`plan_required`, `insufficient_scope` (details.required names the scope), `forbidden`",
  },
  404: {
    name: "NotFound",
    codes: "`not_found`: unknown id, outside the key's allowlist, or a team the person is not in (indistinguishable)",
  },
  405: {
    name: "MethodNotAllowed",
    codes: "`method_not_allowed`: the storage area this change belongs to is read-only (the host supplies it)",
  },
  409: { name: "Conflict", codes: "`conflict` (details.current holds the current row), `idempotency_key_in_use`" },
  412: {
    name: "PreconditionFailed",
    codes:
      "`precondition_failed`: `If-Match` names a version the row no longer has (details.current holds the row, " +
      "`ETag` its tag)",
  },
  410: {
    name: "Gone",
    codes:
      "`cursor_expired`: changes after this cursor are no longer kept (`changeRetentionDays`): re-read the rows " +
      "and follow their `changesCursor`",
  },
  413: { name: "PayloadTooLarge", codes: "`payload_too_large`" },
  415: { name: "UnsupportedMediaType", codes: "`unsupported_media_type`" },
  422: {
    name: "UnprocessableEntity",
    codes:
      "`validation_failed` (details.unknownColumns / invalidColumns; on the admin API details.path names the first " +
      "problem), `idempotency_key_reused`",
  },
  429: { name: "TooManyRequests", codes: "`rate_limited`, with `Retry-After` (seconds) and `RateLimit-*` headers" },
  500: { name: "InternalError", codes: "`internal`; the message reveals no internals" },
  502: { name: "BadGateway", codes: "`upstream_unavailable`: the connection's source failed" },
  503: {
    name: "ServiceUnavailable",
    codes:
      "`storage_unavailable`: the database is unavailable or a storage call ran past the storage timeout; " +
      "`rate_limiter_unavailable`: the rate limiter cannot be asked (both with `Retry-After`)",
  },
  504: {
    name: "GatewayTimeout",
    codes: "`upstream_timeout`: the connection's source did not answer within the upstream timeout",
  },
};

const DESCRIPTION = `Data Access API and inbound webhook receiver.

* **Authentication**: every \`/api/v1\` call sends \`Authorization: Bearer <token>\` — an API key (scoped, allowlisted)
* or a session token (membership is the boundary; send \`teamId\` where asked). Each operation names the scope a key
* needs in \`x-scope\`.
* **Errors**: every error has the body \`{ "error": { "code", "message", "details"?, "requestId" } }\` (schema
* \`Error\`).
* **CORS**: every response carries \`Access-Control-Allow-Origin: *\` and \`X-Request-Id\`; a preflight \`OPTIONS\`
* answers 204.
* **Paging**: rows pages with \`offset\` until \`metadata.hasMore\` is false; the audit feed and the change feeds
* (\`/tables/{id}/changes\`, \`/datasets/{id}/changes\`) follow their opaque \`cursor\`.
* **Versioning**: \`/api/v1\` keeps working at least 12 months after \`/api/v2\` ships; webhooks carry no version. A
* deprecated operation says so (\`deprecated: true\`) and its answers carry \`Deprecation\`, \`Sunset\` and \`Link: <…>;
* rel="deprecation"\`.`;

const methods = { GET: "get", POST: "post", PUT: "put", PATCH: "patch", DELETE: "delete" } as const;

/** The API's default body limits (`maxBodyBytes`, `maxUploadBytes` in src/server/api.ts). */
const DEFAULT_MAX_BODY_BYTES = 1024 * 1024;
const DEFAULT_MAX_UPLOAD_BYTES = 1024 * 1024 * 1024;

/**
 * Named schemas met while building one document: `#/components/schemas/<id>`.
 * One id must always describe one JSON Schema; a second, different one is a
 * programming error (two zod schemas given the same id, or an input view
 * differing from an output view).
 */
export class ComponentSchemas {
  readonly #schemas = new Map<string, JsonSchema>();

  add(id: string, schema: JsonSchema): void {
    if (id.startsWith("__"))
      throw new Error(
        `OpenAPI: a schema zod could not name (${id}) would become a component; give it an id or use it once`,
      );
    const known = this.#schemas.get(id);
    if (known === undefined) this.#schemas.set(id, schema);
    else if (JSON.stringify(known) !== JSON.stringify(schema))
      throw new Error(`OpenAPI: two different schemas carry the id ${id}`);
  }

  toObject(): Record<string, JsonSchema> {
    return Object.fromEntries([...this.#schemas].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
  }
}

interface Build {
  components: ComponentSchemas;
  maxBodyBytes: number;
  maxUploadBytes: number;
}

/** Build the document for a route table (`api.routes`). */
export function createOpenApiDocument(
  routes: ReadonlyArray<RouteEntry>,
  options: OpenApiOptions = {},
): OpenApiDocument {
  const build: Build = {
    components: new ComponentSchemas(),
    maxBodyBytes: options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES,
    maxUploadBytes: options.maxUploadBytes ?? DEFAULT_MAX_UPLOAD_BYTES,
  };
  // Every error response refers to it, whichever routes there are.
  toJsonSchema(errorEnvelopeSchema, "output", build.components);
  const paths: OpenApiDocument["paths"] = {};
  const tags: string[] = [];
  for (const { mount, route } of routes) {
    const path = mount + toOpenApiPath(route.path);
    const item = (paths[path] ??= {});
    item[methods[route.method]] = operation(route, build);
    if (!tags.includes(route.tag)) tags.push(route.tag);
  }
  const responses: Record<string, OpenApiResponse> = {};
  for (const [status, { name, codes }] of Object.entries(ERROR_RESPONSES)) {
    responses[name] = errorResponse(Number(status), codes);
  }
  return {
    openapi: "3.1.0",
    info: {
      title: options.title ?? "Dataport Data Access API",
      version: options.version ?? "1.0.0",
      description: options.description ?? DESCRIPTION,
    },
    jsonSchemaDialect: "https://spec.openapis.org/oas/3.1/dialect/base",
    servers: options.serverUrl
      ? [{ url: options.serverUrl }]
      : [
          {
            url: "{app_url}",
            variables: { app_url: { default: "http://127.0.0.1:8787", description: "the application origin" } },
          },
        ],
    tags: tags.map((name) => ({ name })),
    paths,
    components: {
      securitySchemes: {
        bearerAuth: { type: "http", scheme: "bearer", description: "An API key (`dp_live_…`) or a session token." },
        adminAuth: {
          type: "http",
          scheme: "bearer",
          description: "The admin token configured with `adminToken` (`--admin-token`).",
        },
      },
      schemas: build.components.toObject(),
      responses,
      headers: {
        RequestId: {
          description: "Identifies the request; equals `error.requestId` on errors.",
          schema: { type: "string" },
        },
        RetryAfter: { description: "Seconds to wait before retrying.", schema: { type: "integer", minimum: 0 } },
        RateLimitLimit: {
          description: "Requests allowed in the window (sent when the server sets a rate limit).",
          schema: { type: "integer" },
        },
        RateLimitRemaining: { description: "Requests left in the window.", schema: { type: "integer" } },
        RateLimitReset: { description: "Seconds until the window resets.", schema: { type: "integer" } },
        RateLimitPolicy: {
          description:
            'The quota policy, in the current IETF draft\'s form (sent when the server sets `rateLimitHeaders` to `policy` or `both`): `"api";q=100;w=2` — a bucket of `q` requests that fills in `w` seconds (`api`, `webhook` or `upstream`).',
          schema: { type: "string" },
        },
        RateLimit: {
          description:
            'The service limit under the policy (`rateLimitHeaders`: `policy` or `both`): `"api";r=42;t=1` — `r` requests left, the bucket full again in `t` seconds (on a 429, `t` is `Retry-After`).',
          schema: { type: "string" },
        },
        WwwAuthenticate: { description: "`Bearer`.", schema: { type: "string" } },
        ETag: {
          description:
            "A strong entity tag of the content: send it back in `If-None-Match` to be told 304 while it is " +
            "unchanged, or (a table row's) in `If-Match` to change only that version. A compressed answer's tag " +
            "ends in `-gzip` or `-br`.",
          schema: { type: "string" },
        },
        Deprecation: {
          description: "RFC 9745: when this operation was (or will be) deprecated, `@<unix seconds>`.",
          schema: { type: "string" },
        },
        Sunset: {
          description: "RFC 8594: the HTTP-date after which this operation may stop answering.",
          schema: { type: "string" },
        },
        DeprecationLink: {
          description: 'Where the deprecation is explained: `<https://…>; rel="deprecation"`.',
          schema: { type: "string" },
        },
      },
    },
  };
}

/** `/datasets/:id/rows` → `/datasets/{id}/rows`. */
export function toOpenApiPath(pattern: string): string {
  return pattern.replace(/:([A-Za-z0-9_]+)\??/g, "{$1}");
}

function operation(route: RouteDef, build: Build): OpenApiOperation {
  const pathParams = [...route.path.matchAll(/:([A-Za-z0-9_]+)/g)].map((m) => m[1]!);
  const parameters: OpenApiParameter[] = pathParams.map((name) => ({
    name,
    in: "path",
    required: true,
    schema: { type: "string" },
  }));
  parameters.push(...queryParameters(route));
  parameters.push(...headerParameters(route));

  const op: OpenApiOperation = {
    operationId: route.operationId ?? derivedOperationId(route),
    summary: route.summary,
    tags: [route.tag],
    // OpenAPI 3.1 lets a non-OAuth requirement list role names: the scope an API key needs (session tokens need none).
    security:
      route.auth === "bearer"
        ? [{ bearerAuth: route.scope ? [route.scope] : [] }]
        : route.auth === "admin"
          ? [{ adminAuth: [] }]
          : [],
    "x-scope": route.auth === "bearer" ? route.scope : null,
    parameters,
    responses: successResponses(route, build),
  };
  if (route.deprecated) {
    const { since, sunset } = route.deprecated;
    op.deprecated = true;
    op.description = `Deprecated since ${since}${sunset ? `; answers until ${sunset} (its \`Sunset\`)` : ""}. Its answers carry \`Deprecation\`, \`Sunset\` and \`Link: <…>; rel="deprecation"\`.`;
    for (const response of Object.values(op.responses)) {
      if ("$ref" in response) continue;
      response.headers = { ...response.headers, ...deprecationHeaderDocs() };
    }
  }
  if (route.body) op.requestBody = requestBody(route, build);
  for (const status of errorStatuses(route, pathParams.length > 0)) {
    const declared = route.responses?.[status];
    op.responses[String(status)] =
      declared && declared !== errorEnvelopeSchema
        ? {
            description: ERROR_RESPONSES[status]?.codes ?? "error",
            headers: requestIdHeader(),
            content: json(toJsonSchema(declared, "output", build.components)),
          }
        : { $ref: `#/components/responses/${ERROR_RESPONSES[status]!.name}` };
  }
  return op;
}

/**
 * An operationId for a route that names none, from its method and path:
 * `GET /teams/:teamId/api-keys` → `listTeamApiKeys`, `GET /users/:id` →
 * `getUser`, `PUT /users/:id/memberships/:teamId` → `putUserMembership`,
 * `POST /sessions` → `createSession`, `DELETE /api-keys/:id` → `deleteApiKey`.
 * A collection followed by its id is named in the singular.
 */
export function derivedOperationId(route: Pick<RouteDef, "method" | "path">): string {
  const segments = route.path.split("/").filter(Boolean);
  const last = segments.length - 1;
  const endsWithParam = segments[last]?.startsWith(":") ?? false;
  const words: string[] = [];
  segments.forEach((segment, i) => {
    if (segment.startsWith(":")) return;
    const member = segments[i + 1]?.startsWith(":") === true || (route.method === "POST" && i === last);
    words.push(member ? singular(segment) : segment);
  });
  const lastWord = words.at(-1) ?? "";
  const verb = {
    GET: endsWithParam || !/[^s]s$/.test(lastWord) ? "get" : "list",
    POST: "create",
    PUT: "put",
    PATCH: "update",
    DELETE: "delete",
  }[route.method];
  return verb + pascal(words.join("-"));
}

/**
 * `api-keys` → `api-key`, `businesses` → `business`, `activities` → `activity`; words not ending in a plural `s` stay.
 */
function singular(segment: string): string {
  return segment.replace(/(sses|ies|[^s]s)$/, (end) => (end === "sses" ? "ss" : end === "ies" ? "y" : end.slice(0, 1)));
}

function pascal(text: string): string {
  return text
    .split(/[^A-Za-z0-9]+/)
    .filter(Boolean)
    .map((w) => w[0]!.toUpperCase() + w.slice(1))
    .join("");
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
  const conditional = conditionalParameters(route);
  if (route.auth === "bearer" && (route.method === "POST" || route.method === "PATCH")) {
    return [
      ...conditional,
      {
        name: "Idempotency-Key",
        in: "header",
        required: false,
        description: `Replays the first response for a repeat with the same body (kept at least 24 hours, scoped to the credential and the table); 1 to ${MAX_IDEMPOTENCY_KEY_LENGTH} characters (400 invalid_parameter otherwise). The same key with another body is 422 idempotency_key_reused; while the first request runs, 409 idempotency_key_in_use.`,
        schema: { type: "string", minLength: 1, maxLength: MAX_IDEMPOTENCY_KEY_LENGTH },
      },
    ];
  }
  if (route.body?.kind === "raw") return webhookHeaders();
  return conditional;
}

/** `If-None-Match` where a route answers 304, `If-Match` where it answers 412. */
function conditionalParameters(route: RouteDef): OpenApiParameter[] {
  const responses = (route.responses ?? {}) as Responses;
  const out: OpenApiParameter[] = [];
  if (304 in responses) {
    out.push({
      name: "If-None-Match",
      in: "header",
      required: false,
      description:
        "The `ETag` of an answer the client holds: while the content is unchanged the answer is 304 with no body " +
        "(still a read, audited and counted), else the full answer with its new `ETag`.",
      schema: { type: "string" },
    });
  }
  if (412 in responses) {
    out.push({
      name: "If-Match",
      in: "header",
      required: false,
      description:
        "The row's `ETag` (from the answer that wrote or listed it): the change applies only to that version of " +
        "the row, else 412 `precondition_failed` with the current row. The HTTP form of `expectedUpdatedAt`.",
      schema: { type: "string" },
    });
  }
  return out;
}

const SIGNED =
  " A connection with a signing secret reads the headers of its scheme (`config.signature.scheme`, default `auto`); without a valid signature it answers 401 invalid_signature, `details.reason` one of `signature_missing`, `signature_invalid`, `timestamp_out_of_tolerance`.";

/**
 * What a webhook delivery may carry: delivery ids (de-duplication) and signatures, as `verifySignature` and
 * `dedupKeyOf` read them.
 */
function webhookHeaders(): OpenApiParameter[] {
  const header = (name: string, description: string, schema: JsonSchema = { type: "string" }): OpenApiParameter => ({
    name,
    in: "header",
    required: false,
    description,
    schema,
  });
  const hashed = `Any length: an id longer than ${MAX_DEDUP_KEY_LENGTH - 2} characters is compared by its SHA-256.`;
  return [
    header(
      "Idempotency-Key",
      `The delivery id: a repeat is stored once and answers with the first row's id and \`duplicate: true\`. Without it the delivery is identified by \`webhook-id\`, \`svix-id\`, \`X-GitHub-Delivery\` or any \`X-<vendor>-Delivery\` header (in that order), else by the payload's top-level \`id\` or \`event_id\`. ${hashed}`,
    ),
    header(
      "webhook-id",
      `Standard Webhooks message id: signed with the body (see \`webhook-signature\`), and the delivery id when \`Idempotency-Key\` is absent. ${hashed}`,
    ),
    header(
      "webhook-timestamp",
      `Standard Webhooks: when the message was signed, in Unix seconds; a signature is accepted within ${SIGNATURE_TOLERANCE_SECONDS} seconds of the server's clock (replays are refused).`,
      { type: "string", pattern: "^[0-9]{1,15}$" },
    ),
    header(
      "webhook-signature",
      "Standard Webhooks: space-separated `v1,<base64>` entries, each an HMAC-SHA256 of `{webhook-id}.{webhook-timestamp}.{body}`; one valid entry is enough. A `whsec_` secret is the base64 key after the prefix, any other secret is keyed by its UTF-8 bytes. Svix's `svix-id`, `svix-timestamp` and `svix-signature` are read the same way. Read by the `auto` and `standard-webhooks` schemes." +
        SIGNED,
    ),
    header(
      "X-Webhook-Signature",
      `Hex HMAC-SHA256 of the raw body keyed with the signing secret (\`sha256=\` prefix allowed): the \`auto\` and \`hmac-sha256-hex\` schemes (the latter may name another header).${SIGNED}`,
    ),
    header(
      "X-Hub-Signature-256",
      `GitHub's signature: the same hex HMAC-SHA256, \`sha256=\` prefixed: the \`auto\` and \`github\` schemes.${SIGNED}`,
    ),
    header(
      "Stripe-Signature",
      `The \`stripe\` scheme: \`t=<Unix seconds>,v1=<hex>[,v1=<hex>…]\`, each \`v1\` an HMAC-SHA256 of \`{t}.{body}\` keyed with the whole \`whsec_…\` secret; \`t\` within ${SIGNATURE_TOLERANCE_SECONDS} seconds of the server's clock.${SIGNED}`,
    ),
    header("X-Shopify-Hmac-Sha256", `The \`shopify\` scheme: base64 HMAC-SHA256 of the raw body.${SIGNED}`),
    header(
      "X-Slack-Signature",
      `The \`slack\` scheme: \`v0=<hex>\`, an HMAC-SHA256 of \`v0:{X-Slack-Request-Timestamp}:{body}\`; the timestamp within ${SIGNATURE_TOLERANCE_SECONDS} seconds of the server's clock.${SIGNED}`,
    ),
    header("X-Slack-Request-Timestamp", "The `slack` scheme: when the request was signed, in Unix seconds.", {
      type: "string",
      pattern: "^[0-9]{1,15}$",
    }),
  ];
}

function requestBody(route: RouteDef, build: Build): NonNullable<OpenApiOperation["requestBody"]> {
  const declared = route.bodySchema ?? (route.body as { schema?: z.ZodType } | undefined)?.schema;
  // Without a declared schema: a JSON object where the route takes one, else any JSON value (an array of items, say).
  const schema: JsonSchema = declared
    ? toJsonSchema(declared, "input", build.components)
    : route.body?.kind === "json"
      ? {}
      : openObject();
  const limit = `At most ${jsonBodyLimit(route.auth, build.maxBodyBytes).toLocaleString("en-US")} bytes (413 payload_too_large beyond).`;
  if (route.body?.kind === "raw") {
    return {
      required: true,
      description: `A JSON object, or a form whose fields become columns (a single \`payload\` field holding JSON is read as that JSON). ${limit}`,
      content: { "application/json": { schema }, "application/x-www-form-urlencoded": { schema } },
    };
  }
  if (route.body?.kind === "stream") {
    const text = toJsonSchema(rowsTextSchema, "input", build.components);
    return {
      required: true,
      description: `Rows: a JSON array of objects, NDJSON (one object per line) or CSV with a header row. Streamed; at most ${build.maxUploadBytes.toLocaleString("en-US")} bytes (413 payload_too_large beyond).`,
      content: {
        "application/json": { schema: toJsonSchema(rowsUploadSchema, "input", build.components) },
        "application/x-ndjson": { schema: text },
        "text/csv": { schema: text },
      },
    };
  }
  return { required: true, description: limit, content: json(schema) };
}

/** Any JSON object: generators type it `{ [key: string]: unknown }`, not an empty record. */
function openObject(): JsonSchema {
  return { type: "object", additionalProperties: true };
}

function successResponses(route: RouteDef, build: Build): OpenApiOperation["responses"] {
  const out: OpenApiOperation["responses"] = {};
  // Bearer calls carry RateLimit-* when the server sets an API rate; deliveries when it sets a webhook rate.
  const headers =
    route.auth === "bearer" || route.body?.kind === "raw"
      ? { ...requestIdHeader(), ...rateLimitHeaders() }
      : requestIdHeader();
  for (const [status, schema] of Object.entries((route.responses ?? {}) as Responses)) {
    if (Number(status) >= 400) continue;
    if (status === "204") {
      out[status] = { description: route.summary, headers };
      continue;
    }
    if (status === "304") {
      out[status] = {
        description: "Not modified: the content is the one `If-None-Match` named (no body).",
        headers: { ...headers, ...etagHeader() },
      };
      continue;
    }
    const content: Record<string, { schema: JsonSchema }> = json(toJsonSchema(schema, "output", build.components));
    if (status === "200") for (const type of route.alsoProduces ?? []) content[type] = { schema: { type: "string" } };
    out[status] = {
      description: route.summary,
      headers: route.etag ? { ...headers, ...etagHeader() } : headers,
      content,
    };
  }
  if (Object.keys(out).length === 0) {
    const content = route.produces ? { [route.produces]: { schema: { type: "string" } } } : json({});
    out["200"] = { description: route.summary, headers, content };
  }
  return out;
}

/** The error statuses a route can answer, from what it takes (auth, query, body, path ids) and what it declares. */
function errorStatuses(route: RouteDef, hasPathParams: boolean): number[] {
  // 503: any route may meet an unavailable database (or rate limiter) or a storage call past the storage timeout.
  const statuses = new Set<number>([500, 503]);
  const bearer = route.auth === "bearer";
  if (route.query || route.body || hasPathParams) statuses.add(400);
  if (bearer) [401, 403, 429].forEach((s) => statuses.add(s));
  if (
    hasPathParams ||
    (route.query && "teamId" in ((toJsonSchema(route.query, "input").properties ?? {}) as JsonSchema))
  )
    statuses.add(404);
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
    Object.assign(headers, rateLimitHeaders());
  }
  return { description: `Error ${status}: ${codes}.`, headers, content: json({ $ref: "#/components/schemas/Error" }) };
}

function etagHeader(): NonNullable<OpenApiResponse["headers"]> {
  return { ETag: { $ref: "#/components/headers/ETag" } };
}

function requestIdHeader(): NonNullable<OpenApiResponse["headers"]> {
  return { "X-Request-Id": { $ref: "#/components/headers/RequestId" } };
}

function rateLimitHeaders(): NonNullable<OpenApiResponse["headers"]> {
  return {
    "RateLimit-Limit": { $ref: "#/components/headers/RateLimitLimit" },
    "RateLimit-Remaining": { $ref: "#/components/headers/RateLimitRemaining" },
    "RateLimit-Reset": { $ref: "#/components/headers/RateLimitReset" },
    "RateLimit-Policy": { $ref: "#/components/headers/RateLimitPolicy" },
    RateLimit: { $ref: "#/components/headers/RateLimit" },
  };
}

function deprecationHeaderDocs(): NonNullable<OpenApiResponse["headers"]> {
  return {
    Deprecation: { $ref: "#/components/headers/Deprecation" },
    Sunset: { $ref: "#/components/headers/Sunset" },
    Link: { $ref: "#/components/headers/DeprecationLink" },
  };
}

function json(schema: JsonSchema): Record<string, { schema: JsonSchema }> {
  return { "application/json": { schema } };
}

const DEFS = "#/$defs/";
const COMPONENTS = "#/components/schemas/";

/**
 * zod → JSON Schema (2020-12, OpenAPI 3.1's dialect). Query schemas are read
 * in their "input" form, with each registered helper (integers, lists, JSON
 * objects) described as a client sends it. Schemas with an id go to
 * `components` (when given) and are referenced; without `components` they
 * stay in `$defs`.
 */
export function toJsonSchema(schema: z.ZodType, io: "input" | "output", components?: ComponentSchemas): JsonSchema {
  const {
    $schema: _dialect,
    $defs,
    ...rest
  } = z.toJSONSchema(schema, {
    target: "draft-2020-12",
    io,
    unrepresentable: "any",
    override(ctx) {
      const out = ctx.jsonSchema as JsonSchema;
      // An open object (a record of anything): `additionalProperties: true`, which generators read as `{ [key: string]:
      // unknown }`.
      if (isEmptyObject(out.additionalProperties)) out.additionalProperties = true;
      // JSON keys are strings anyway.
      if (isStringKeys(out.propertyNames)) delete out.propertyNames;
      const doc = queryParamDocs.get(ctx.zodSchema as unknown as z.ZodType);
      if (!doc) return;
      const description = out.description;
      for (const key of Object.keys(out)) delete out[key];
      Object.assign(out, doc.openapi, description ? { description } : {});
    },
  }) as JsonSchema;
  if (!components || $defs === undefined) return $defs === undefined ? rest : { ...rest, $defs };
  for (const [id, def] of Object.entries($defs as Record<string, JsonSchema>))
    components.add(id, toComponentRefs(def) as JsonSchema);
  return toComponentRefs(rest) as JsonSchema;
}

/** `#/$defs/X` → `#/components/schemas/X`, everywhere in a schema. */
function toComponentRefs(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(toComponentRefs);
  if (value === null || typeof value !== "object") return value;
  const out: JsonSchema = {};
  for (const [key, item] of Object.entries(value)) {
    out[key] =
      key === "$ref" && typeof item === "string" && item.startsWith(DEFS)
        ? COMPONENTS + item.slice(DEFS.length)
        : toComponentRefs(item);
  }
  return out;
}

function isEmptyObject(value: unknown): boolean {
  return value !== null && typeof value === "object" && !Array.isArray(value) && Object.keys(value).length === 0;
}

function isStringKeys(value: unknown): boolean {
  return (
    value !== null &&
    typeof value === "object" &&
    Object.keys(value).length === 1 &&
    (value as JsonSchema).type === "string"
  );
}
