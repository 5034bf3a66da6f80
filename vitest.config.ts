import { fileURLToPath } from "node:url";
import { defineConfig } from "vitest/config";

/** `dataport` and its subpaths as the sources, as tsconfig.json's `paths` map them (the examples import the package by name). */
const SUBPATHS: Record<string, string> = {
  dataport: "src/index.ts",
  "dataport/node": "adapters/node.ts",
  "dataport/bun": "adapters/bun.ts",
  "dataport/deno": "adapters/deno.ts",
  "dataport/client": "src/client/index.ts",
  "dataport/admin-client": "src/admin-client/index.ts",
  "dataport/memory": "src/memory/index.ts",
  "dataport/sqlite": "src/sqlite/index.ts",
  "dataport/postgres": "src/postgres/index.ts",
  "dataport/redis": "src/redis/index.ts",
  "dataport/metrics": "src/metrics/index.ts",
  "dataport/testing": "src/testing/index.ts",
};

export default defineConfig({
  resolve: {
    alias: Object.entries(SUBPATHS).map(([name, path]) => ({
      find: new RegExp(`^${name.replace("/", "\\/")}$`),
      replacement: fileURLToPath(new URL(path, import.meta.url)),
    })),
  },
  test: {
    include: ["test/**/*.test.ts"],
    testTimeout: 20_000,
    hookTimeout: 30_000,
    pool: "forks",
  },
});
