import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import openapiTS, { astToString } from "openapi-typescript";
import ts from "typescript";
import { afterAll, describe, expect, it } from "vitest";
import { createDataApi } from "../src/server/api.js";
import { createOpenApiDocument, type OpenApiDocument } from "../src/routes/openapi-document.js";
import { adminMount } from "../src/routes/index.js";
import { diagnosticsIn } from "./support/typecheck.js";

/**
 * What a client generator makes of the document: openapi-typescript turns it
 * into types, and a call of every operation through openapi-fetch must
 * type-check with zero errors under strict settings (exact optional property
 * types, as `tsc --init` sets them). The generated named types must equal
 * the zod schemas' types, and calls that break the document's rules must be
 * refused by the compiler (`@ts-expect-error`), so the types are not `any`.
 */
const root = join(import.meta.dirname, "..");
const out = join(root, "test", ".openapi-check");

/** One call per operation, through openapi-fetch, with its result put to use. */
const CALLS = `
import createClient from "openapi-fetch";
import type { components, paths } from "./schema.js";

type Schemas = components["schemas"];
// JSON answers: the rows endpoints also document text/csv and application/x-ndjson downloads.
const client = createClient<paths, "application/json">({ baseUrl: "http://127.0.0.1:8787" });
const auth = { Authorization: "Bearer dp_demo_full_access_0000000000001" };

export async function everyOperation(): Promise<void> {
  const me = await client.GET("/api/v1/me", { headers: auth });
  if (me.data?.kind === "api-key") me.data.allowlist.datasets.map((id: string) => id.length);
  if (me.error) me.error.error.code satisfies Schemas["ErrorCode"];

  const datasets = await client.GET("/api/v1/datasets", { params: { query: { teamId: "team_ops" } }, headers: auth });
  const list: Schemas["Dataset"][] | undefined = datasets.data?.datasets;

  const dataset = await client.GET("/api/v1/datasets/{id}", { params: { path: { id: "ds_orders" } }, headers: auth });
  const writable: boolean | undefined = dataset.data?.writable;

  const rows = await client.GET("/api/v1/datasets/{id}/rows", {
    params: { path: { id: "ds_orders" }, query: { maxRows: 100, offset: 0, columns: "order_id,amount", filters: JSON.stringify({ region: "EMEA" }) } },
    headers: auth,
  });
  const hasMore: boolean | undefined = rows.data?.metadata.hasMore;
  const firstRow: Schemas["Row"] | undefined = rows.data?.data[0];

  const query = await client.GET("/api/v1/connections/{id}/query", {
    params: { path: { id: "conn_shop" }, query: { limit: 10, offset: 0, orderBy: "store_id", orderDirection: "DESC", format: "json" } },
    headers: auth,
  });
  if (query.data && "data" in query.data) query.data.metadata.fetchedAt.toUpperCase();
  if (query.data && "geojson" in query.data) query.data.geojson.features.length.toFixed();

  const dashboards = await client.GET("/api/v1/dashboards", { params: { query: {} }, headers: auth });
  const dashboard: Schemas["Dashboard"] | undefined = dashboards.data?.dashboards[0];

  const views = await client.GET("/api/v1/dashboards/{id}/views", { params: { path: { id: "dash_sales" }, query: { days: 7, by: "day" } }, headers: auth });
  const totalViews: number | undefined = views.data?.totals.views;

  const space = await client.GET("/api/v1/space/{object}", { params: { path: { object: "refresh-history" }, query: { days: 3 } }, headers: auth });
  const spaceRows: Schemas["Row"][] | undefined = space.data?.rows;

  const perRegion = await client.GET("/api/v1/datasets/{id}/aggregate", {
    params: { path: { id: "ds_orders" }, query: { groupBy: "region", metrics: "count,sum(amount)", sort: "-sum(amount)" } },
    headers: auth,
  });
  const totals: Record<string, unknown> | undefined = perRegion.data?.metadata.totals;
  const tableGroups = await client.GET("/api/v1/tables/{id}/aggregate", { params: { path: { id: "tbl_targets" }, query: { groupBy: "region" } }, headers: auth });
  const groups: number | undefined = tableGroups.data?.metadata.totalGroups;
  const tableRows = await client.GET("/api/v1/tables/{id}/rows", { params: { path: { id: "tbl_targets" }, query: { limit: 100 } }, headers: auth });
  const rowId: string | undefined = tableRows.data?.data[0]?._id;

  const created = await client.POST("/api/v1/tables/{id}/rows", {
    params: { path: { id: "tbl_targets" }, header: { "Idempotency-Key": "demo-1" } },
    body: { region: "NORDICS", quarter: "2026-Q4", target: 50000 },
    headers: auth,
  });
  const createdAt: string | undefined = created.data?._createdAt;

  const updated = await client.PATCH("/api/v1/tables/{id}/rows/{rowId}", {
    params: { path: { id: "tbl_targets", rowId: "row_target_1" } },
    body: { target: 125000, expectedUpdatedAt: "2026-10-01T00:00:00.000Z" },
    headers: auth,
  });
  const updatedAt: string | undefined = updated.data?._updatedAt;

  const deleted = await client.DELETE("/api/v1/tables/{id}/rows/{rowId}", { params: { path: { id: "tbl_targets", rowId: "row_target_1" } }, headers: auth });
  const gone: true | undefined = deleted.data?.deleted;

  const tableChanges = await client.GET("/api/v1/tables/{id}/changes", { params: { path: { id: "tbl_targets" }, query: { limit: 100, wait: 5 } }, headers: auth });
  const firstChange: "insert" | "update" | "delete" | "trim" | "reset" | undefined = tableChanges.data?.changes[0]?.op;
  const datasetChanges = await client.GET("/api/v1/datasets/{id}/changes", { params: { path: { id: "ds_orders" }, query: { cursor: tableRows.data?.metadata.changesCursor ?? "" } }, headers: auth });
  const changesCursor: string | undefined = datasetChanges.data?.cursor;

  const audit = await client.GET("/api/v1/audit", { params: { query: { format: "raw", limit: 100, category: ["data_access"], since: "2026-11-01T00:00:00Z" } }, headers: auth });
  const cursor: string | undefined = audit.data?.cursor;

  const document = await client.GET("/api/v1/openapi.json");
  const version: "3.1.0" | undefined = document.data?.openapi;

  const reference = await client.GET("/api/v1/docs", { parseAs: "text" });
  const asset = await client.GET("/api/v1/docs/assets/{name}", { params: { path: { name: "swagger-ui.css" } }, parseAs: "text" });

  const receipt = await client.POST("/api/webhooks/{id}", {
    params: {
      path: { id: "wh_demo_shop_events" },
      header: { "webhook-id": "msg_1", "webhook-timestamp": "1767225600", "webhook-signature": "v1,c2lnbmF0dXJl", "Idempotency-Key": "delivery-1" },
    },
    body: { type: "order.paid", order: { id: "NW-1001", amount: 12.5 } },
  });
  const duplicate: boolean | undefined = receipt.data?.duplicate;

  const live = await client.GET("/api/health/live");
  const ready = await client.GET("/api/health/ready");
  const metrics = await client.GET("/api/metrics", { parseAs: "text" });
  void [list, writable, hasMore, firstRow, totals, groups, dashboard, totalViews, spaceRows, rowId, createdAt, updatedAt, gone, cursor, firstChange, changesCursor, version, duplicate, live.data?.status, ready.data?.checks.storage, metrics.data, reference.data, asset.data];
}

/** What the document forbids, the compiler must refuse. */
export async function refusedCalls(): Promise<void> {
  // @ts-expect-error the path parameter is required
  await client.GET("/api/v1/datasets/{id}", { params: { path: {} } });
  // @ts-expect-error maxRows is an integer, not text
  await client.GET("/api/v1/datasets/{id}/rows", { params: { path: { id: "ds_orders" }, query: { maxRows: "many" } } });
  // @ts-expect-error by is day or viewer
  await client.GET("/api/v1/dashboards/{id}/views", { params: { path: { id: "d" }, query: { by: "week" } } });
  // @ts-expect-error a row write needs a body
  await client.POST("/api/v1/tables/{id}/rows", { params: { path: { id: "tbl_targets" } } });
  // @ts-expect-error expectedUpdatedAt is a timestamp text
  await client.PATCH("/api/v1/tables/{id}/rows/{rowId}", { params: { path: { id: "t", rowId: "r" } }, body: { expectedUpdatedAt: 5 } });
  // @ts-expect-error no such operation
  await client.GET("/api/v1/nowhere");
}
`;

/** The generated named types are the zod schemas' types, both ways. */
const SAME_TYPES = `
import type { z } from "zod";
import type { components } from "./schema.js";
import type * as audit from "../../src/schemas/audit.js";
import type * as changes from "../../src/schemas/changes.js";
import type * as common from "../../src/schemas/common.js";
import type * as connections from "../../src/schemas/connections.js";
import type * as dashboards from "../../src/schemas/dashboards.js";
import type * as datasets from "../../src/schemas/datasets.js";
import type * as identity from "../../src/schemas/identity.js";
import type * as tables from "../../src/schemas/tables.js";
import type * as webhooks from "../../src/schemas/webhooks.js";

type S = components["schemas"];
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
type Check<T extends true> = T;

export type Checks = [
  Check<Same<S["Dataset"], z.output<typeof datasets.datasetSchema>>>,
  Check<Same<S["DatasetDetail"], z.output<typeof datasets.datasetDetailSchema>>>,
  Check<Same<S["DatasetRowsPage"], z.output<typeof datasets.datasetRowsPageSchema>>>,
  Check<Same<S["Column"], z.output<typeof common.columnSchema>>>,
  Check<Same<S["Error"], z.output<typeof common.errorEnvelopeSchema>>>,
  Check<Same<S["ConnectionQueryResult"], z.output<typeof connections.connectionQueryResultSchema>>>,
  Check<Same<S["Dashboard"], z.output<typeof dashboards.dashboardSchema>>>,
  Check<Same<S["DashboardViews"], z.output<typeof dashboards.dashboardViewsSchema>>>,
  Check<Same<S["SpaceObjectPage"], z.output<typeof dashboards.spaceObjectPageSchema>>>,
  Check<Same<S["TableRow"], z.output<typeof tables.tableRowSchema>>>,
  Check<Same<S["TableRowsPage"], z.output<typeof tables.tableRowsPageSchema>>>,
  Check<Same<S["AuditEvent"], z.output<typeof audit.auditEventSchema>>>,
  Check<Same<S["AuditPage"], z.output<typeof audit.auditPageSchema>>>,
  Check<Same<S["ChangesPage"], z.output<typeof changes.changesPageSchema>>>,
  Check<Same<S["Me"], z.output<typeof identity.meSchema>>>,
  Check<Same<S["WebhookReceipt"], z.output<typeof webhooks.webhookReceiptSchema>>>,
];
`;

function typeCheck(files: string[], options: ts.CompilerOptions = {}): string[] {
  const program = ts.createProgram(files, {
    target: ts.ScriptTarget.ES2022,
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    lib: ["lib.es2023.d.ts", "lib.dom.d.ts"],
    types: [],
    strict: true,
    exactOptionalPropertyTypes: true,
    noUncheckedIndexedAccess: true,
    noEmit: true,
    skipLibCheck: true,
    ...options,
  });
  return diagnosticsIn(program, (name) => name.startsWith(out)).map((d) => {
    const { line } = d.file!.getLineAndCharacterOfPosition(d.start ?? 0);
    return `${d.file!.fileName.slice(out.length + 1)}:${line + 1}: ${ts.flattenDiagnosticMessageText(d.messageText, "\n")}`;
  });
}

/** `METHOD path` of every operation in the document. */
function operationsOf(document: OpenApiDocument): string[] {
  return Object.entries(document.paths)
    .flatMap(([path, item]) => Object.keys(item).map((method) => `${method.toUpperCase()} ${path}`))
    .sort();
}

describe("the OpenAPI document through openapi-typescript and openapi-fetch", () => {
  afterAll(() => rmSync(out, { recursive: true, force: true }));

  it("generates named types and a client whose call of every operation type-checks", async () => {
    const document = createOpenApiDocument(createDataApi().routes);
    const source = astToString(await openapiTS(JSON.parse(JSON.stringify(document)), { silent: true }));
    // Named types for every resource and response.
    for (const name of [
      "Dataset",
      "DatasetDetail",
      "DatasetRowsPage",
      "ConnectionQueryResult",
      "ConnectionQueryRows",
      "ConnectionQueryGeoJson",
      "Dashboard",
      "DashboardViews",
      "SpaceObjectPage",
      "TableRow",
      "TableRowsPage",
      "AuditEvent",
      "AuditPage",
      "Me",
      "WebhookReceipt",
      "Error",
    ]) {
      expect(source, name).toMatch(new RegExp(`\\n {8}${name}: `));
    }
    // Open bodies are open objects, never an empty record (openapi-typescript's own `webhooks` and `$defs` exports
    // aside).
    expect(source.replace(/^export type (webhooks|\$defs) = Record<string, never>;$/gm, "")).not.toContain(
      "Record<string, never>",
    );
    expect(source).toMatch(/ {8}TableRowValues: \{\n {12}\[key: string\]: unknown;\n {8}\};/);

    mkdirSync(out, { recursive: true });
    writeFileSync(join(out, "schema.ts"), source);
    writeFileSync(join(out, "calls.ts"), CALLS);
    writeFileSync(join(out, "same-types.ts"), SAME_TYPES);

    // The calls cover every operation of the document.
    const called = [
      ...CALLS.split("export async function refusedCalls")[0]!.matchAll(
        /client\.(GET|POST|PATCH|PUT|DELETE)\("([^"]+)"/g,
      ),
    ].map(([, m, p]) => `${m} ${p}`);
    expect([...new Set(called)].sort()).toEqual(operationsOf(document));

    expect(typeCheck([join(out, "calls.ts")])).toEqual([]);
    // zod types an optional field `T | undefined`, which JSON never carries: compared without exact optional
    // properties.
    expect(typeCheck([join(out, "same-types.ts")], { exactOptionalPropertyTypes: false })).toEqual([]);
  }, 120_000);

  it("generates the admin API's types too, every body open", async () => {
    const document = createOpenApiDocument(adminMount.routes.map((route) => ({ mount: adminMount.base, route })));
    const source = astToString(await openapiTS(JSON.parse(JSON.stringify(document)), { silent: true }));
    expect(source.replace(/^export type (webhooks|\$defs) = Record<string, never>;$/gm, "")).not.toContain(
      "Record<string, never>",
    );
    for (const id of ["listBusinesses", "putMembership", "createApiKey", "revokeApiKey", "replaceDatasetRows"])
      expect(source).toContain(`    ${id}: {`);
    mkdirSync(out, { recursive: true });
    writeFileSync(join(out, "admin-schema.ts"), source);
    expect(typeCheck([join(out, "admin-schema.ts")])).toEqual([]);
  }, 120_000);
});
