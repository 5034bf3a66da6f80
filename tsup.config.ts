import { defineConfig } from "tsup";

// tsup's .d.ts generation drives the TypeScript *JavaScript* compiler API.
// TypeScript 7 is the native (Go) compiler and no longer ships that API, so
// package.json pins typescript to 5.9 — the newest line tsup's dts build works with.
export default defineConfig({
  entry: {
    index: "src/index.ts",
    "memory/index": "src/memory/index.ts",
    "sqlite/index": "src/sqlite/index.ts",
    "testing/index": "src/testing/index.ts",
    "adapters/node": "adapters/node.ts",
    "adapters/bun": "adapters/bun.ts",
    "adapters/deno": "adapters/deno.ts",
  },
  format: ["esm"],
  target: "node20",
  dts: true,
  clean: true,
  sourcemap: true,
  splitting: true,
  external: ["better-sqlite3", "pg", "ioredis", "vitest"],
});
