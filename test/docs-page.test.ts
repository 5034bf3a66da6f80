import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { once } from "node:events";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium, type BrowserContext } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { toNodeHandler } from "../adapters/node.js";
import { REFERENCE_CSP } from "../src/handlers/docs.js";
import type { OpenApiDocument } from "../src/routes/openapi-document.js";
import { setup } from "./support/api.js";

/**
 * The API reference page (`GET /api/v1/docs`): its answers over HTTP, then the
 * page itself in Debian's headless Chromium, driven by playwright-core (never
 * a downloaded browser), against the API served in-process by the Node adapter.
 */
const CHROMIUM = "/usr/bin/chromium";
const IN_CI = process.env.CI === "true";
const HAVE_CHROMIUM = existsSync(CHROMIUM);
if (!HAVE_CHROMIUM && !IN_CI) {
  console.warn(
    `\n[test/docs-page] SKIPPING the browser test: ${CHROMIUM} is missing (apt-get install -y chromium). CI=true makes this a failure.\n`,
  );
}

const ASSET_NAMES = [
  "swagger-ui-bundle.js",
  "swagger-ui.css",
  "dataport-docs.js",
  "dataport-docs.css",
  "favicon-32x32.png",
];
const bundleVersion = (
  JSON.parse(
    readFileSync(join(import.meta.dirname, "..", "node_modules", "swagger-ui-dist", "package.json"), "utf8"),
  ) as { version: string }
).version;

describe("GET /api/v1/docs over HTTP", () => {
  it("serves the page without a token: strict type, no-cache, a policy allowing this origin only, assets as ?asset= of its own URL", async () => {
    const { call } = await setup();
    const res = await call("GET", "/api/v1/docs");
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("text/html; charset=utf-8");
    expect(res.headers.get("cache-control")).toBe("no-cache");
    expect(res.headers.get("x-content-type-options")).toBe("nosniff");
    const csp = res.headers.get("content-security-policy")!;
    expect(csp).toBe(REFERENCE_CSP);
    // Every fetch directive names this origin and nothing else: no host, no inline code, no eval (images: data: too,
    // the style sheet's SVG icons).
    const directives = Object.fromEntries(
      csp
        .split(";")
        .map((d) => d.trim().split(/\s+/))
        .map(([name, ...values]) => [name, values]),
    );
    expect(directives["default-src"]).toEqual(["'none'"]);
    for (const name of ["script-src", "style-src", "font-src", "connect-src"])
      expect(directives[name], name).toEqual(["'self'"]);
    expect(directives["img-src"]).toEqual(["'self'", "data:"]);
    expect(directives["base-uri"]).toEqual(["'none'"]);
    // No inline script or style in the page: all of it is in the assets.
    expect(res.text).not.toMatch(/<script(?![^>]*\ssrc=)[^>]*>|<style|\sstyle=|\son[a-z]+=/i);
    const sources = [...res.text.matchAll(/\s(?:src|href)="([^"]+)"/g)].map(([, url]) => url);
    // Query-only references resolve against the page's own path, whatever mount path a host put it under.
    expect(sources.sort()).toEqual(
      ["dataport-docs.css", "dataport-docs.js", "favicon-32x32.png", "swagger-ui-bundle.js", "swagger-ui.css"].map(
        (name) => `?asset=${name}&amp;v=${bundleVersion}`,
      ),
    );
    expect(res.text).toContain('data-openapi-url="openapi.json"');
  });

  it("answers ?asset=NAME with the asset /docs/assets/NAME serves, at /docs and /docs/; an unknown name is 404", async () => {
    const { api, call } = await setup();
    for (const name of ["swagger-ui-bundle.js", "swagger-ui.css", "favicon-32x32.png", "dataport-docs.js"]) {
      const viaPath = await api.fetch(new Request(`http://dataport.test/api/v1/docs/assets/${name}`));
      for (const page of ["/api/v1/docs", "/api/v1/docs/"]) {
        const viaQuery = await api.fetch(new Request(`http://dataport.test${page}?asset=${name}&v=${bundleVersion}`));
        expect(viaQuery.status, name).toBe(200);
        expect(viaQuery.headers.get("content-type"), name).toBe(viaPath.headers.get("content-type"));
        expect(viaQuery.headers.get("cache-control"), name).toBe("public, max-age=86400");
        expect(
          Buffer.from(await viaQuery.arrayBuffer()).equals(Buffer.from(await viaPath.clone().arrayBuffer())),
          `${page} ${name}`,
        ).toBe(true);
      }
    }
    for (const name of ["package.json", "__proto__", "../package.json", ""]) {
      const res = await call("GET", `/api/v1/docs?asset=${encodeURIComponent(name)}`);
      expect(res.status, name).toBe(404);
      expect(res.json.error.code, name).toBe("not_found");
    }
    expect((await call("GET", `/api/v1/docs?asset=${"x".repeat(101)}`)).status).toBe(400);
  });

  it("serves each asset with its own type and a day's cache; the bundle is the installed package's file", async () => {
    const { call, api } = await setup();
    const types: Record<string, string> = {
      "swagger-ui-bundle.js": "text/javascript; charset=utf-8",
      "swagger-ui.css": "text/css; charset=utf-8",
      "favicon-32x32.png": "image/png",
      "dataport-docs.js": "text/javascript; charset=utf-8",
      "dataport-docs.css": "text/css; charset=utf-8",
    };
    for (const [name, type] of Object.entries(types)) {
      const res = await call("GET", `/api/v1/docs/assets/${name}`);
      expect(res.status, name).toBe(200);
      expect(res.headers.get("content-type"), name).toBe(type);
      expect(res.headers.get("cache-control"), name).toBe("public, max-age=86400");
      expect(res.headers.get("x-content-type-options"), name).toBe("nosniff");
    }
    const bundle = await api.fetch(new Request("http://dataport.test/api/v1/docs/assets/swagger-ui-bundle.js"));
    const onDisk = readFileSync(
      join(import.meta.dirname, "..", "node_modules", "swagger-ui-dist", "swagger-ui-bundle.js"),
    );
    expect(Buffer.from(await bundle.arrayBuffer()).equals(onDisk)).toBe(true);
    const png = Buffer.from(
      await (await api.fetch(new Request("http://dataport.test/api/v1/docs/assets/favicon-32x32.png"))).arrayBuffer(),
    );
    expect(png.subarray(1, 4).toString("latin1")).toBe("PNG");
  });

  it("answers any other asset name 404 in the envelope, without reaching the file system", async () => {
    const { call } = await setup();
    for (const name of [
      "package.json",
      "index.html",
      "swagger-ui-bundle.js.map",
      "..%2Fpackage.json",
      "__proto__",
      "constructor",
      "toString",
    ]) {
      const res = await call("GET", `/api/v1/docs/assets/${name}`);
      expect(res.status, name).toBe(404);
      expect(res.json.error.code, name).toBe("not_found");
    }
  });

  it("takes GET only: other methods are 405 naming GET", async () => {
    const { call } = await setup();
    for (const method of ["POST", "PUT", "PATCH", "DELETE"]) {
      for (const path of ["/api/v1/docs", "/api/v1/docs/assets/swagger-ui.css"]) {
        const res = await call(method, path);
        expect(res.status, `${method} ${path}`).toBe(405);
        expect(res.headers.get("allow")).toBe("GET, HEAD, OPTIONS");
      }
    }
  });
});

describe.skipIf(!HAVE_CHROMIUM && !IN_CI)("the API reference page in headless Chromium", () => {
  let server: http.Server;
  let origin: string;
  let context: BrowserContext;
  let profile: string;

  beforeAll(async () => {
    expect(existsSync(CHROMIUM), `${CHROMIUM} is missing: apt-get install -y chromium`).toBe(true);
    // The document names the server's own origin, so "Try it out" stays on it (connect-src 'self').
    let api: Awaited<ReturnType<typeof setup>>["api"] | undefined;
    server = http.createServer((req, res) => toNodeHandler(api!)(req, res));
    server.listen(0, "127.0.0.1");
    await once(server, "listening");
    origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    ({ api } = await setup({ appUrl: origin }));
    profile = mkdtempSync(join(tmpdir(), "dataport-chromium-"));
    context = await chromium.launchPersistentContext(profile, {
      executablePath: CHROMIUM,
      headless: true,
      args: [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-quic",
        "--disable-component-update",
        "--disable-sync",
      ],
    });
    // Nothing may leave this machine even if the page tried: such requests are recorded (below) and aborted.
    await context.route(
      (url) => url.hostname !== "127.0.0.1",
      (route) => route.abort(),
    );
  }, 20_000);

  afterAll(async () => {
    await context?.close();
    await new Promise((resolve) => server?.close(resolve));
    if (profile) rmSync(profile, { recursive: true, force: true });
  });

  it("renders every operation of the document, from this origin only, with no console error", async () => {
    const document = (await (await fetch(`${origin}/api/v1/openapi.json`)).json()) as OpenApiDocument;
    const operations = Object.values(document.paths).flatMap((item) => Object.values(item));
    expect(operations.length).toBeGreaterThan(15);

    const page = await context.newPage();
    const requests: string[] = [];
    const problems: string[] = [];
    page.on("request", (request) => requests.push(request.url()));
    page.on("console", (message) => {
      if (message.type() === "error" || message.type() === "warning")
        problems.push(`console.${message.type()}: ${message.text()}`);
    });
    page.on("pageerror", (error) => problems.push(`page error: ${error.message}`));
    page.on("requestfailed", (request) =>
      problems.push(`request failed: ${request.url()} ${request.failure()?.errorText}`),
    );

    const response = await page.goto(`${origin}/api/v1/docs`);
    expect(response!.status()).toBe(200);
    // Swagger UI lists every operation (collapsed) once the document is loaded: one block per operation.
    await page
      .locator(".opblock")
      .nth(operations.length - 1)
      .waitFor({ timeout: 15_000 });
    expect(await page.locator(".opblock").count()).toBe(operations.length);

    const renderedIds = await page.locator(".opblock-summary-operation-id").allTextContents();
    expect(renderedIds.map((id) => id.trim()).sort()).toEqual(operations.map((op) => op.operationId).sort());
    const renderedSummaries = await page.locator(".opblock-summary-description").allTextContents();
    expect(renderedSummaries.map((text) => text.trim()).sort()).toEqual(operations.map((op) => op.summary).sort());
    await expect(page.title()).resolves.toBe("Dataport API reference");

    // "Try it out" on the document's own operation: the call goes to this origin and is shown.
    const block = page.locator("#operations-Meta-getOpenApiDocument");
    await block.locator(".opblock-summary-control").click();
    await block.getByRole("button", { name: "Try it out" }).click();
    await block.getByRole("button", { name: "Execute" }).click();
    await expect(
      block.locator(".live-responses-table tbody .response-col_status").first().textContent(),
    ).resolves.toContain("200");

    const elsewhere = requests.filter((url) => new URL(url).origin !== origin);
    expect(elsewhere).toEqual([]);
    // The page, the document (twice: on load and by "Try it out") and the five assets, as ?asset= of the page.
    expect(new Set(requests.map((url) => new URL(url).pathname))).toEqual(
      new Set(["/api/v1/docs", "/api/v1/openapi.json"]),
    );
    expect(
      new Set(requests.map((url) => new URL(url).searchParams.get("asset")).filter((name) => name !== null)),
    ).toEqual(new Set(ASSET_NAMES));
    expect(problems).toEqual([]);
    await page.close();
  }, 30_000);

  it.each(["/bi/api/v1/docs", "/bi/api/v1/docs/"])(
    "renders every operation at %s, mounted by Express under /bi, loading everything below the mount",
    async (path) => {
      const { default: express } = await import("express");
      const app = express();
      const { api } = await setup();
      app.use("/bi", toNodeHandler(api));
      app.use((req, res) => void res.status(418).send(`host: ${req.originalUrl}`));
      const host = http.createServer(app).listen(0, "127.0.0.1");
      await once(host, "listening");
      const hostOrigin = `http://127.0.0.1:${(host.address() as AddressInfo).port}`;
      const page = await context.newPage();
      try {
        const requests: Array<{ url: string; status: number }> = [];
        const problems: string[] = [];
        page.on("response", (response) => requests.push({ url: response.url(), status: response.status() }));
        page.on("pageerror", (error) => problems.push(`page error: ${error.message}`));
        page.on("console", (message) => {
          if (message.type() === "error") problems.push(`console.error: ${message.text()}`);
        });
        expect((await page.goto(hostOrigin + path))!.status()).toBe(200);
        const document = (await (await fetch(`${hostOrigin}/bi/api/v1/openapi.json`)).json()) as OpenApiDocument;
        const operations = Object.values(document.paths).flatMap((item) => Object.values(item)).length;
        await page
          .locator(".opblock")
          .nth(operations - 1)
          .waitFor({ timeout: 15_000 });
        expect(await page.locator(".opblock").count()).toBe(operations);
        // Every request went below the mount and was answered by Dataport, none fell through to the host (418).
        expect(requests.filter((r) => r.status !== 200)).toEqual([]);
        expect(new Set(requests.map((r) => new URL(r.url).pathname))).toEqual(
          new Set([path, "/bi/api/v1/openapi.json"]),
        );
        expect(
          new Set(requests.map((r) => new URL(r.url).searchParams.get("asset")).filter((name) => name !== null)),
        ).toEqual(new Set(ASSET_NAMES));
        expect(problems).toEqual([]);
      } finally {
        await page.close();
        await new Promise((resolve) => host.close(resolve));
      }
    },
    60_000,
  );
});
