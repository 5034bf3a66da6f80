import { referenceAsset, referencePage, type ReferencePaths } from "../handlers/docs.js";
import { open } from "../core/routing.js";
import { errorEnvelopeSchema } from "../schemas/common.js";

/**
 * The API reference page and its assets, beside `/openapi.json` under the
 * `/api/v1` mount: no authentication, kept out of the API usage log. The page
 * names its assets and the document by absolute path, so it works with or
 * without a trailing slash.
 */
const PATHS: ReferencePaths = { assets: "/api/v1/docs/assets", document: "/api/v1/openapi.json" };

export const docsRoutes = [
  open({
    method: "GET",
    path: "/docs",
    operationId: "getApiReference",
    auth: "none",
    tag: "Meta",
    summary: "This API's interactive reference, an HTML page rendering the OpenAPI document (no authentication; every asset served from this origin)",
    produces: "text/html; charset=utf-8",
    responses: { 404: errorEnvelopeSchema },
    logged: false,
    handle: () => referencePage(PATHS),
  }),
  open({
    method: "GET",
    path: "/docs/assets/:name",
    operationId: "getApiReferenceAsset",
    auth: "none",
    tag: "Meta",
    summary: "A script, style sheet or icon of the API reference page",
    produces: "*/*",
    responses: { 404: errorEnvelopeSchema },
    logged: false,
    handle: ({ params }) => referenceAsset(params.name!),
  }),
];
