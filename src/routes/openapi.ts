import { z } from "zod";
import { Reply } from "../http/reply.js";
import { createOpenApiDocument } from "../openapi.js";
import { admin, open } from "../routing.js";

/** One serialised document per application origin; the route table does not change at run time. */
const documents = new Map<string, string>();

export const openapiRoutes = [
  open({
    method: "GET",
    path: "/openapi.json",
    auth: "none",
    tag: "Meta",
    summary: "This API's OpenAPI 3.1 document (no authentication)",
    responses: { 200: z.object({ openapi: z.literal("3.1.0") }).loose() },
    logged: false,
    async handle(_input, ctx) {
      let text = documents.get(ctx.settings.appUrl);
      if (text === undefined) {
        // Imported when first asked for: the route table includes this very route.
        const { mounts } = await import("../routes.js");
        const routes = mounts.flatMap(({ base, routes }) => routes.map((route) => ({ mount: base, route })));
        text = JSON.stringify(createOpenApiDocument(routes, { serverUrl: ctx.settings.appUrl }));
        documents.set(ctx.settings.appUrl, text);
      }
      return Reply.jsonText(200, text, { "cache-control": "public, max-age=300" });
    },
  }),
];

/** The admin API's own document (`/api/admin/v1/openapi.json`), behind the admin token like every admin route. */
let adminDocument: { appUrl: string; text: string } | null = null;
export const adminOpenapiRoutes = [
  admin({
    method: "GET",
    path: "/openapi.json",
    auth: "admin",
    tag: "Meta",
    summary: "The admin API's OpenAPI 3.1 document",
    responses: { 200: z.object({ openapi: z.literal("3.1.0") }).loose() },
    logged: false,
    async handle(_input, ctx) {
      if (adminDocument?.appUrl !== ctx.settings.appUrl) {
        const { adminMount } = await import("../routes.js");
        const routes = adminMount.routes.map((route) => ({ mount: adminMount.base, route }));
        const document = createOpenApiDocument(routes, { serverUrl: ctx.settings.appUrl, title: "Dataport admin API" });
        adminDocument = { appUrl: ctx.settings.appUrl, text: JSON.stringify(document) };
      }
      return Reply.jsonText(200, adminDocument.text);
    },
  }),
];
