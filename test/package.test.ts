import { execFileSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { fileURLToPath, pathToFileURL } from "node:url";
import { beforeAll, describe, expect, it } from "vitest";
import { createDataApi } from "../src/api.js";
import { createOpenApiDocument } from "../src/openapi.js";

const ROOT = fileURLToPath(new URL("../", import.meta.url));
const pkg = JSON.parse(readFileSync(`${ROOT}package.json`, "utf8")) as {
  exports: Record<string, { types: string; import: string }>;
};

/** What each subpath must export: a broken entry or export map fails here, not in a host's build. */
const EXPECTED: Record<string, string[]> = {
  ".": ["createDataApi", "createAdmin", "parseFixture", "ApiError", "createOpenApiDocument", "createJsonLogger"],
  "./node": ["toNodeHandler"],
  "./bun": ["toBunHandler", "serveBun"],
  "./deno": ["toDenoHandler", "serveDeno"],
  "./client": ["createClient", "DataportError"],
  "./memory": ["createMemoryStorage", "createFixedClock"],
  "./testing": ["runStorageConformance", "runRateLimiterConformance", "runCacheConformance"],
  "./postgres": ["createPostgresStorage"],
  "./redis": ["createRedisRateLimiter", "createRedisCache"],
  "./sqlite": ["createSqliteStorage", "migrate"],
  "./metrics": ["createPrometheusMetrics"],
};

describe("the published package (built with tsup)", () => {
  beforeAll(() => {
    execFileSync(`${ROOT}node_modules/.bin/tsup`, [], { cwd: ROOT, stdio: "pipe", timeout: 240_000 });
  }, 300_000);

  it("lists every subpath this test knows, and no other", () => {
    expect(Object.keys(pkg.exports).sort()).toEqual(Object.keys(EXPECTED).sort());
  });

  for (const [subpath, names] of Object.entries(EXPECTED)) {
    it(`imports ${subpath} from dist with its types`, async () => {
      const entry = pkg.exports[subpath]!;
      expect(existsSync(`${ROOT}${entry.types}`), entry.types).toBe(true);
      const module = (await import(pathToFileURL(`${ROOT}${entry.import}`).href)) as Record<string, unknown>;
      for (const name of names) expect(typeof module[name], `${subpath} exports ${name}`).toBe("function");
      const types = readFileSync(`${ROOT}${entry.types}`, "utf8");
      for (const name of names) expect(types, `${entry.types} declares ${name}`).toContain(name);
    });
  }

  it("builds a client bundle that imports nothing but its own chunks", () => {
    const seen = new Set<string>();
    const visit = (file: string) => {
      if (seen.has(file)) return;
      seen.add(file);
      const code = readFileSync(file, "utf8");
      for (const [, spec] of code.matchAll(/(?:^|\n)\s*(?:import|export)[^'"]*?from\s*["']([^"']+)["']/g)) {
        expect(spec, `${file} imports ${spec}`).toMatch(/^\.\.?\//);
        visit(fileURLToPath(new URL(spec!, pathToFileURL(file))));
      }
    };
    visit(`${ROOT}dist/client/index.js`);
    expect(seen.size).toBeGreaterThanOrEqual(1);
  });

  it("keeps prom-client out of the core import graph: only dataport/metrics loads it", () => {
    const bareImports = (entry: string) => {
      const seen = new Set<string>();
      const bare = new Set<string>();
      const visit = (file: string) => {
        if (seen.has(file)) return;
        seen.add(file);
        const code = readFileSync(file, "utf8");
        for (const [, fromSpec, dynamicSpec] of code.matchAll(/(?:^|\n)\s*(?:import|export)[^'"]*?from\s*["']([^"']+)["']|import\(\s*["']([^"']+)["']\s*\)/g)) {
          const spec = fromSpec ?? dynamicSpec;
          if (!spec) continue;
          if (/^\.\.?\//.test(spec)) visit(fileURLToPath(new URL(spec, pathToFileURL(file))));
          else bare.add(spec);
        }
      };
      visit(`${ROOT}${entry}`);
      return bare;
    };
    for (const subpath of [".", "./node", "./memory", "./sqlite", "./testing", "./postgres", "./redis"]) {
      expect(bareImports(pkg.exports[subpath]!.import).has("prom-client"), subpath).toBe(false);
    }
    expect(bareImports(pkg.exports["./metrics"]!.import).has("prom-client")).toBe(true);
  });

  it("writes dist/openapi.json, the document of the built route table", () => {
    const written = JSON.parse(readFileSync(`${ROOT}dist/openapi.json`, "utf8"));
    expect(written).toEqual(JSON.parse(JSON.stringify(createOpenApiDocument(createDataApi().routes))));
    expect(written.openapi).toBe("3.1.0");
  });
});
