import { Reply } from "../http/reply.js";
import { createOpenApiDocument } from "./openapi-document.js";
import { admin, open, type RouteDef } from "./route-def.js";
import { openApiDocumentSchema } from "../schemas/operations.js";

/** A mount of the route table: its base path and routes. */
export interface Mount {
  base: string;
  routes: readonly RouteDef[];
}

/** The API's own document, of the mounts `mounts()` answers (the route table includes this very route, so it is asked for late). */
export const openapiRoutes = (mounts: () => readonly Mount[]) => [
  open({
    method: "GET",
    path: "/openapi.json",
    operationId: "getOpenApiDocument",
    auth: "none",
    tag: "Meta",
    summary: "This API's OpenAPI 3.1 document (no authentication)",
    responses: { 200: openApiDocumentSchema },
    logged: false,
    handle(_input, ctx) {
      // Serialised once per API instance (ctx.caches): neither the route table nor the settings change at run time.
      const { appUrl, maxBodyBytes } = ctx.settings;
      let text = ctx.caches.documents.get("api");
      if (text === undefined) {
        const routes = mounts().flatMap(({ base, routes }) => routes.map((route) => ({ mount: base, route })));
        text = JSON.stringify(createOpenApiDocument(routes, { serverUrl: appUrl, maxBodyBytes }));
        ctx.caches.documents.set("api", text);
      }
      return Reply.jsonText(200, text, { "cache-control": "public, max-age=300" });
    },
  }),
];

/** The admin API's own document (`/api/admin/v1/openapi.json`), behind the admin token like every admin route. */
export const adminOpenapiRoutes = (adminMount: () => Mount) => [
  admin({
    method: "GET",
    path: "/openapi.json",
    operationId: "getAdminOpenApiDocument",
    auth: "admin",
    tag: "Meta",
    summary: "The admin API's OpenAPI 3.1 document",
    responses: { 200: openApiDocumentSchema },
    logged: false,
    handle(_input, ctx) {
      const { appUrl, maxBodyBytes, maxUploadBytes } = ctx.settings;
      let text = ctx.caches.documents.get("admin");
      if (text === undefined) {
        const { base, routes: table } = adminMount();
        const routes = table.map((route) => ({ mount: base, route }));
        const document = createOpenApiDocument(routes, { serverUrl: appUrl, title: "Dataport admin API", maxBodyBytes, maxUploadBytes });
        text = JSON.stringify(document);
        ctx.caches.documents.set("admin", text);
      }
      return Reply.jsonText(200, text);
    },
  }),
];
