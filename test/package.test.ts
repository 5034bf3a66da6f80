import { execFile, execFileSync, spawn } from "node:child_process";
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { promisify } from "node:util";
import { publint } from "publint";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { createDataApi } from "../src/server/api.js";
import { createOpenApiDocument } from "../src/routes/openapi-document.js";
import { watchOutput } from "./support/server-process.js";

/**
 * The package as a user gets it. `npm pack` runs `prepack` (tsup): that one
 * build is both the dist/ the first block checks and the tarball the second
 * installs into a fresh application, without pg, ioredis or prom-client.
 */

const ROOT = fileURLToPath(new URL("../", import.meta.url));
const run = promisify(execFile);

interface Entry {
  types: string;
  import: string;
  require: string;
  default: string;
}
const pkg = JSON.parse(readFileSync(`${ROOT}package.json`, "utf8")) as {
  exports: Record<string, Entry | string>;
  dependencies: Record<string, string>;
  optionalDependencies: Record<string, string>;
  devDependencies: Record<string, string>;
  peerDependencies: Record<string, string>;
  peerDependenciesMeta: Record<string, { optional?: boolean }>;
  bin: Record<string, string>;
};
const subpaths = Object.entries(pkg.exports).filter((e): e is [string, Entry] => typeof e[1] === "object");

/** What each subpath must export: a broken entry or export map fails here, not in a host's build. */
const EXPECTED: Record<string, string[]> = {
  ".": ["createDataApi", "createAdmin", "parseFixture", "ApiError", "createOpenApiDocument", "createJsonLogger"],
  "./node": ["toNodeHandler"],
  "./bun": ["toBunHandler", "serveBun"],
  "./deno": ["toDenoHandler", "serveDeno"],
  "./client": ["createClient", "DataportError"],
  "./admin-client": ["createAdminClient", "DataportError"],
  "./memory": ["createMemoryStorage", "createFixedClock"],
  "./testing": ["runStorageConformance", "runRateLimiterConformance", "runCacheConformance"],
  "./postgres": ["createPostgresStorage"],
  "./redis": ["createRedisRateLimiter", "createRedisCache"],
  "./sqlite": ["createSqliteStorage", "migrate"],
  "./metrics": ["createPrometheusMetrics"],
};

/** The optional peer each subpath needs, and the message a host without it gets. */
const PEERS: Record<string, { name: string; message: string }> = {
  "./postgres": { name: "pg", message: 'dataport/postgres: install the "pg" package (npm install pg)' },
  "./redis": { name: "ioredis", message: 'dataport/redis: install the "ioredis" package (npm install ioredis)' },
  "./metrics": {
    name: "prom-client",
    message: 'dataport/metrics: install the "prom-client" package (npm install prom-client)',
  },
  "./testing": { name: "vitest", message: "Cannot find package 'vitest'" },
};

interface PackResult {
  filename: string;
  size: number;
  unpackedSize: number;
  files: Array<{ path: string; size: number }>;
}

// Packing, installing and type-checking a package take minutes on a loaded 2-core machine: the
// tarball is packed once for the whole file (beforeAll below), and no test here has a tight limit.
vi.setConfig({ testTimeout: 600_000, hookTimeout: 900_000 });

let work: string;
let tarball: string;
let packed: PackResult;
/** attw runs while the other checks do (it takes seconds). */
let attw: Promise<{ stdout: string }>;

beforeAll(() => {
  work = mkdtempSync(join(tmpdir(), "dataport-pack-"));
  const out = execFileSync("npm", ["pack", "--json", "--pack-destination", work], {
    cwd: ROOT,
    encoding: "utf8",
    timeout: 600_000,
    stdio: ["ignore", "pipe", "pipe"],
  });
  packed = (JSON.parse(out.slice(out.indexOf("["))) as PackResult[])[0]!;
  tarball = join(work, packed.filename);
  attw = run(
    `${ROOT}node_modules/.bin/attw`,
    [tarball, "--profile", "node16", "--ignore-rules", "cjs-resolves-to-esm", "--format", "json"],
    { cwd: work },
  );
  attw.catch(() => {}); // reported by its test
}, 300_000);

afterAll(() => {
  if (work) rmSync(work, { recursive: true, force: true });
});

describe("the built package (npm pack's prepack build)", () => {
  it("lists every subpath this test knows, and no other", () => {
    expect(subpaths.map(([subpath]) => subpath).sort()).toEqual(Object.keys(EXPECTED).sort());
  });

  it("gives each subpath types first, import, require and default (require: Node >= 20.19 loads the ES module)", () => {
    for (const [subpath, entry] of subpaths) {
      expect(Object.keys(entry), subpath).toEqual(["types", "import", "require", "default"]);
      expect(new Set([entry.import, entry.require, entry.default]).size, subpath).toBe(1);
    }
  });

  for (const [subpath, names] of Object.entries(EXPECTED)) {
    it(`imports ${subpath} from dist with its types`, async () => {
      const entry = pkg.exports[subpath] as Entry;
      expect(existsSync(`${ROOT}${entry.types}`), entry.types).toBe(true);
      const module = (await import(pathToFileURL(`${ROOT}${entry.import}`).href)) as Record<string, unknown>;
      for (const name of names) expect(typeof module[name], `${subpath} exports ${name}`).toBe("function");
      const types = readFileSync(`${ROOT}${entry.types}`, "utf8");
      for (const name of names) expect(types, `${entry.types} declares ${name}`).toContain(name);
    });
  }

  it("builds client bundles (dataport/client, dataport/admin-client) that import nothing but their own chunks", () => {
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
    visit(`${ROOT}dist/admin-client/index.js`);
    expect(seen.size).toBeGreaterThanOrEqual(2);
  });

  it("keeps the bin's example server and demo fixture out of what a host loads, and gives the bin no types", () => {
    /** The sources behind the files a built entry reaches by its static and dynamic imports. */
    const sourcesOf = (entry: string): Set<string> => {
      const sources = new Set<string>();
      const seen = new Set<string>();
      const visit = (file: string) => {
        if (seen.has(file)) return;
        seen.add(file);
        const code = readFileSync(file, "utf8");
        expect(code, file).not.toContain("demo/space.json");
        const map = JSON.parse(readFileSync(`${file}.map`, "utf8")) as { sources: string[] };
        for (const source of map.sources) sources.add(source.replace(/^(\.\.\/)+/, ""));
        for (const [, spec] of code.matchAll(/(?:from\s*|import\s*\(?\s*)["'](\.\.?\/[^"']+)["']/g))
          visit(fileURLToPath(new URL(spec!, pathToFileURL(file))));
      };
      visit(`${ROOT}${entry}`);
      return sources;
    };
    for (const [subpath, entry] of subpaths) {
      const sources = [...sourcesOf(entry.import)];
      expect(sources.length, subpath).toBeGreaterThan(0);
      expect(
        sources.filter((s) => s.startsWith("examples/") || s.startsWith("bench/") || s.startsWith("test/")),
        subpath,
      ).toEqual([]);
      // The conformance suites (and vitest, which they import) only for the subpath that offers them.
      if (subpath !== "./testing")
        expect(
          sources.filter((s) => s.startsWith("src/testing/")),
          subpath,
        ).toEqual([]);
    }
    expect(readdirSync(`${ROOT}dist/bin`).filter((f) => f.endsWith(".d.ts"))).toEqual([]);
  });

  it("loads pg, ioredis and prom-client only through src/peers: no built file imports them itself", () => {
    const built = readdirSync(`${ROOT}dist`, { recursive: true, encoding: "utf8" }).filter((f) => f.endsWith(".js"));
    expect(built.length).toBeGreaterThan(10);
    for (const file of built) {
      const code = readFileSync(`${ROOT}dist/${file}`, "utf8");
      expect(code, file).not.toMatch(/(?:from|import)\s*\(?\s*["'](pg|ioredis|prom-client)["']/);
    }
  });

  it('import "dataport" loads none of the optional peers, though they are installed here', () => {
    // Nor does an API answering a request: without a registered tracer provider, @opentelemetry/api stays unloaded.
    const probe = `const { createDataApi } = await import(${JSON.stringify(pathToFileURL(`${ROOT}dist/index.js`).href)});
      const reply = await createDataApi().handle({ method: "GET", url: "http://x/api/v1/openapi.json", headers: { get: () => null }, clientAddress: null, readBody: () => new Uint8Array(0) });
      if (reply.status !== 200) throw new Error("status " + reply.status);
      const { createRequire } = await import("node:module");
      const loaded = Object.keys(createRequire(import.meta.url).cache).map((f) => /node_modules\\/((?:@[^/]+\\/)?[^/]+)/.exec(f)?.[1]);
      console.log(JSON.stringify([...new Set(loaded.filter(Boolean))]));`;
    const out = execFileSync(process.execPath, ["--input-type=module", "-e", probe], { cwd: ROOT, encoding: "utf8" });
    expect(JSON.parse(out)).toEqual([]);
    // And with them installed, their subpaths load them.
    const metrics = `await import(${JSON.stringify(pathToFileURL(`${ROOT}dist/metrics/index.js`).href)});
      const { createRequire } = await import("node:module");
      console.log(Object.keys(createRequire(import.meta.url).cache).some((f) => f.includes("/node_modules/prom-client/")));`;
    expect(
      execFileSync(process.execPath, ["--input-type=module", "-e", metrics], { cwd: ROOT, encoding: "utf8" }).trim(),
    ).toBe("true");
  });

  it("writes dist/openapi.json, the document of the built route table", () => {
    const written = JSON.parse(readFileSync(`${ROOT}dist/openapi.json`, "utf8"));
    expect(written).toEqual(JSON.parse(JSON.stringify(createOpenApiDocument(createDataApi().routes))));
    expect(written.openapi).toBe("3.1.0");
  });

  it("declares @opentelemetry/api, pg, ioredis, prom-client, swagger-ui-dist, vitest and @types/pg as optional peers, and none of them a dependency", () => {
    expect(Object.keys(pkg.peerDependencies).sort()).toEqual([
      "@opentelemetry/api",
      "@types/pg",
      "ioredis",
      "pg",
      "prom-client",
      "swagger-ui-dist",
      "vitest",
    ]);
    // Wide enough for a Node 20 host: the 2.x SDK there installs @opentelemetry/api below 1.10.
    expect(pkg.peerDependencies["@opentelemetry/api"]).toBe("^1.4.0");
    for (const name of Object.keys(pkg.peerDependencies)) {
      expect(pkg.peerDependenciesMeta[name]?.optional, name).toBe(true);
      expect(pkg.dependencies[name], name).toBeUndefined();
    }
    // SQLite's native addon is optional (node:sqlite and bun:sqlite serve without it), its types are the repository's
    // own.
    expect(pkg.optionalDependencies["better-sqlite3"]).toBeDefined();
    expect(pkg.dependencies["better-sqlite3"]).toBeUndefined();
    expect(pkg.dependencies["@types/better-sqlite3"]).toBeUndefined();
    expect(pkg.devDependencies["@types/better-sqlite3"]).toBeDefined();
  });

  it("keeps each subpath's published types to the packages it may name", () => {
    // The core types need nothing a host does not have, dataport/sqlite included (its driver types are
    // its own); the peer subpaths name their peer (pg's types are the optional peer @types/pg).
    const allowed: Record<string, string[]> = {
      ".": ["zod", "@standard-schema/spec"],
      "./client": [],
      // The admin client's input types are the admin functions' own, inferred from their zod schemas.
      "./admin-client": ["zod", "@standard-schema/spec"],
      "./memory": ["zod", "@standard-schema/spec"],
      "./bun": ["zod", "@standard-schema/spec"],
      "./deno": ["zod", "@standard-schema/spec"],
      "./testing": ["zod", "@standard-schema/spec"],
      "./node": ["zod", "@standard-schema/spec", "node:http"],
      "./sqlite": ["zod", "@standard-schema/spec"],
      "./postgres": ["zod", "@standard-schema/spec", "pg"],
      "./redis": ["zod", "@standard-schema/spec", "ioredis"],
      "./metrics": ["zod", "@standard-schema/spec", "prom-client"],
    };
    for (const [subpath, entry] of subpaths) {
      const named = new Set<string>();
      const visit = (file: string, seen: Set<string>) => {
        if (seen.has(file)) return;
        seen.add(file);
        for (const [, spec] of readFileSync(file, "utf8").matchAll(/(?:from|import)\s*\(?\s*['"]([^'"]+)['"]/g)) {
          if (spec!.startsWith("."))
            visit(fileURLToPath(new URL(spec!.replace(/\.js$/, ".d.ts"), pathToFileURL(file))), seen);
          else named.add(spec!);
        }
        expect(readFileSync(file, "utf8"), file).not.toContain("/// <reference types");
      };
      visit(`${ROOT}${entry.types}`, new Set());
      for (const name of named) expect(allowed[subpath], `${entry.types} names ${name}`).toContain(name);
    }
  });
});

describe("the packed tarball", () => {
  it("holds the build, the bin, the demo fixture, LICENSE and README, and no sources or source maps", () => {
    const paths = packed.files.map((f) => f.path);
    for (const path of [
      "LICENSE",
      "README.md",
      "package.json",
      "dist/index.js",
      "dist/index.d.ts",
      pkg.bin.dataport!.replace("./", ""),
      "dist/demo/space.json",
      "dist/openapi.json",
    ]) {
      expect(paths, path).toContain(path);
    }
    expect(
      paths.filter(
        (p) => p.endsWith(".map") || p.startsWith("src/") || p.startsWith("test/") || p.startsWith("examples/"),
      ),
    ).toEqual([]);
    expect(readFileSync(`${ROOT}LICENSE`, "utf8")).toMatch(
      /^MIT License\n\nCopyright \(c\) 2026 Dataport contributors\n/,
    );
    // Light: the whole tarball is a few hundred kilobytes (272 KB when this was written).
    expect(packed.size).toBeLessThan(600_000);
  });

  it("ships docs/, so every relative link of the README (docs/…, LICENSE) works inside the installed package", () => {
    const paths = new Set(packed.files.map((f) => f.path));
    const readme = readFileSync(`${ROOT}README.md`, "utf8");
    const targets = [...readme.matchAll(/\]\(([^)#\s]+)(?:#[^)]*)?\)/g)]
      .map((m) => m[1]!)
      .filter((target) => !/^[a-z]+:/.test(target));
    expect(targets.filter((t) => t.startsWith("docs/")).length).toBeGreaterThan(5);
    for (const target of targets) expect(paths.has(target.replace(/^\.\//, "")), target).toBe(true);
    for (const page of readdirSync(`${ROOT}docs`).filter((f) => f.endsWith(".md")))
      expect(paths.has(`docs/${page}`), page).toBe(true);
  });

  it("passes publint", async () => {
    const data = readFileSync(tarball);
    const { messages } = await publint({
      pack: { tarball: data.buffer.slice(data.byteOffset, data.byteOffset + data.byteLength) as ArrayBuffer },
      strict: true,
      level: "suggestion",
    });
    expect(messages).toEqual([]);
  });

  it("passes @arethetypeswrong/cli for ESM and bundlers; require() finds the ES module, which Node >= 20.19 loads", async () => {
    const report = JSON.parse((await attw).stdout) as {
      analysis: { entrypoints: Record<string, unknown> };
      problems: Record<string, Array<{ kind: string; resolutionKind: string }>>;
    };
    expect(Object.keys(report.analysis.entrypoints).sort()).toEqual(Object.keys(pkg.exports).sort());
    // What remains is what the flags above accept: require() resolving to ESM. A node10 consumer
    // (no "exports" support) finds every subpath's types through typesVersions.
    const remaining = Object.values(report.problems)
      .flat()
      .filter((p) => !(p.kind === "CJSResolvesToESM" && p.resolutionKind === "node16-cjs"));
    expect(remaining).toEqual([]);
  });

  describe("installed into a fresh application without pg, ioredis, prom-client or swagger-ui-dist", () => {
    let app: string;
    /**
     * tsc over a file importing the core subpaths, started once the app is installed (it runs while the other checks
     * do).
     */
    let typecheck: Promise<{ stdout: string }>;

    beforeAll(async () => {
      app = join(work, "app");
      mkdirSync(app);
      writeFileSync(join(app, "package.json"), JSON.stringify({ name: "fresh-app", private: true, type: "module" }));
      await run("npm", ["install", "--prefer-offline", "--ignore-scripts", "--no-audit", "--no-fund", tarball], {
        cwd: app,
        timeout: 600_000,
      });
      // better-sqlite3 compiles its binding on install (scripts are off here to keep this test fast):
      // the repository's build is the same version for the same Node.
      cpSync(`${ROOT}node_modules/better-sqlite3/build`, join(app, "node_modules/better-sqlite3/build"), {
        recursive: true,
      });
      // A Node host has Node's types (dataport/node names node:http); nothing of dataport's installs them.
      for (const types of ["@types/node", "undici-types"])
        cpSync(`${ROOT}node_modules/${types}`, join(app, "node_modules", types), { recursive: true });
      writeFileSync(
        join(app, "check.ts"),
        `import { createDataApi, type DataApi } from "dataport";
import { createClient } from "dataport/client";
import { createAdminClient } from "dataport/admin-client";
import { createMemoryStorage } from "dataport/memory";
import { createSqliteStorage } from "dataport/sqlite";
import { toNodeHandler } from "dataport/node";
import { serveBun } from "dataport/bun";
import { serveDeno } from "dataport/deno";
import { runStorageConformance } from "dataport/testing";
const api: DataApi = createDataApi({ storage: createMemoryStorage() });
export const all = [api, createClient, createAdminClient, createSqliteStorage, toNodeHandler, serveBun, serveDeno, runStorageConformance];
`,
      );
      writeFileSync(
        join(app, "check.cts"),
        `import dataport = require("dataport");\nexport const api: dataport.DataApi = dataport.createDataApi();\n`,
      );
      const flags = [
        "--noEmit",
        "--strict",
        "--skipLibCheck",
        "false",
        "--module",
        "nodenext",
        "--moduleResolution",
        "nodenext",
        "--target",
        "es2022",
      ];
      typecheck = run(`${ROOT}node_modules/.bin/tsc`, [...flags, "check.ts", "check.cts"], {
        cwd: app,
        timeout: 300_000,
      }).catch((error: { stdout: string }) => error);
    }, 150_000);

    const node = (args: string[]) => run(process.execPath, args, { cwd: app, timeout: 300_000 });

    it("installs none of the optional peers", () => {
      for (const name of ["pg", "ioredis", "prom-client", "swagger-ui-dist", "@scarf/scarf", "vitest", "@types/pg"])
        expect(existsSync(join(app, "node_modules", name)), name).toBe(false);
      expect(existsSync(join(app, "node_modules/better-sqlite3"))).toBe(true);
      // Its types are the repository's own (a devDependency): nothing a host installs.
      expect(existsSync(join(app, "node_modules/@types/better-sqlite3"))).toBe(false);
    });

    it("imports and requires every subpath; one that needs a missing peer says which package to install", async () => {
      // The same loop twice: with await import() in an ES module, with a plain require() in CommonJS.
      const script = (kind: "import" | "require") => `
        const out = {};
        for (const subpath of ${JSON.stringify(Object.keys(EXPECTED))}) {
          const specifier = "dataport" + subpath.slice(1);
          try { const m = ${kind === "import" ? "await import(specifier)" : "require(specifier)"}; out[subpath] = Object.keys(m).sort(); } catch (e) { out[subpath] = "error: " + e.message.split("\\n")[0]; }
        }
        console.log(JSON.stringify(out));`;
      const esm = JSON.parse((await node(["--input-type=module", "-e", script("import")])).stdout) as Record<
        string,
        string[] | string
      >;
      const cjs = await node(["--input-type=commonjs", "-e", script("require")]);
      expect(cjs.stderr).not.toContain("ExperimentalWarning");
      expect(JSON.parse(cjs.stdout)).toEqual(esm);
      for (const [subpath, names] of Object.entries(EXPECTED)) {
        const peer = PEERS[subpath];
        if (peer) {
          expect(esm[subpath], subpath).toMatch(/^error: /);
          expect(esm[subpath], subpath).toContain(peer.message);
        } else {
          for (const name of names) expect(esm[subpath], `${subpath} exports ${name}`).toContain(name);
        }
      }
    });

    it("registers the PostgreSQL connector without pg, and names the package at its first query", async () => {
      const script = `const { postgresConnector } = require("dataport");
        const connection = { id: "conn_pg", type: "postgres", config: { url: "postgres://127.0.0.1:1/db" } };
        const query = { format: "json", source: "orders", limit: 1, offset: 0, filters: {}, orderBy: null, orderDirection: "ASC" };
        postgresConnector().query(connection, query).then(() => console.log("answered"), (e) => console.log(e.message));`;
      expect((await node(["-e", script])).stdout.trim()).toBe(
        'dataport/postgres: install the "pg" package (npm install pg)',
      );
    });

    it("serves the shipped demo from a SQLite store through the installed better-sqlite3", async () => {
      const script = `const { createDataApi, parseFixture } = require("dataport");
        const { createSqliteStorage } = require("dataport/sqlite");
        const demo = require.resolve("dataport/package.json").replace(/package\\.json$/, "dist/demo/space.json");
        (async () => {
          const storage = createSqliteStorage({ path: ":memory:" });
          await storage.seed(parseFixture(JSON.parse(require("node:fs").readFileSync(demo, "utf8"))));
          const api = createDataApi({ storage });
          const me = await api.fetch(new Request("http://app.test/api/v1/me", { headers: { authorization: "Bearer dp_demo_full_access_0000000000001" } }));
          console.log(JSON.stringify([me.status, (await me.json()).name]));
          await storage.close();
        })();`;
      expect(JSON.parse((await node(["-e", script])).stdout)).toEqual([200, "Warehouse sync"]);
    });

    it("runs a sorted read on a SQLite file on a reader thread, loaded from the installed package", async () => {
      // loopBudgetMs 0: every read with a sort goes to a reader thread, which loads dist/sqlite/reader-thread.js.
      const script = `const { createDataApi, parseFixture } = require("dataport");
        const { createSqliteStorage } = require("dataport/sqlite");
        const demo = require.resolve("dataport/package.json").replace(/package\\.json$/, "dist/demo/space.json");
        (async () => {
          const storage = createSqliteStorage({ path: "threads.sqlite", loopBudgetMs: 0, callTimeoutMs: 60000 });
          await storage.seed(parseFixture(JSON.parse(require("node:fs").readFileSync(demo, "utf8"))));
          const api = createDataApi({ storage });
          const headers = { authorization: "Bearer dp_demo_full_access_0000000000001" };
          const res = await api.fetch(new Request("http://app.test/api/v1/datasets/ds_orders/rows?sort=-amount&maxRows=2", { headers }));
          const body = await res.json();
          console.log(JSON.stringify([res.status, body.data.length, body.data[0].amount >= body.data[1].amount]));
          await storage.close();
        })();`;
      expect(JSON.parse((await node(["-e", script])).stdout)).toEqual([200, 2, true]);
    });

    it("serves a page saying how to install swagger-ui-dist in place of the API reference, and the reference once it is installed", async () => {
      const script = `const { createDataApi } = require("dataport");
        const api = createDataApi();
        (async () => {
          const out = {};
          for (const path of ["/api/v1/docs", "/api/v1/docs/", "/api/v1/docs?asset=swagger-ui-bundle.js", "/api/v1/docs/assets/swagger-ui.css", "/api/v1/openapi.json"]) {
            const res = await api.fetch(new Request("http://app.test" + path));
            out[path] = [res.status, res.headers.get("content-type"), (await res.text()).slice(0, 4000)];
          }
          console.log(JSON.stringify(out));
        })();`;
      const without = JSON.parse((await node(["-e", script])).stdout) as Record<string, [number, string, string]>;
      for (const path of ["/api/v1/docs", "/api/v1/docs/"]) {
        const [status, type, html] = without[path]!;
        expect([status, type], path).toEqual([200, "text/html; charset=utf-8"]);
        expect(html).toContain("<title>Dataport API reference: not installed</title>");
        expect(html).toContain("<pre>npm install swagger-ui-dist</pre>");
        expect(html).not.toContain("<script");
      }
      for (const path of ["/api/v1/docs?asset=swagger-ui-bundle.js", "/api/v1/docs/assets/swagger-ui.css"]) {
        const [status, , body] = without[path]!;
        expect(status, path).toBe(404);
        expect(JSON.parse(body).error.message).toBe(
          "the API reference page needs the npm package swagger-ui-dist, which is not installed: npm install swagger-ui-dist",
        );
      }
      expect(without["/api/v1/openapi.json"]![0]).toBe(200);

      // Installed beside dataport (the repository's copy, the version npm would install), the same server renders the
      // page.
      const installed = join(app, "node_modules/swagger-ui-dist");
      cpSync(`${ROOT}node_modules/swagger-ui-dist`, installed, { recursive: true });
      try {
        const withIt = JSON.parse((await node(["-e", script])).stdout) as Record<string, [number, string, string]>;
        expect(withIt["/api/v1/docs"]![2]).toContain("<title>Dataport API reference</title>");
        expect(withIt["/api/v1/docs"]![2]).toMatch(
          /<script src="\?asset=swagger-ui-bundle\.js&amp;v=5\.\d+\.\d+"><\/script>/,
        );
        expect(withIt["/api/v1/docs?asset=swagger-ui-bundle.js"]!.slice(0, 2)).toEqual([
          200,
          "text/javascript; charset=utf-8",
        ]);
        expect(withIt["/api/v1/docs/assets/swagger-ui.css"]!.slice(0, 2)).toEqual([200, "text/css; charset=utf-8"]);
      } finally {
        rmSync(installed, { recursive: true, force: true });
      }
    });

    it("type-checks the core subpaths with no @types package beyond Node's (strict, skipLibCheck off), from ESM and CommonJS", async () => {
      const result = await typecheck;
      expect(result.stdout).toBe("");
    });

    it("runs the bin: npx dataport --help exits 0 with the usage", async () => {
      const help = await run("npx", ["dataport", "--help"], { cwd: app, timeout: 300_000 });
      expect(help.stdout).toMatch(/^usage: npx dataport \[--fixture FILE\] \[--port 8787\]/);
      expect(help.stdout).toContain("[--db PATH | :memory: | postgres://...]");
    });

    it("runs the bin: npx dataport serves the demo shipped in the package and stops on SIGTERM to npx", async () => {
      const npx = spawn("npx", ["dataport", "--port", "0", "--db", ":memory:", "--log", "none"], {
        cwd: app,
        stdio: ["ignore", "pipe", "pipe"],
      });
      const { url, output, closed } = watchOutput(npx, { exitRejects: true });
      const base = await url;
      const me = await fetch(`${base}/api/v1/me`, {
        headers: { authorization: "Bearer dp_demo_full_access_0000000000001" },
      });
      expect(me.status).toBe(200);
      expect(((await me.json()) as { name: string }).name).toBe("Warehouse sync");
      npx.kill("SIGTERM");
      await closed; // every process holding the output pipe (npx, its shell, the server) has exited
      expect(output()).toContain("dataport: drained, store closed");
      await expect(fetch(`${base}/api/v1/me`)).rejects.toThrow();
    });
  });

  describe("installed where better-sqlite3 cannot build (no compiler, no prebuilt binary)", () => {
    let app: string;
    let install: { stdout: string; stderr: string };
    const SERVE = `import { readFileSync } from "node:fs";
      import { createDataApi, parseFixture } from "dataport";
      import { createSqliteStorage } from "dataport/sqlite";
      const demo = new URL("./node_modules/dataport/dist/demo/space.json", import.meta.url);
      try {
        // loopBudgetMs 0: the sorted read runs on a reader thread, opened with the same driver.
        const storage = createSqliteStorage({ path: "served.sqlite", loopBudgetMs: 0 });
        await storage.seed(parseFixture(JSON.parse(readFileSync(demo, "utf8"))));
        const api = createDataApi({ storage });
        const headers = { authorization: "Bearer dp_demo_full_access_0000000000001" };
        const res = await api.fetch(new Request("http://app.test/api/v1/datasets/ds_orders/rows?sort=-amount&maxRows=2", { headers }));
        const body = await res.json();
        console.log(JSON.stringify([storage.driver, res.status, body.data.length]));
        await storage.close();
      } catch (error) {
        console.log(JSON.stringify(["error", error.message]));
      }`;

    beforeAll(async () => {
      app = join(work, "app-without-addon");
      mkdirSync(app);
      writeFileSync(
        join(app, "package.json"),
        JSON.stringify({ name: "app-without-addon", private: true, type: "module" }),
      );
      writeFileSync(join(app, "serve.mjs"), SERVE);
      // Install scripts on; the addon's build fails at once (no compiler) and no prebuilt binary is fetched.
      const env = { ...process.env, CC: "/bin/false", CXX: "/bin/false", npm_config_build_from_source: "true" };
      install = await run("npm", ["install", "--prefer-offline", "--no-audit", "--no-fund", tarball], {
        cwd: app,
        timeout: 600_000,
        env,
      });
    }, 650_000);

    it("installs, without better-sqlite3 (npm leaves out the optional dependency that failed to build)", () => {
      expect(install.stdout).toMatch(/added \d+ packages/);
      expect(existsSync(join(app, "node_modules/dataport/package.json"))).toBe(true);
      expect(existsSync(join(app, "node_modules/better-sqlite3"))).toBe(false);
    });

    it("serves a SQLite file on Node 22 through node:sqlite", async () => {
      const node22 = `${ROOT}node_modules/node/bin/node`;
      expect(existsSync(node22), `${node22} (npm install)`).toBe(true);
      const { stdout } = await run(node22, ["serve.mjs"], { cwd: app, timeout: 120_000 });
      expect(JSON.parse(stdout)).toEqual(["node:sqlite", 200, 2]);
    });

    it("serves a SQLite file on Bun through bun:sqlite", async () => {
      const { stdout } = await run(`${ROOT}node_modules/.bin/bun`, ["serve.mjs"], { cwd: app, timeout: 120_000 });
      expect(JSON.parse(stdout)).toEqual(["bun:sqlite", 200, 2]);
    });

    it("runs the bin (npx dataport --db FILE) on a SQLite file on Node 22 and on Bun", async () => {
      for (const [runtime, bin] of [
        ["node 22", `${ROOT}node_modules/node/bin/node`],
        ["bun", `${ROOT}node_modules/.bin/bun`],
      ] as const) {
        const db = join(app, "data", `${runtime.replace(" ", "")}.sqlite`);
        const server = spawn(
          bin,
          ["node_modules/dataport/dist/bin/dataport.js", "--db", db, "--port", "0", "--log", "none"],
          { cwd: app, stdio: ["ignore", "pipe", "pipe"] },
        );
        const { url, output, closed } = watchOutput(server, { exitRejects: true });
        const base = await url;
        const res = await fetch(`${base}/api/v1/datasets/ds_orders/rows?maxRows=1`, {
          headers: { authorization: "Bearer dp_demo_full_access_0000000000001" },
        });
        expect(res.status, runtime).toBe(200);
        expect(((await res.json()) as { data: unknown[] }).data, runtime).toHaveLength(1);
        server.kill("SIGTERM");
        await closed;
        expect(output(), runtime).toContain("dataport: drained, store closed");
        expect(existsSync(db), runtime).toBe(true);
      }
    });

    it("says what to install on Node 20, where there is neither", async () => {
      const { stdout } = await run(process.execPath, ["serve.mjs"], { cwd: app, timeout: 120_000 });
      const [kind, message] = JSON.parse(stdout) as [string, string];
      expect(kind).toBe("error");
      expect(message).toMatch(
        /^dataport\/sqlite: no SQLite driver on Node 20\.\d+\.\d+: better-sqlite3 is not installed, and this Node has no node:sqlite/,
      );
      expect(message).toContain("Install better-sqlite3 (npm install better-sqlite3");
    });
  });
});
