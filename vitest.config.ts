import { availableParallelism } from "node:os";
import { relative } from "node:path";
import { fileURLToPath } from "node:url";
import { defineConfig } from "vitest/config";
import { BaseSequencer, type TestSpecification } from "vitest/node";

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

const ROOT = fileURLToPath(new URL("./", import.meta.url));

/**
 * The files that take longest, longest first. The suite ends when its last file does: started late, one of
 * these would run on alone at the end while the other workers sit idle. Vitest orders files by the durations
 * of the last run, kept in node_modules/.vite; a fresh checkout (CI) has none, and it would start the largest
 * files first, which these are not.
 */
const LONGEST: string[] = [
  "test/sqlite/drivers.test.ts",
  "test/conformance/postgres.test.ts",
  "test/conformance/sqlite.test.ts",
  "test/package.test.ts",
  "test/postgres-change-notify.test.ts",
  "test/admin/admin-rules.test.ts",
  "test/conformance/aggregates.test.ts",
  "test/admin/admin.test.ts",
  "test/sqlite/off-loop.test.ts",
  "test/cli.test.ts",
  "test/row-query-export.test.ts",
];

class LongestFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const rank = (file: TestSpecification) => {
      const at = LONGEST.indexOf(relative(ROOT, file.moduleId).replaceAll("\\", "/"));
      return at < 0 ? LONGEST.length : at;
    };
    return (await super.sort(files)).sort((a, b) => rank(a) - rank(b));
  }
}

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
    // Two workers at least: vitest's default (a core less than the machine has) is one on the 2-core CI
    // machine, where the files then ran one after the other. Much of a file's time is spent waiting on
    // PostgreSQL, Redis and the processes it starts (conformance/postgres.test.ts: 78 s, 9 s of it in Node,
    // 38 s in PostgreSQL), and each file works in schemas, Redis keys, ports and directories of its own.
    maxWorkers: Math.max(2, availableParallelism() - 1),
    sequence: { sequencer: LongestFirst },
  },
});
