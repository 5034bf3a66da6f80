import { describe, expect, it } from "vitest";
import { MAX_IDEMPOTENCY_KEY_LENGTH } from "../src/domain/idempotency.js";
import { signStandard } from "../src/domain/signatures.js";
import {
  createOpenApiDocument,
  derivedOperationId,
  toOpenApiPath,
  type OpenApiResponse,
} from "../src/routes/openapi-document.js";
import { adminMount } from "../src/routes/index.js";
import { WEBHOOK_SECRETS, webhookFixture } from "../src/testing/conformance/webhooks.js";
import { NOW, setup } from "./support/api.js";
import { TOKENS } from "./support/fixture.js";
import { assertMatchesDocument, documentOf, findPath } from "./support/openapi.js";

describe("OpenAPI document", () => {
  it("documents every route of the router with its method, scope and security", async () => {
    const { api } = await setup();
    const document = createOpenApiDocument(api.routes);
    expect(api.routes.length).toBeGreaterThanOrEqual(5);
    for (const { mount, route } of api.routes) {
      const path = mount + toOpenApiPath(route.path);
      const operation = document.paths[path]?.[route.method.toLowerCase() as "get"];
      expect(operation, `${route.method} ${path}`).toBeDefined();
      expect(operation!.summary).toBe(route.summary);
      expect(operation!.tags).toEqual([route.tag]);
      if (route.auth === "bearer") {
        expect(operation!["x-scope"]).toBe(route.scope);
        expect(operation!.security).toEqual([{ bearerAuth: route.scope ? [route.scope] : [] }]);
        expect(Object.keys(operation!.responses)).toEqual(expect.arrayContaining(["401", "403", "500"]));
      } else {
        expect(operation!.security).toEqual([]);
      }
      for (const [, name] of route.path.matchAll(/:([A-Za-z0-9_]+)/g)) {
        expect(path).toContain(`{${name}}`);
        expect(operation!.parameters).toContainEqual({ name, in: "path", required: true, schema: { type: "string" } });
      }
      const queryNames = route.query && "shape" in route.query ? Object.keys(route.query.shape as object) : [];
      const documented = operation!.parameters.filter((p) => p.in === "query").map((p) => p.name);
      expect(documented.sort()).toEqual(queryNames.sort());
      for (const status of Object.keys(route.responses ?? {})) expect(operation!.responses[status]).toBeDefined();
    }
    const operations = Object.values(document.paths).flatMap((item) => Object.values(item));
    expect(operations).toHaveLength(api.routes.length);
    expect(new Set(operations.map((op) => op.operationId)).size).toBe(operations.length);
  });

  it("describes query parameters as a client sends them, not as strings with patterns", async () => {
    const { api } = await setup();
    const rows = createOpenApiDocument(api.routes).paths["/api/v1/datasets/{id}/rows"]!.get!;
    const param = (name: string) => rows.parameters.find((p) => p.name === name);
    expect(param("maxRows")).toEqual({
      name: "maxRows",
      in: "query",
      required: false,
      schema: { type: "integer", minimum: 0, maximum: 2_147_483_647 },
    });
    expect(param("offset")!.schema).toEqual({ type: "integer", minimum: 0, maximum: 2_147_483_647, default: 0 });
    // Plain strings: a JSON media type makes Swagger UI show a file picker where a condition is typed.
    expect(param("filters")!.schema).toEqual({ type: "string" });
    expect(param("where")!.schema).toEqual({ type: "string" });
    const params = createOpenApiDocument(api.routes).paths["/api/v1/connections/{id}/query"]!.get!.parameters;
    expect(params.find((p) => p.name === "params")!.schema).toEqual({ type: "string" });
    expect(JSON.stringify(createOpenApiDocument(api.routes))).not.toContain("contentMediaType");
    expect(param("columns")!.description).toBe("comma-separated names");
    expect(Object.keys(rows.responses)).toEqual(["200", "304", "400", "401", "403", "404", "429", "500", "503"]);
  });

  it("gives every error the envelope schema, with WWW-Authenticate on 401 and Retry-After on 429", async () => {
    const { api } = await setup();
    const document = createOpenApiDocument(api.routes);
    expect(document.components.schemas.Error).toMatchObject({
      type: "object",
      required: ["error"],
      properties: { error: { required: ["code", "message", "requestId"] } },
    });
    expect(document.paths["/api/v1/me"]!.get!.responses["401"]).toEqual({
      $ref: "#/components/responses/Unauthorized",
    });
    expect(document.components.responses.Unauthorized!.headers).toHaveProperty("WWW-Authenticate");
    expect(document.components.responses.TooManyRequests!.headers).toHaveProperty("Retry-After");
    expect(document.components.responses.BadRequest!.content!["application/json"]!.schema).toEqual({
      $ref: "#/components/schemas/Error",
    });
  });

  it("is served at /api/v1/openapi.json without a token, naming the app URL as its server", async () => {
    const { call, api } = await setup({ appUrl: "https://bi.example.com/" });
    const res = await call("GET", "/api/v1/openapi.json");
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("application/json; charset=utf-8");
    expect(res.headers.get("access-control-allow-origin")).toBe("*");
    expect(res.json).toEqual(
      JSON.parse(JSON.stringify(createOpenApiDocument(api.routes, { serverUrl: "https://bi.example.com" }))),
    );
    expect(res.json.openapi).toBe("3.1.0");
    expect(res.json.servers).toEqual([{ url: "https://bi.example.com" }]);
    expect(res.json.paths["/api/v1/openapi.json"].get.security).toEqual([]);
  });
});

describe("OpenAPI document for code generators", () => {
  it("names every operation for what it does", async () => {
    const { api } = await setup();
    const document = createOpenApiDocument(api.routes);
    const ids = Object.fromEntries(
      Object.entries(document.paths).flatMap(([path, item]) =>
        Object.entries(item).map(([method, op]) => [`${method.toUpperCase()} ${path}`, op.operationId]),
      ),
    );
    expect(ids).toEqual({
      "GET /api/v1/me": "getMe",
      "GET /api/v1/datasets": "listDatasets",
      "GET /api/v1/datasets/{id}": "getDataset",
      "GET /api/v1/datasets/{id}/rows": "getDatasetRows",
      "GET /api/v1/datasets/{id}/aggregate": "aggregateDatasetRows",
      "GET /api/v1/connections/{id}/query": "queryConnection",
      "GET /api/v1/dashboards": "listDashboards",
      "GET /api/v1/dashboards/{id}/views": "getDashboardViews",
      "GET /api/v1/space/{object}": "getSpaceObject",
      "GET /api/v1/tables/{id}/rows": "listTableRows",
      "GET /api/v1/tables/{id}/aggregate": "aggregateTableRows",
      "POST /api/v1/tables/{id}/rows": "createTableRow",
      "PATCH /api/v1/tables/{id}/rows/{rowId}": "updateTableRow",
      "DELETE /api/v1/tables/{id}/rows/{rowId}": "deleteTableRow",
      "GET /api/v1/tables/{id}/changes": "readTableChanges",
      "GET /api/v1/datasets/{id}/changes": "readDatasetChanges",
      "GET /api/v1/audit": "readAuditFeed",
      "GET /api/v1/openapi.json": "getOpenApiDocument",
      "GET /api/v1/docs": "getApiReference",
      "GET /api/v1/docs/assets/{name}": "getApiReferenceAsset",
      "POST /api/webhooks/{id}": "receiveWebhook",
      "GET /api/health/live": "getLiveness",
      "GET /api/health/ready": "getReadiness",
      "GET /api/metrics": "getMetrics",
    });
  });

  it("derives an operationId from the method and path for a route that names none (the admin API)", () => {
    const id = (method: "GET" | "POST" | "PUT" | "PATCH" | "DELETE", path: string) =>
      derivedOperationId({ method, path });
    expect(id("GET", "/businesses")).toBe("listBusinesses");
    expect(id("GET", "/businesses/:id")).toBe("getBusiness");
    expect(id("PUT", "/users/:id/memberships/:teamId")).toBe("putUserMembership");
    expect(id("GET", "/teams/:teamId/api-keys")).toBe("listTeamApiKeys");
    expect(id("POST", "/teams/:teamId/api-keys")).toBe("createTeamApiKey");
    expect(id("POST", "/sessions")).toBe("createSession");
    expect(id("DELETE", "/api-keys/:id")).toBe("deleteApiKey");
    expect(id("PATCH", "/activities/:id")).toBe("updateActivity");
    expect(id("GET", "/credit-usage")).toBe("getCreditUsage");
    const admin = createOpenApiDocument(adminMount.routes.map((route) => ({ mount: adminMount.base, route })));
    const operations = Object.values(admin.paths).flatMap((item) => Object.values(item));
    expect(operations.length).toBeGreaterThan(30);
    expect(new Set(operations.map((op) => op.operationId)).size).toBe(operations.length);
    for (const op of operations)
      expect(op.operationId).toMatch(
        /^(list|get|put|create|update|delete|revoke|set|replace|append|refresh|record|replay)[A-Z][A-Za-z]+$/,
      );
    expect(operations.map((op) => op.operationId)).toEqual(
      expect.arrayContaining([
        "listTeams",
        "putMembership",
        "revokeApiKey",
        "replaceDatasetRows",
        "recordDashboardViews",
      ]),
    );
  });

  it("answers every JSON operation with a named component schema", async () => {
    const { api } = await setup();
    const document = createOpenApiDocument(api.routes);
    const named: Record<string, string> = {};
    for (const [path, item] of Object.entries(document.paths)) {
      for (const [method, op] of Object.entries(item)) {
        for (const [status, response] of Object.entries(op.responses)) {
          if ("$ref" in response) {
            expect(document.components.responses[response.$ref.split("/").at(-1)!], response.$ref).toBeDefined();
            continue;
          }
          const schema = (response as OpenApiResponse).content?.["application/json"]?.schema;
          if (!schema) continue;
          expect(Object.keys(schema), `${method} ${path} ${status}`).toEqual(["$ref"]);
          const name = String(schema.$ref).replace("#/components/schemas/", "");
          expect(document.components.schemas[name], name).toBeDefined();
          if (status.startsWith("2")) named[op.operationId] = name;
        }
      }
    }
    expect(named).toEqual({
      getMe: "Me",
      listDatasets: "DatasetList",
      getDataset: "DatasetDetail",
      getDatasetRows: "DatasetRowsPage",
      aggregateDatasetRows: "AggregatePage",
      queryConnection: "ConnectionQueryResult",
      listDashboards: "DashboardList",
      getDashboardViews: "DashboardViews",
      getSpaceObject: "SpaceObjectPage",
      listTableRows: "TableRowsPage",
      aggregateTableRows: "AggregatePage",
      createTableRow: "TableRow",
      updateTableRow: "TableRow",
      deleteTableRow: "TableRowDeleted",
      readTableChanges: "ChangesPage",
      readDatasetChanges: "ChangesPage",
      readAuditFeed: "AuditPage",
      getOpenApiDocument: "OpenApiDocument",
      receiveWebhook: "WebhookReceipt",
      getLiveness: "Liveness",
      getReadiness: "Readiness",
    });
    const schemas = document.components.schemas;
    expect(schemas.DatasetList).toMatchObject({
      properties: { datasets: { items: { $ref: "#/components/schemas/Dataset" } } },
    });
    expect(schemas.Dataset).toMatchObject({
      properties: { columns: { items: { $ref: "#/components/schemas/Column" } } },
    });
    expect(schemas.ConnectionQueryResult).toEqual({
      anyOf: [
        { $ref: "#/components/schemas/ConnectionQueryRows" },
        { $ref: "#/components/schemas/ConnectionQueryGeoJson" },
      ],
      description: "Rows (format=json, the default) or GeoJSON (format=geojson)",
    });
    expect(schemas.AuditPage).toMatchObject({
      properties: {
        events: {
          items: {
            anyOf: [{ $ref: "#/components/schemas/OcsfApiActivity" }, { $ref: "#/components/schemas/AuditEvent" }],
          },
        },
      },
    });
    expect(schemas.Error).toMatchObject({
      properties: { error: { properties: { code: { $ref: "#/components/schemas/ErrorCode" } } } },
    });
    // Nothing zod could not name (`__schema0`) and no JSON Schema `$defs` left behind.
    expect(Object.keys(schemas).filter((name) => !/^[A-Z][A-Za-z]+$/.test(name))).toEqual([]);
    expect(JSON.stringify(document).includes("$defs")).toBe(false);
  });

  it("types open request bodies as open objects", async () => {
    const { api } = await setup();
    const document = createOpenApiDocument(api.routes);
    const body = (path: string, method: "post" | "patch") =>
      document.paths[path]![method]!.requestBody!.content["application/json"]!.schema;
    expect(body("/api/v1/tables/{id}/rows", "post")).toEqual({ $ref: "#/components/schemas/TableRowValues" });
    expect(body("/api/v1/tables/{id}/rows/{rowId}", "patch")).toEqual({ $ref: "#/components/schemas/TableRowPatch" });
    expect(body("/api/webhooks/{id}", "post")).toEqual({ $ref: "#/components/schemas/WebhookPayload" });
    const { schemas } = document.components;
    expect(schemas.TableRowValues).toMatchObject({ type: "object", additionalProperties: true });
    expect(schemas.WebhookPayload).toMatchObject({ type: "object", additionalProperties: true });
    expect(schemas.TableRowPatch).toMatchObject({
      type: "object",
      additionalProperties: true,
      properties: { expectedUpdatedAt: {} },
    });
    expect(schemas.TableRow).toMatchObject({
      required: ["_id", "_createdAt", "_updatedAt"],
      additionalProperties: true,
    });
    expect(JSON.stringify(document).includes('"propertyNames"')).toBe(false);
  });

  it("documents the body limit the server enforces", async () => {
    const { api, call } = await setup({ maxBodyBytes: 2048 });
    const served = (await call("GET", "/api/v1/openapi.json")).json;
    expect(served.paths["/api/v1/tables/{id}/rows"].post.requestBody.description).toBe(
      "At most 2,048 bytes (413 payload_too_large beyond).",
    );
    expect(served.paths["/api/webhooks/{id}"].post.requestBody.description).toContain("At most 2,048 bytes");
    expect(createOpenApiDocument(api.routes).paths["/api/v1/tables/{id}/rows"]!.post!.requestBody!.description).toBe(
      "At most 1,048,576 bytes (413 payload_too_large beyond).",
    );
    const tooLarge = await call("POST", "/api/v1/tables/tbl_targets/rows", {
      token: TOKENS.sync,
      body: { region: "x".repeat(2100), target: 1 },
    });
    expect(tooLarge.status).toBe(413);
  });

  it("documents the table Idempotency-Key with the length the server accepts", async () => {
    const { api, call } = await setup();
    const param = createOpenApiDocument(api.routes).paths["/api/v1/tables/{id}/rows"]!.post!.parameters.find(
      (p) => p.name === "Idempotency-Key",
    )!;
    expect(param.schema).toEqual({ type: "string", minLength: 1, maxLength: MAX_IDEMPOTENCY_KEY_LENGTH });
    const write = (key: string) =>
      call("POST", "/api/v1/tables/tbl_targets/rows", {
        token: TOKENS.sync,
        body: { region: "EMEA", target: 1 },
        headers: { "idempotency-key": key },
      });
    expect((await write("k".repeat(MAX_IDEMPOTENCY_KEY_LENGTH))).status).toBe(201);
    expect(await write("k".repeat(MAX_IDEMPOTENCY_KEY_LENGTH + 1))).toMatchObject({
      status: 400,
      json: { error: { code: "invalid_parameter" } },
    });
  });

  it("documents the webhook's Standard Webhooks and delivery headers as the receiver reads them", async () => {
    const { api, call } = await setup({ fixture: webhookFixture() });
    const receive = createOpenApiDocument(api.routes).paths["/api/webhooks/{id}"]!.post!;
    const header = (name: string) => receive.parameters.find((p) => p.in === "header" && p.name === name);
    expect(receive.parameters.filter((p) => p.in === "header").map((p) => p.name)).toEqual([
      "Idempotency-Key",
      "webhook-id",
      "webhook-timestamp",
      "webhook-signature",
      "X-Webhook-Signature",
      "X-Hub-Signature-256",
      "Stripe-Signature",
      "X-Shopify-Hmac-Sha256",
      "X-Slack-Signature",
      "X-Slack-Request-Timestamp",
    ]);
    expect(header("Stripe-Signature")!.description).toContain("`{t}.{body}`");
    expect(header("X-Slack-Signature")!.description).toContain("within 300 seconds");
    // A delivery id of any length is taken (a long one compared by its hash): no maxLength.
    expect(header("Idempotency-Key")!.schema).toEqual({ type: "string" });
    expect(header("Idempotency-Key")!.description).toContain("Any length");
    expect(header("webhook-timestamp")!.schema).toEqual({ type: "string", pattern: "^[0-9]{1,15}$" });
    expect(header("webhook-timestamp")!.description).toContain("within 300 seconds");
    expect(header("webhook-signature")!.description).toContain("`v1,<base64>`");
    expect(receive.responses["401"]).toEqual({ $ref: "#/components/responses/Unauthorized" });

    // What the document says, the receiver does: a 1,000-character delivery id is accepted and de-duplicated.
    const long = "d".repeat(1000);
    const first = await call("POST", "/api/webhooks/hook-open", {
      body: { n: 1 },
      headers: { "idempotency-key": long },
    });
    const again = await call("POST", "/api/webhooks/hook-open", {
      body: { n: 1 },
      headers: { "idempotency-key": long },
    });
    expect(first).toMatchObject({ status: 200, json: { duplicate: false } });
    expect(again).toMatchObject({ status: 200, json: { id: first.json.id, duplicate: true } });
    // A Standard Webhooks signature in the documented headers is accepted.
    const body = JSON.stringify({ n: 2 });
    const timestamp = Math.floor(Date.parse(NOW) / 1000);
    const signed = await call("POST", "/api/webhooks/hook-std", {
      body,
      headers: {
        "webhook-id": "msg_1",
        "webhook-timestamp": String(timestamp),
        "webhook-signature": signStandard(WEBHOOK_SECRETS.standard, "msg_1", timestamp, body),
      },
    });
    expect(signed).toMatchObject({ status: 200, json: { ok: true, duplicate: false } });
  });
});

describe("response validation against the document", () => {
  it("finds the path template of a concrete path", async () => {
    const { api } = await setup();
    const document = documentOf(api);
    expect(findPath(document, "/api/v1/datasets/ds_orders/rows?maxRows=1")).toBe("/api/v1/datasets/{id}/rows");
    expect(findPath(document, "/api/v1/datasets")).toBe("/api/v1/datasets");
    expect(findPath(document, "/api/v1/nowhere")).toBeUndefined();
  });

  it("accepts the real responses of the routes and rejects bodies that drift from the schemas", async () => {
    const { api, call } = await setup();
    // Real responses pass (call() checks each one).
    const ok = await call("GET", "/api/v1/datasets/ds_orders/rows?maxRows=1", { token: TOKENS.sync });
    expect(ok.status).toBe(200);
    const check = (status: number, json: unknown) => () =>
      assertMatchesDocument(api, {
        method: "GET",
        path: "/api/v1/datasets/ds_orders/rows",
        status,
        contentType: "application/json",
        json,
      });
    expect(check(200, ok.json)).not.toThrow();
    expect(check(200, { ...ok.json, metadata: { ...ok.json.metadata, hasMore: "no" } })).toThrow(/hasMore/);
    expect(check(200, { ...ok.json, extra: 1 })).toThrow(/does not match/);
    expect(check(404, { error: { code: "not_found", message: "x", requestId: "r" } })).not.toThrow();
    expect(check(404, { error: { code: "not_found", message: "x" } })).toThrow(/requestId/);
    expect(check(409, { error: { code: "conflict", message: "x", requestId: "r" } })).toThrow(/does not list/);
  });
});
