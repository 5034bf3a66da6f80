import { describe, expect, it } from "vitest";
import { createOpenApiDocument, toOpenApiPath } from "../src/openapi.js";
import { setup } from "./support/api.js";
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
    expect(param("maxRows")).toEqual({ name: "maxRows", in: "query", required: false, schema: { type: "integer", minimum: 0 } });
    expect(param("offset")!.schema).toEqual({ type: "integer", minimum: 0, default: 0 });
    expect(param("filters")!.schema).toEqual({ type: "string", contentMediaType: "application/json" });
    expect(param("columns")!.description).toBe("comma-separated names");
    expect(Object.keys(rows.responses)).toEqual(["200", "400", "401", "403", "404", "429", "500", "503"]);
  });

  it("gives every error the envelope schema, with WWW-Authenticate on 401 and Retry-After on 429", async () => {
    const { api } = await setup();
    const document = createOpenApiDocument(api.routes);
    expect(document.components.schemas.Error).toMatchObject({
      type: "object",
      required: ["error"],
      properties: { error: { required: ["code", "message", "requestId"] } },
    });
    expect(document.paths["/api/v1/me"]!.get!.responses["401"]).toEqual({ $ref: "#/components/responses/Unauthorized" });
    expect(document.components.responses.Unauthorized!.headers).toHaveProperty("WWW-Authenticate");
    expect(document.components.responses.TooManyRequests!.headers).toHaveProperty("Retry-After");
    expect(document.components.responses.BadRequest!.content!["application/json"]!.schema).toEqual({ $ref: "#/components/schemas/Error" });
  });

  it("is served at /api/v1/openapi.json without a token, naming the app URL as its server", async () => {
    const { call, api } = await setup({ appUrl: "https://bi.example.com/" });
    const res = await call("GET", "/api/v1/openapi.json");
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("application/json; charset=utf-8");
    expect(res.headers.get("access-control-allow-origin")).toBe("*");
    expect(res.json).toEqual(JSON.parse(JSON.stringify(createOpenApiDocument(api.routes, { serverUrl: "https://bi.example.com" }))));
    expect(res.json.openapi).toBe("3.1.0");
    expect(res.json.servers).toEqual([{ url: "https://bi.example.com" }]);
    expect(res.json.paths["/api/v1/openapi.json"].get.security).toEqual([]);
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
      assertMatchesDocument(api, { method: "GET", path: "/api/v1/datasets/ds_orders/rows", status, contentType: "application/json", json });
    expect(check(200, ok.json)).not.toThrow();
    expect(check(200, { ...ok.json, metadata: { ...ok.json.metadata, hasMore: "no" } })).toThrow(/hasMore/);
    expect(check(200, { ...ok.json, extra: 1 })).toThrow(/does not match/);
    expect(check(404, { error: { code: "not_found", message: "x", requestId: "r" } })).not.toThrow();
    expect(check(404, { error: { code: "not_found", message: "x" } })).toThrow(/requestId/);
    expect(check(409, { error: { code: "conflict", message: "x", requestId: "r" } })).toThrow(/does not list/);
  });
});
