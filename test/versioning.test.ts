import { describe, expect, it } from "vitest";
import { z } from "zod";
import { assembleDataApi } from "../src/server/api.js";
import { createOpenApiDocument } from "../src/routes/openapi-document.js";
import { authed, type RouteDef } from "../src/routes/route-def.js";
import { reachableDataset } from "../src/handlers/datasets.js";
import { createFixedClock } from "../src/memory/fixed-clock.js";
import { createMemoryStorage } from "../src/memory/memory-storage.js";
import { parseFixture } from "../src/fixture/load.js";
import { adminMount, apiV1Routes, mounts } from "../src/routes/index.js";
import { testFixture, TOKENS } from "./support/fixture.js";
import { NOW, setup } from "./support/api.js";

/**
 * How a breaking change ships (docs/versioning.md): the new shape under
 * `/api/v2`, the `/api/v1` route kept, marked deprecated with a date and a
 * sunset, for at least 12 months.
 */
const v2Dataset = authed({
  method: "GET",
  path: "/datasets/:id",
  operationId: "getDatasetV2",
  auth: "bearer",
  scope: "data:read",
  tag: "Datasets",
  summary: "One dataset (v2: its name under `title`)",
  responses: { 200: z.object({ dataset: z.object({ id: z.string(), title: z.string() }) }) },
  handle: async ({ params }, ctx) => {
    const dataset = await reachableDataset(ctx, params.id!);
    return { dataset: { id: dataset.id, title: dataset.name } };
  },
});

const DEPRECATED = { since: "2026-10-01", sunset: "2027-10-01", link: "https://bi.example.com/docs/v2-migration" };

/** The route table with `getDataset` deprecated in v1 and a v2 mount serving its successor. */
function withV2(deprecated: RouteDef["deprecated"] = DEPRECATED) {
  const v1 = apiV1Routes.map((route) => (route.operationId === "getDataset" ? { ...route, deprecated } : route));
  return {
    mounts: [{ base: "/api/v1", routes: v1 }, ...mounts.slice(1), { base: "/api/v2", routes: [v2Dataset] }],
    adminMount,
  };
}

async function versionedApi(deprecated?: RouteDef["deprecated"]) {
  const storage = createMemoryStorage();
  await storage.seed(parseFixture(testFixture()));
  const api = assembleDataApi(
    { storage, clock: createFixedClock(NOW), appUrl: "https://bi.example.com" },
    withV2(deprecated),
  );
  const get = (path: string) =>
    api.fetch(new Request(`https://bi.example.com${path}`, { headers: { authorization: `Bearer ${TOKENS.sync}` } }));
  return { api, get };
}

describe("a /api/v2 route beside /api/v1, the v1 route deprecated", () => {
  it("answers v1 as before, with Deprecation (RFC 9745), Sunset (RFC 8594) and Link rel=deprecation, exposed to scripts", async () => {
    const { get } = await versionedApi();
    const v1 = await get("/api/v1/datasets/ds_orders");
    expect(v1.status).toBe(200);
    expect(((await v1.json()) as { name: string }).name).toBe("Orders 2026");
    expect(v1.headers.get("deprecation")).toBe("@1790812800");
    expect(v1.headers.get("sunset")).toBe("Fri, 01 Oct 2027 00:00:00 GMT");
    expect(v1.headers.get("link")).toBe('<https://bi.example.com/docs/v2-migration>; rel="deprecation"');
    expect(v1.headers.get("access-control-expose-headers")).toBe("X-Request-Id, ETag, Deprecation, Sunset, Link");
    // Errors of the deprecated route say it too.
    const missing = await get("/api/v1/datasets/ds_nowhere");
    expect([missing.status, missing.headers.get("deprecation")]).toEqual([404, "@1790812800"]);
  });

  it("serves the v2 shape under /api/v2 without deprecation headers, and leaves other v1 routes alone", async () => {
    const { get } = await versionedApi();
    const v2 = await get("/api/v2/datasets/ds_orders");
    expect(v2.status).toBe(200);
    expect(await v2.json()).toEqual({ dataset: { id: "ds_orders", title: "Orders 2026" } });
    expect(v2.headers.get("deprecation")).toBeNull();
    const rows = await get("/api/v1/datasets/ds_orders/rows?maxRows=1");
    expect([rows.status, rows.headers.get("deprecation"), rows.headers.get("sunset")]).toEqual([200, null, null]);
    expect((await get("/api/v2/datasets")).status).toBe(404);
  });

  it("documents both: deprecated: true with its dates and headers on v1, the v2 path beside it", async () => {
    const { api } = await versionedApi();
    const document = createOpenApiDocument(api.routes);
    const v1 = document.paths["/api/v1/datasets/{id}"]!.get!;
    expect(v1.deprecated).toBe(true);
    expect(v1.description).toContain("Deprecated since 2026-10-01; answers until 2027-10-01");
    expect(v1.responses["200"]).toMatchObject({
      headers: {
        Deprecation: { $ref: "#/components/headers/Deprecation" },
        Sunset: { $ref: "#/components/headers/Sunset" },
      },
    });
    expect(document.paths["/api/v2/datasets/{id}"]!.get!.operationId).toBe("getDatasetV2");
    expect(document.paths["/api/v2/datasets/{id}"]!.get!.deprecated).toBeUndefined();
    expect(document.paths["/api/v1/datasets/{id}/rows"]!.get!.deprecated).toBeUndefined();
  });

  it("links the API reference when the route names no link, and sends no Sunset before one is set", async () => {
    const { get } = await versionedApi({ since: "2027-01-15T12:00:00Z" });
    const v1 = await get("/api/v1/datasets/ds_orders");
    expect([v1.headers.get("deprecation"), v1.headers.get("sunset"), v1.headers.get("link")]).toEqual([
      "@1800014400",
      null,
      '<https://bi.example.com/api/v1/docs>; rel="deprecation"',
    ]);
  });

  it("refuses a deprecation it cannot state at start-up, not per request", async () => {
    await expect(versionedApi({ since: "next year" })).rejects.toThrow(
      'deprecated.since must be an ISO 8601 date or timestamp, not "next year"',
    );
    await expect(versionedApi({ since: "2027-01-01", sunset: "2026-01-01" })).rejects.toThrow(
      "is before deprecated.since",
    );
  });
});

describe("the routes as shipped", () => {
  it("deprecate nothing yet: no answer carries Deprecation", async () => {
    const { call } = await setup();
    const res = await call("GET", "/api/v1/datasets/ds_orders", { token: TOKENS.sync });
    expect([res.status, res.headers.get("deprecation")]).toEqual([200, null]);
    expect(apiV1Routes.filter((route) => route.deprecated)).toEqual([]);
  });
});
