import { pathToFileURL } from "node:url";

/**
 * The package as users run it: `npm run bench` builds `dist/` first (tsup),
 * and the Dataport bench servers load it from there rather than from the
 * TypeScript sources through tsx (whose transform, unlike the build, wraps
 * every named closure in a naming helper that costs on each request).
 */
export async function built<Module>(entry: string): Promise<Module> {
  // BENCH_DIST: another build (an earlier commit's dist/) for BENCH_AB comparisons.
  const dist = process.env.BENCH_DIST
    ? pathToFileURL(`${process.env.BENCH_DIST}/`)
    : new URL("../../dist/", import.meta.url);
  return (await import(new URL(entry, dist).href)) as Module;
}

export type Dataport = typeof import("../../src/index.js");
export type NodeAdapter = typeof import("../../adapters/node.js");
export type MemoryEntry = typeof import("../../src/memory/index.js");
export type SqliteEntry = typeof import("../../src/sqlite/index.js");
export type PostgresEntry = typeof import("../../src/postgres/index.js");
