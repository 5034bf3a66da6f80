import { z } from "zod";
import { referenceAsset, referencePage } from "../handlers/docs.js";
import { open } from "./route-def.js";
import { errorEnvelopeSchema } from "../schemas/common.js";

/**
 * The API reference page and its assets, beside `/openapi.json` under the
 * `/api/v1` mount: no authentication, kept out of the API usage log. The page
 * loads its assets as `?asset=NAME` of its own URL, so it works with or
 * without a trailing slash and under a host's mount path (`/bi/api/v1/docs`).
 */
const pageQuery = z.object({
  /** One of the page's assets instead of the page (the names `/docs/assets/{name}` serves). */
  asset: z.string().max(100).optional(),
  /** The bundle's version, so that an upgrade is never met by a cached asset; not read. */
  v: z.string().max(100).optional(),
});

export const docsRoutes = [
  open<z.infer<typeof pageQuery>>({
    method: "GET",
    path: "/docs",
    operationId: "getApiReference",
    auth: "none",
    tag: "Meta",
    summary:
      "This API's interactive reference, an HTML page rendering the OpenAPI document (no authentication; every " +
      "asset served from this origin)",
    produces: "text/html; charset=utf-8",
    query: pageQuery,
    responses: { 404: errorEnvelopeSchema },
    logged: false,
    handle: ({ query }) => referencePage(query),
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
