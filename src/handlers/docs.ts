import { readFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { ApiError } from "../base/api-error.js";
import { Reply } from "../http/reply.js";

/**
 * The API reference page: Swagger UI's standalone bundle, from the
 * `swagger-ui-dist` package in node_modules (resolved when asked for, never
 * copied into this package), rendering the served OpenAPI document. Every
 * script, style and image comes from this server, so the page works offline
 * and its Content-Security-Policy allows nothing but this origin.
 *
 * The page names its assets by query-only references (`?asset=swagger-ui.css`),
 * which a browser resolves against the page's own path whatever it is: the page
 * works at `/api/v1/docs`, at `/api/v1/docs/`, and under a host's mount path
 * (`/bi/api/v1/docs`), where the core never learns the prefix.
 */

/** The npm package whose standalone bundle renders the page: an optional peer dependency of dataport. */
export const REFERENCE_PACKAGE = "swagger-ui-dist";

/** What to run to get the page, shown where it is missing. */
export const REFERENCE_INSTALL = `npm install ${REFERENCE_PACKAGE}`;

/**
 * Only this origin, for everything the page loads and does: no inline script
 * or style, no eval, no frames, no form posts. Images may also be `data:`
 * URLs: Swagger UI's style sheet draws its icons (arrows, copy) with inline
 * SVG, which carries its bytes with it and loads nothing from anywhere.
 * "Try it out" calls reach this origin only (connect-src), so they work when
 * the document's server (`appUrl`) is the origin the page is read from.
 */
export const REFERENCE_CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; font-src 'self'; connect-src 'self'; " +
  "base-uri 'none'; form-action 'none'; frame-ancestors 'self'";

/** Headers of every answer here: the strict type, no sniffing, the policy above. */
function headersFor(contentType: string, cacheControl: string): Record<string, string> {
  return {
    "content-type": contentType,
    "cache-control": cacheControl,
    "content-security-policy": REFERENCE_CSP,
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
  };
}

/**
 * The page is fetched afresh each time (it is small); its asset URLs carry the
 * bundle's version (`?v=`), so after an upgrade the page never meets a cached
 * old bundle. Dataport's own two assets may change without the bundle, hence
 * a day rather than for ever.
 */
const PAGE_CACHE = "no-cache";
const ASSET_CACHE = "public, max-age=86400";

type Asset = { type: string } & ({ file: string } | { text: string });

/**
 * What the assets route serves, by name, and nothing else (a name not here is
 * 404, so no path reaches the file system). Files come from the package;
 * the start-up script and the page style are Dataport's own.
 */
const ASSETS: ReadonlyMap<string, Asset> = new Map<string, Asset>([
  ["swagger-ui-bundle.js", { file: "swagger-ui-bundle.js", type: "text/javascript; charset=utf-8" }],
  ["swagger-ui.css", { file: "swagger-ui.css", type: "text/css; charset=utf-8" }],
  ["favicon-32x32.png", { file: "favicon-32x32.png", type: "image/png" }],
  [
    "dataport-docs.css",
    {
      text: "html { overflow-y: scroll; }\nbody { margin: 0; background: #fafafa; }\n",
      type: "text/css; charset=utf-8",
    },
  ],
  [
    "dataport-docs.js",
    {
      // The document is beside the page (`openapi.json` next to `docs`), found from the page's own
      // URL, so one script serves any mount path, with or without a trailing slash.
      text: `"use strict";
window.addEventListener("load", function () {
  var root = document.getElementById("swagger-ui");
  var dir = location.pathname.replace(/\\/docs\\/?$/, "/");
  window.ui = SwaggerUIBundle({
    url: new URL(root.getAttribute("data-openapi-url"), location.origin + dir).href,
    domNode: root,
    presets: [SwaggerUIBundle.presets.apis],
    layout: "BaseLayout",
    displayOperationId: true,
    deepLinking: true,
    validatorUrl: null,
  });
});
`,
      type: "text/javascript; charset=utf-8",
    },
  ],
]);

/**
 * GET /api/v1/docs: the HTML page, whose scripts and styles are the assets
 * below (`?asset=NAME`, the same answer as `/api/v1/docs/assets/NAME`).
 * Without the package, a page saying how to install it.
 */
export async function referencePage(query: { asset?: string | undefined }): Promise<Reply> {
  if (query.asset !== undefined) return referenceAsset(query.asset);
  const found = referencePackage();
  if (found === null) return notInstalledPage();
  const asset = (name: string) => escapeAttribute(`?asset=${name}&v=${found.version}`);
  const html = `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Dataport API reference</title>
<link rel="icon" type="image/png" href="${asset("favicon-32x32.png")}">
<link rel="stylesheet" href="${asset("swagger-ui.css")}">
<link rel="stylesheet" href="${asset("dataport-docs.css")}">
</head>
<body>
<div id="swagger-ui" data-openapi-url="openapi.json"></div>
<script src="${asset("swagger-ui-bundle.js")}"></script>
<script src="${asset("dataport-docs.js")}"></script>
</body>
</html>
`;
  return new Reply(200, html, headersFor("text/html; charset=utf-8", PAGE_CACHE));
}

/**
 * The page in its place when the package is missing: what to install, and
 * where the document is meanwhile. Answered 200 like the page it stands for
 * (the document describes this route's answer as an HTML page), never cached,
 * so the page appears on the next load once the package is installed.
 */
function notInstalledPage(): Reply {
  const html = `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Dataport API reference: not installed</title>
</head>
<body>
<h1>The API reference page needs ${REFERENCE_PACKAGE}</h1>
<p>This page renders the API's OpenAPI document with Swagger UI, from the npm package
<code>${REFERENCE_PACKAGE}</code> (about 12 MB), an optional peer dependency of dataport that
this server does not have. Install it beside dataport, then reload this page:</p>
<pre>${REFERENCE_INSTALL}</pre>
<p>The OpenAPI document itself needs nothing: it is <code>openapi.json</code> beside this page
(<code>/api/v1/openapi.json</code>, below the host's mount path if there is one).</p>
</body>
</html>
`;
  return new Reply(200, html, headersFor("text/html; charset=utf-8", PAGE_CACHE));
}

/** GET /api/v1/docs/assets/:name (and /api/v1/docs?asset=NAME): one of the named assets, 404 for any other name. */
export async function referenceAsset(name: string): Promise<Reply> {
  const asset = ASSETS.get(name);
  if (asset === undefined) throw new ApiError(404, "not_found", "no such asset of the API reference page");
  if ("text" in asset) return new Reply(200, asset.text, headersFor(asset.type, ASSET_CACHE));
  const found = referencePackage();
  if (found === null) {
    throw new ApiError(
      404,
      "not_found",
      `the API reference page needs the npm package ${REFERENCE_PACKAGE}, which is not installed: ${REFERENCE_INSTALL}`,
    );
  }
  const { dir } = found;
  const bytes = await readFile(join(dir, asset.file));
  return new Reply(
    200,
    new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength),
    headersFor(asset.type, ASSET_CACHE),
  );
}

/**
 * The installed package's directory and version, looked up on each call from
 * this module's location (src/ in development, dist/ once published): the
 * package is found in node_modules as any import would find it; null when it
 * is not installed.
 */
function referencePackage(): { dir: string; version: string } | null {
  let manifestPath: string;
  try {
    manifestPath = createRequire(import.meta.url).resolve(`${REFERENCE_PACKAGE}/package.json`);
  } catch {
    return null;
  }
  const { version } = createRequire(import.meta.url)(manifestPath) as { version: string };
  return { dir: dirname(manifestPath), version };
}

function escapeAttribute(text: string): string {
  return text.replace(/&/g, "&amp;").replace(/"/g, "&quot;").replace(/</g, "&lt;");
}
