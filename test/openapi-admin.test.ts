import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import openapiTS, { astToString } from "openapi-typescript";
import ts from "typescript";
import { afterAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { createOpenApiDocument, type JsonSchema, type OpenApiDocument } from "../src/routes/openapi-document.js";
import { adminMount } from "../src/routes/index.js";
import { admin } from "../src/routes/route-def.js";
import { setup } from "./support/api.js";
import { ADMIN_TOKEN } from "./support/admin.js";
import { assertMatchesDocument, findPath } from "./support/openapi.js";
import { diagnosticsIn } from "./support/typecheck.js";

/**
 * The admin API described for every language: each request body and each
 * success answer of `/api/admin/v1/openapi.json` is a named component, no
 * component is an empty schema, the answers are what the server sends, and a
 * generator turns the document into types with no `unknown` or `any` for a
 * body or an answer — types equal to those of the admin functions.
 */
const root = join(import.meta.dirname, "..");
const COMPONENTS = "#/components/schemas/";

function adminDocument(routes = adminMount.routes): OpenApiDocument {
  return createOpenApiDocument(routes.map((route) => ({ mount: adminMount.base, route })));
}

/**
 * Every body and every success answer of a document that is not a `$ref` to a component, and every component that is or
 * holds an empty schema.
 */
function unnamedShapes(document: OpenApiDocument): string[] {
  const problems: string[] = [];
  const named = (where: string, schema: JsonSchema) => {
    const ref = schema.$ref;
    if (typeof ref !== "string" || !ref.startsWith(COMPONENTS)) problems.push(`${where}: not a named component`);
    else if (!(ref.slice(COMPONENTS.length) in document.components.schemas))
      problems.push(`${where}: ${ref} does not exist`);
  };
  for (const [path, item] of Object.entries(document.paths)) {
    for (const [method, op] of Object.entries(item)) {
      const where = `${method.toUpperCase()} ${path}`;
      for (const [type, { schema }] of Object.entries(op.requestBody?.content ?? {}))
        named(`${where} body ${type}`, schema);
      for (const [status, response] of Object.entries(op.responses)) {
        if (!/^2/.test(status) || "$ref" in response) continue;
        for (const [type, { schema }] of Object.entries(response.content ?? {}))
          named(`${where} ${status} ${type}`, schema);
      }
    }
  }
  for (const [name, schema] of Object.entries(document.components.schemas))
    problems.push(...emptySchemas(schema, name));
  return problems;
}

/** Places in a schema that accept anything without saying so: `{}` (or only a description) as a schema. */
function emptySchemas(schema: unknown, where: string): string[] {
  if (schema === true || schema === false) return [];
  if (schema === null || typeof schema !== "object" || Array.isArray(schema)) return [`${where}: not a schema`];
  const { description: _description, ...rest } = schema as JsonSchema;
  if (Object.keys(rest).length === 0) return [`${where}: empty schema`];
  const found: string[] = [];
  for (const [name, property] of Object.entries((rest.properties ?? {}) as JsonSchema))
    found.push(...emptySchemas(property, `${where}.${name}`));
  for (const key of ["items", "additionalProperties", "not"])
    if (rest[key] !== undefined) found.push(...emptySchemas(rest[key], `${where}.${key}`));
  for (const key of ["anyOf", "oneOf", "allOf", "prefixItems"]) {
    ((rest[key] ?? []) as unknown[]).forEach((item, i) => found.push(...emptySchemas(item, `${where}.${key}[${i}]`)));
  }
  return found;
}

describe("the admin OpenAPI document names every shape", () => {
  it("gives every request body and every success answer a component, and no component is empty", () => {
    const document = adminDocument();
    expect(unnamedShapes(document)).toEqual([]);
    const operations = Object.values(document.paths).flatMap((item) => Object.values(item));
    expect(operations.filter((op) => op.requestBody).length).toBe(19);
    const schemaOf = (path: string, method: "get" | "put" | "post", status = "200") => {
      const op = document.paths[`/api/admin/v1${path}`]![method]!;
      const response = op.responses[status] as { content: Record<string, { schema: JsonSchema }> };
      return {
        body: op.requestBody?.content["application/json"]?.schema.$ref,
        answer: response.content["application/json"]!.schema.$ref,
      };
    };
    expect(schemaOf("/teams/{id}", "put", "201")).toEqual({
      body: `${COMPONENTS}TeamInput`,
      answer: `${COMPONENTS}Team`,
    });
    expect(schemaOf("/teams", "get").answer).toBe(`${COMPONENTS}TeamPage`);
    expect(schemaOf("/datasets/{id}/rows", "post")).toEqual({
      body: `${COMPONENTS}RowsUpload`,
      answer: `${COMPONENTS}DatasetRecord`,
    });
    expect(schemaOf("/dashboard-views", "post", "201")).toEqual({
      body: `${COMPONENTS}DashboardViewBatch`,
      answer: `${COMPONENTS}StoredItems`,
    });
    expect(schemaOf("/audit-events", "post", "201")).toEqual({
      body: `${COMPONENTS}AuditEventBatch`,
      answer: `${COMPONENTS}StoredAuditEvents`,
    });
    expect(schemaOf("/teams/{teamId}/api-keys", "post", "201")).toEqual({
      body: `${COMPONENTS}ApiKeyInput`,
      answer: `${COMPONENTS}IssuedApiKey`,
    });
    // The list envelope: data, hasMore and the cursor of the next page.
    expect(document.components.schemas.BusinessPage).toMatchObject({
      properties: { data: { type: "array", items: { $ref: `${COMPONENTS}Business` } }, hasMore: { type: "boolean" } },
      required: ["data", "hasMore", "nextCursor"],
    });
    // A history item is the fixture's item, strict: an unknown field is refused, as the admin function refuses it.
    expect(document.components.schemas.DashboardViewInput).toMatchObject({
      required: ["dashboardId", "at", "visitorId"],
      additionalProperties: false,
    });
    expect(document.components.schemas.DashboardViewBatch).toMatchObject({ type: "array", maxItems: 10_000 });
  });

  it("is described in docs/openapi.md, which names exactly its components", () => {
    const text = readFileSync(join(root, "docs", "openapi.md"), "utf8");
    const section = text.slice(text.indexOf("## The admin document"), text.indexOf("## How it is kept true"));
    const named = new Set([...section.matchAll(/`([A-Z][A-Za-z]+)`/g)].map((m) => m[1]!));
    expect([...named].sort()).toEqual(Object.keys(adminDocument().components.schemas).sort());
  });

  it("finds what it looks for: an unnamed body, an open answer and an empty component", () => {
    const loose = admin({
      method: "PUT",
      path: "/things/:id",
      summary: "t",
      tag: "T",
      auth: "admin",
      body: { kind: "json" },
      responses: {
        200: z.object({}).loose(),
        201: z.object({ value: z.unknown().meta({ id: "Anything" }) }).meta({ id: "Thing" }),
      },
      handle: () => ({}),
    });
    expect(unnamedShapes(adminDocument([loose]))).toEqual([
      "PUT /api/admin/v1/things/{id} body application/json: not a named component",
      "PUT /api/admin/v1/things/{id} 200 application/json: not a named component",
      "Anything: empty schema",
    ]);
  });

  it("describes what every admin operation answers: each answer over HTTP matches its named schema", async () => {
    const { api } = await setup({ adminToken: ADMIN_TOKEN });
    const document = adminDocument();
    const answered = new Set<string>();
    async function send(
      method: string,
      path: string,
      expected: number,
      body?: unknown,
      contentType = "application/json",
    ) {
      const headers: Record<string, string> = { authorization: `Bearer ${ADMIN_TOKEN}` };
      if (body !== undefined) headers["content-type"] = contentType;
      const text = typeof body === "string" ? body : JSON.stringify(body);
      const response = await api.fetch(
        new Request(`http://dataport.test/api/admin/v1${path}`, {
          method,
          headers,
          body: body === undefined ? null : text,
        }),
      );
      const raw = await response.text();
      const json = raw === "" ? null : JSON.parse(raw);
      expect(response.status, `${method} ${path}: ${raw}`).toBe(expected);
      assertMatchesDocument(api, {
        method,
        path: `/api/admin/v1${path}`,
        status: response.status,
        contentType: response.headers.get("content-type"),
        json,
      });
      answered.add(`${method.toLowerCase()} ${findPath(document, `/api/admin/v1${path}`)}`);
      return json;
    }
    const now = "2026-11-01T11:00:00Z";

    await send("GET", "/businesses", 200);
    await send("GET", "/businesses/biz_1", 200);
    await send("PUT", "/businesses/biz_2", 201, { name: "Contoso" });
    expect(await send("PUT", "/businesses/biz_2", 200, { name: "Contoso Ltd" })).toEqual({
      id: "biz_2",
      name: "Contoso Ltd",
    });
    await send("GET", "/teams", 200);
    await send("GET", "/teams/team_ops", 200);
    expect(await send("PUT", "/teams/team_new", 201, { name: "New", plan: "pro" })).toEqual({
      id: "team_new",
      name: "New",
      plan: "pro",
      businessId: null,
      isPersonal: false,
    });
    await send("GET", "/users", 200);
    await send("GET", "/users/usr_ada", 200);
    await send("PUT", "/users/usr_new", 201, { email: "new@example.com", name: "New" });
    await send("GET", "/users/usr_ada/memberships", 200);
    await send("GET", "/users/usr_ada/memberships/team_ops", 200);
    await send("PUT", "/users/usr_new/memberships/team_new", 201, { role: "editor" });

    const session = await send("POST", "/sessions", 201, { userId: "usr_new", expiresInSeconds: 3600 });
    expect(Object.keys(session).sort()).toEqual(["expiresAt", "id", "token", "userId"]);
    await send("GET", `/sessions/${session.id}`, 200);
    await send("DELETE", `/sessions/${session.id}`, 204);

    const key = await send("POST", "/teams/team_ops/api-keys", 201, {
      name: "Sync",
      scopes: ["data:read"],
      allowlist: { datasets: ["ds_orders"] },
      createdBy: "usr_ada",
    });
    expect(key.token).toMatch(/^dp_live_/);
    await send("GET", "/teams/team_ops/api-keys", 200);
    await send("GET", `/api-keys/${key.id}`, 200);
    await send("DELETE", `/api-keys/${key.id}`, 204);

    await send("GET", "/connections", 200);
    await send("GET", "/connections/conn_retail", 200);
    const hook = await send("PUT", "/connections/conn_hook", 201, {
      teamId: "team_ops",
      name: "Hook",
      type: "webhook",
      config: { signingSecret: "a-signing-secret" },
    });
    expect(hook).toMatchObject({ config: { signed: true }, endpointUrl: expect.stringContaining("/api/webhooks/") });
    expect(await send("PUT", "/connections/conn_hook/signing-secret", 200, { secret: null })).toMatchObject({
      config: { signed: false },
    });
    const refused = await api.fetch(
      new Request(hook.endpointUrl, { method: "POST", headers: { "content-type": "application/json" }, body: '{"n":' }),
    );
    expect(refused.status).toBe(400);
    let deliveries: { data: Array<{ id: string }> } = { data: [] };
    for (let i = 0; i < 100 && deliveries.data.length === 0; i++)
      deliveries = await send("GET", "/connections/conn_hook/deliveries?outcome=refused", 200);
    await send("GET", `/connections/conn_hook/deliveries/${deliveries.data[0]!.id}`, 200);
    expect(await send("POST", `/connections/conn_hook/deliveries/${deliveries.data[0]!.id}/replay`, 200)).toMatchObject(
      { outcome: "refused", reason: "invalid_body" },
    );
    expect(await send("POST", "/connections/conn_hook/deliveries/replay", 200, { outcome: "stored" })).toEqual({
      matched: 0,
      replayed: 0,
      stored: 0,
      duplicate: 0,
      refused: 0,
      skipped: 0,
    });

    await send("GET", "/datasets", 200);
    await send("GET", "/datasets/ds_orders", 200);
    await send("PUT", "/datasets/ds_new", 201, {
      teamId: "team_ops",
      name: "New",
      type: "upload",
      connectionId: null,
      source: null,
      columns: [{ name: "a", type: "number" }],
    });
    expect(await send("PUT", "/datasets/ds_new/rows", 200, [{ a: 1 }, { a: 2 }])).toMatchObject({
      id: "ds_new",
      rowCount: 2,
    });
    expect(await send("POST", "/datasets/ds_new/rows", 200, '{"a":3}\n', "application/x-ndjson")).toMatchObject({
      rowCount: 3,
    });
    expect(await send("POST", "/datasets/ds_stores/refresh", 200, {})).toMatchObject({
      datasetId: "ds_stores",
      ok: true,
      rowsProcessed: 1,
      error: null,
    });

    await send("GET", "/tables", 200);
    await send("GET", "/tables/tbl_targets", 200);
    await send("PUT", "/tables/tbl_new", 201, { teamId: "team_ops", name: "Notes", columns: [] });

    await send("PUT", "/dashboards/dash_new/versions/1", 201, {
      teamId: "team_ops",
      name: "New",
      published: true,
      datasetIds: ["ds_new"],
    });
    await send("GET", "/dashboards", 200);
    await send("GET", "/dashboards/dash_new", 200);

    expect(
      await send("POST", "/dashboard-views", 201, [{ dashboardId: "dash_new", at: now, visitorId: "vis_1" }]),
    ).toEqual({ stored: 1 });
    expect(
      await send("POST", "/refresh-runs", 201, [
        { datasetId: "ds_new", startedAt: now, durationMs: 12, rowsProcessed: 3 },
      ]),
    ).toEqual({ stored: 1 });
    expect(
      await send("POST", "/credit-usage", 201, [{ teamId: "team_ops", at: now, category: "export", credits: 2 }]),
    ).toEqual({ stored: 1 });
    const events = [
      { id: "evt_doc_1", teamId: "team_ops", time: now, category: "audit", action: "dashboard.published" },
    ];
    expect(await send("POST", "/audit-events", 201, events)).toEqual({ stored: 1, skipped: 0 });

    for (const path of [
      "/dashboards/dash_new",
      "/tables/tbl_new",
      "/datasets/ds_new",
      "/connections/conn_hook",
      "/users/usr_new/memberships/team_new",
      "/users/usr_new",
      "/teams/team_new",
      "/businesses/biz_2",
    ]) {
      await send("DELETE", path, 204);
    }
    await send("GET", "/openapi.json", 200);

    const operations = Object.entries(document.paths).flatMap(([path, item]) =>
      Object.keys(item).map((method) => `${method} ${path}`),
    );
    expect([...answered].sort()).toEqual(operations.sort());
  });
});

describe("the admin document through openapi-typescript", () => {
  const out = mkdtempSync(join(tmpdir(), "dataport-admin-openapi-"));
  afterAll(() => rmSync(out, { recursive: true, force: true }));

  it("types every body and every answer, as the admin functions type them", async () => {
    const document = adminDocument();
    // `defaultNonNullable: false`: a field with a default is optional in a body (the server fills it in) and, being
    // required, present in an answer.
    const source = astToString(
      await openapiTS(JSON.parse(JSON.stringify(document)), { silent: true, defaultNonNullable: false }),
    );
    writeFileSync(join(out, "admin-schema.ts"), source);

    // One check per body and per success answer: a named type that is neither `unknown` nor `any`.
    const checks: string[] = [];
    for (const [path, item] of Object.entries(document.paths)) {
      for (const [method, op] of Object.entries(item)) {
        const id = JSON.stringify(op.operationId);
        for (const type of Object.keys(op.requestBody?.content ?? {}))
          checks.push(
            `Check<Typed<Body<${id}, ${JSON.stringify(type)}>>, ${JSON.stringify(`${method} ${path} body`)}>`,
          );
        for (const [status, response] of Object.entries(op.responses)) {
          if (/^2/.test(status) && !("$ref" in response) && response.content)
            checks.push(`Check<Typed<Answer<${id}, ${status}>>, ${JSON.stringify(`${method} ${path} ${status}`)}>`);
        }
      }
    }
    expect(checks.length).toBeGreaterThan(60);
    const src = (path: string) => JSON.stringify(join(root, "src", path));
    writeFileSync(
      join(out, "typed.ts"),
      `
import type { components, operations } from "./admin-schema.js";
import type * as admin from ${src("admin/index.js")};
import type * as model from ${src("domain/model.js")};

type S = components["schemas"];
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
export type Check<T extends true, _Where extends string = ""> = T;
type Typed<T> = [T] extends [never] ? false : 0 extends 1 & T ? false : unknown extends T ? false : true;
type Body<K extends keyof operations, M extends string> = NonNullable<operations[K]["requestBody"]> extends { content: infer C } ? (M extends keyof C ? C[M] : never) : never;
type Answer<K extends keyof operations, S extends number> = operations[K]["responses"] extends infer R
  ? S extends keyof R ? (R[S] extends { content: { "application/json": infer A } } ? A : never) : never
  : never;
type Returns<K extends keyof admin.Admin> = admin.Admin[K] extends (...args: any[]) => Promise<infer T> ? T : never;
type Upload = Omit<model.DatasetRecord, "type"> & { type: "upload" | "connection" };

export type Operations = [
  ${checks.join(",\n  ")},
];

/** What the admin functions take and answer, over HTTP. */
export type SameAsFunctions = [
  Check<Same<S["BusinessInput"], admin.BusinessInput>>,
  Check<Same<S["TeamInput"], admin.TeamInput>>,
  Check<Same<S["UserInput"], admin.UserInput>>,
  Check<Same<S["MembershipInput"], admin.MembershipInput>>,
  Check<Same<S["SessionInput"], admin.SessionInput>>,
  Check<Same<S["ApiKeyInput"], Omit<Parameters<admin.Admin["createApiKey"]>[0], "teamId">>>,
  Check<Same<S["ConnectionInput"], admin.ConnectionInput>>,
  Check<Same<S["SigningSecretInput"], Parameters<admin.Admin["setSigningSecret"]>[1]>>,
  Check<Same<S["DatasetInput"], admin.DatasetInput>>,
  Check<Same<S["TableInput"], admin.TableInput>>,
  Check<Same<S["DashboardVersionInput"], admin.DashboardVersionInput>>,
  Check<Same<S["RefreshInput"], NonNullable<Parameters<admin.Admin["refreshDataset"]>[1]>>>,
  Check<Same<S["DashboardViewInput"], admin.DashboardViewInput>>,
  Check<Same<S["RefreshRunInput"], admin.RefreshRunInput>>,
  Check<Same<S["CreditUsageInput"], admin.CreditUsageInput>>,
  Check<Same<S["AuditEventInput"], admin.AuditEventInput>>,
  Check<Same<S["DashboardViewBatch"], Parameters<admin.Admin["recordDashboardViews"]>[0]>>,
  Check<Same<S["WebhookReplayInput"], NonNullable<Parameters<admin.Admin["replayWebhookDeliveries"]>[1]>>>,
  Check<Same<S["WebhookDeliveryRecord"], Returns<"getWebhookDelivery">>>,
  Check<Same<S["WebhookDeliveryPage"], Returns<"listWebhookDeliveries">>>,
  Check<Same<S["WebhookReplaySummary"], Returns<"replayWebhookDeliveries">>>,
  Check<Same<S["Business"], Returns<"getBusiness">>>,
  Check<Same<S["Team"], Returns<"getTeam">>>,
  Check<Same<S["User"], Returns<"getUser">>>,
  Check<Same<S["Membership"], Returns<"getMembership">>>,
  Check<Same<S["MembershipList"]["data"], Returns<"listMemberships">>>,
  Check<Same<S["SessionInfo"], Returns<"getSession">>>,
  Check<Same<S["IssuedSession"], Returns<"createSession">>>,
  Check<Same<S["ApiKeyInfo"], Returns<"getApiKey">>>,
  Check<Same<S["IssuedApiKey"], Returns<"createApiKey">["key"] & { token: string }>>,
  Check<Same<S["ApiKeyList"]["data"], Returns<"listApiKeys">>>,
  Check<Same<S["ConnectionView"], Returns<"getConnection">>>,
  Check<Same<S["ConnectionView"], Returns<"setSigningSecret">>>,
  Check<Same<S["DatasetRecord"], Upload>>,
  Check<Same<S["TableRecord"], Returns<"getTable">>>,
  Check<Same<S["DashboardRecord"], Returns<"getDashboard">>>,
  Check<Same<S["RefreshResult"], Returns<"refreshDataset">>>,
  Check<Same<S["StoredItems"], Returns<"recordDashboardViews">>>,
  Check<Same<S["StoredAuditEvents"], Returns<"recordAuditEvents">>>,
  Check<Same<S["TeamPage"], Returns<"listTeams">>>,
  Check<Same<S["ConnectionViewPage"], Returns<"listConnections">>>,
  Check<Same<S["DashboardRecordPage"], Returns<"listDashboards">>>,
  Check<Same<S["DatasetRecord"], Returns<"putDataset">["value"] & Upload>>,
  Check<Same<S["TeamPage"]["data"][number], Returns<"putTeam">["value"]>>,
];
`,
    );
    // zod types an optional field `T | undefined`, which JSON never carries: compared without exact optional
    // properties.
    expect(typeCheck(out, [join(out, "typed.ts")])).toEqual([]);

    // …and the checks can fail: an open answer is refused.
    writeFileSync(
      join(out, "open.ts"),
      `import type { Check } from "./typed.js";\ntype Typed<T> = unknown extends T ? false : true;\nexport type Open = Check<Typed<Record<string, unknown> | unknown>>;\n`,
    );
    expect(typeCheck(out, [join(out, "open.ts")]).join("\n")).toMatch(/does not satisfy the constraint 'true'/);
  }, 120_000);
});

function typeCheck(out: string, files: string[]): string[] {
  const program = ts.createProgram(files, {
    target: ts.ScriptTarget.ES2022,
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    lib: ["lib.es2023.d.ts", "lib.dom.d.ts"],
    // The source's own types resolve as in the project (node's among them): an unresolved one would be \`any\` and pass
    // any check.
    types: ["node"],
    typeRoots: [join(root, "node_modules", "@types")],
    strict: true,
    exactOptionalPropertyTypes: false,
    noEmit: true,
    skipLibCheck: true,
  });
  return diagnosticsIn(program, (name) => name.startsWith(out)).map((d) => {
    const { line } = d.file!.getLineAndCharacterOfPosition(d.start ?? 0);
    return `${d.file!.fileName.slice(out.length + 1)}:${line + 1}: ${ts.flattenDiagnosticMessageText(d.messageText, "\n")}`;
  });
}
