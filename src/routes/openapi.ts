import { Reply } from "../http/reply.js";
import { createOpenApiDocument } from "./openapi-document.js";
import { admin, open, type RouteDef } from "./route-def.js";
import { openApiDocumentSchema } from "../schemas/operations.js";

/** A mount of the route table: its base path and routes. */
export interface Mount {
  base: string;
  routes: readonly RouteDef[];
}

/**
 * The API's own document, of the mounts `mounts()` answers (the route table includes this very route, so it is asked
 * for late).
 */
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

/**
 * What the admin document says of itself (the Data API's description is about API keys and sessions, which this API
 * refuses).
 */
export const ADMIN_DESCRIPTION = [
  "The host's admin API: everything a host changes in Dataport's world while it runs — businesses, teams, users, " +
    "memberships, sessions, API keys, connections, datasets and their rows, input tables, dashboards and the history " +
    "behind the activity endpoints.",
  "",
  "* **Authentication**: every call sends `Authorization: Bearer <admin token>` (the server's `adminToken`, compared " +
    "in constant time); API keys and session tokens are refused with 401. Mounted only when an admin token is " +
    "configured.",
  "* **Actor**: `X-Actor-User-Id` names the host user a change is recorded for in the audit feed (a known user, else " +
    "422); without it the host is the actor.",
  "* **Shapes**: the fixture format's field names, enums and timestamps. An unknown field or a reference to an unknown " +
    "id is 422 `validation_failed` with `details.path` naming the first problem.",
  "* **Writes**: `PUT /<collection>/{id}` is idempotent: 201 with the stored object when it was created, 200 when it " +
    "was replaced; `DELETE` answers 204, 404 when there is nothing to delete. Row uploads (`PUT`/`POST " +
    "/datasets/{id}/rows`) stream a JSON array, NDJSON or CSV and apply atomically.",
  '* **Errors**: the Data API\'s envelope `{ "error": { "code", "message", "details"?, "requestId" } }`.',
].join("\n");

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
        const document = createOpenApiDocument(routes, {
          serverUrl: appUrl,
          title: "Dataport admin API",
          description: ADMIN_DESCRIPTION,
          maxBodyBytes,
          maxUploadBytes,
        });
        text = JSON.stringify(document);
        ctx.caches.documents.set("admin", text);
      }
      return Reply.jsonText(200, text);
    },
  }),
];
