import { Reply } from "../http/reply.js";
import { createOpenApiDocument } from "../openapi.js";
import { admin, open } from "../routing.js";
import { openApiDocumentSchema } from "../schemas/operations.js";

export const openapiRoutes = [
  open({
    method: "GET",
    path: "/openapi.json",
    operationId: "getOpenApiDocument",
    auth: "none",
    tag: "Meta",
    summary: "This API's OpenAPI 3.1 document (no authentication)",
    responses: { 200: openApiDocumentSchema },
    logged: false,
    async handle(_input, ctx) {
      // Serialised once per API instance (ctx.caches): neither the route table nor the settings change at run time.
      const { appUrl, maxBodyBytes } = ctx.settings;
      let text = ctx.caches.documents.get("api");
      if (text === undefined) {
        // Imported when first asked for: the route table includes this very route.
        const { mounts } = await import("../routes.js");
        const routes = mounts.flatMap(({ base, routes }) => routes.map((route) => ({ mount: base, route })));
        text = JSON.stringify(createOpenApiDocument(routes, { serverUrl: appUrl, maxBodyBytes }));
        ctx.caches.documents.set("api", text);
      }
      return Reply.jsonText(200, text, { "cache-control": "public, max-age=300" });
    },
  }),
];

/** The admin API's own document (`/api/admin/v1/openapi.json`), behind the admin token like every admin route. */
export const adminOpenapiRoutes = [
  admin({
    method: "GET",
    path: "/openapi.json",
    operationId: "getAdminOpenApiDocument",
    auth: "admin",
    tag: "Meta",
    summary: "The admin API's OpenAPI 3.1 document",
    responses: { 200: openApiDocumentSchema },
    logged: false,
    async handle(_input, ctx) {
      const { appUrl, maxBodyBytes, maxUploadBytes } = ctx.settings;
      let text = ctx.caches.documents.get("admin");
      if (text === undefined) {
        const { adminMount } = await import("../routes.js");
        const routes = adminMount.routes.map((route) => ({ mount: adminMount.base, route }));
        const document = createOpenApiDocument(routes, { serverUrl: appUrl, title: "Dataport admin API", maxBodyBytes, maxUploadBytes });
        text = JSON.stringify(document);
        ctx.caches.documents.set("admin", text);
      }
      return Reply.jsonText(200, text);
    },
  }),
];
