/**
 * The SQLite store on every binding this machine has (issue 42). `npm test`
 * runs the SQLite suites here on Node 20 with better-sqlite3; this file runs
 * them again, each as a process of another runtime with
 * DATAPORT_SQLITE_DRIVER naming its binding:
 *
 * - Node 22 (the `node` devDependency, node_modules/node/bin/node) with
 *   node:sqlite, under vitest;
 * - Bun (the `bun` devDependency) with bun:sqlite, under `bun test`, which
 *   runs these vitest files as they are.
 *
 * And what a host meets where better-sqlite3 is missing or built for
 * another Node: the store falls back to node:sqlite, or says what to install.
 */
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { ROOT, runtimeBinary } from "../adapters/_utils.js";

/**
 * The suites that run per driver: the conformance suites, the durability
 * test, and the store's own SQLite tests that need no particular binding.
 */
const FILES = [
  "test/conformance/sqlite.test.ts",
  // Row queries and aggregates answered alike by every store (the PostgreSQL side runs where PostgreSQL is reachable).
  "test/conformance/row-queries.test.ts",
  "test/conformance/aggregates.test.ts",
  "test/durability.test.ts",
  "test/sqlite/driver.test.ts",
  "test/sqlite/faults.test.ts",
  "test/sqlite/off-loop.test.ts",
  "test/sqlite/processes.test.ts",
  "test/sqlite/remembered-pages.test.ts",
  "test/sqlite/row-indexes.test.ts",
  "test/sqlite/rows-metadata.test.ts",
  "test/sqlite/visibility.test.ts",
];
/** The conformance suite alone has 366 tests on each driver (three stores of 122); fewer means a file did not run. */
const AT_LEAST = 400;
const RUN_TIMEOUT_MS = 900_000;

const node22 = `${ROOT}node_modules/node/bin/node`;
const bun = runtimeBinary("bun");

/** This process's environment without vitest's own variables (a nested vitest must not take itself for a worker). */
function childEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, NO_COLOR: "1", FORCE_COLOR: "0", ...extra };
  for (const key of Object.keys(env))
    if (key.startsWith("VITEST") || key === "TEST" || key === "NODE_OPTIONS") delete env[key];
  return env;
}

function run(bin: string, args: string[], env: Record<string, string>) {
  return spawnSync(bin, args, {
    cwd: ROOT,
    encoding: "utf8",
    timeout: RUN_TIMEOUT_MS,
    env: childEnv(env),
    maxBuffer: 256 * 1024 * 1024,
  });
}

/** A Node with node:sqlite and its SQL functions (22.13 and later), or why not. */
function nodeWithSqlite(): string | null {
  if (!existsSync(node22)) return `${node22} is not installed (npm install)`;
  const probe = spawnSync(
    node22,
    [
      "-e",
      "process.stdout.write(String(typeof process.getBuiltinModule?.('node:sqlite')?.DatabaseSync?.prototype?.function))",
    ],
    { encoding: "utf8" },
  );
  return probe.stdout === "function"
    ? null
    : `${node22} has no node:sqlite with SQL functions (${probe.stderr.trim() || probe.stdout})`;
}

const nodeMissing = nodeWithSqlite();
if (nodeMissing !== null) console.warn(`[drivers] SKIPPED the SQLite suites on node:sqlite: ${nodeMissing}`);
if (!bun.runnable)
  console.warn(`[drivers] SKIPPED the SQLite suites on bun:sqlite: the bun binary cannot run here (${bun.reason})`);

describe.skipIf(nodeMissing !== null)("the SQLite store on Node 22 with node:sqlite", () => {
  it(
    "passes the conformance suites, the durability test and the SQLite tests",
    () => {
      // One file at a time, as under bun test: the run around this one already keeps every core busy.
      const args = ["node_modules/vitest/vitest.mjs", "run", "--maxWorkers=1", "--reporter=verbose", ...FILES];
      const result = run(node22, args, {
        DATAPORT_SQLITE_DRIVER: "node:sqlite",
        DATAPORT_TEST_SQLITE_DRIVER: "node:sqlite",
      });
      const output = `${result.stdout}\n${result.stderr}`;
      const tests = /Tests\s+(?:(\d+) failed \| )?(\d+) passed/.exec(output);
      expect(result.status, output.slice(-6000)).toBe(0);
      expect(tests?.[1], "failed").toBeUndefined();
      expect(Number(tests?.[2])).toBeGreaterThanOrEqual(AT_LEAST);
      expect(output).toContain("sqlite driver (node, node:sqlite)");
    },
    RUN_TIMEOUT_MS,
  );

  it("falls back to node:sqlite where better-sqlite3's addon was built for another Node (here: Node 20's)", () => {
    const script = `import("./src/sqlite/index.ts").then(async ({ createSqliteStorage }) => {
      const store = createSqliteStorage({ path: ":memory:" });
      console.log("driver", store.driver);
      await store.close();
    })`;
    const result = run(node22, ["--import", "tsx", "-e", script], {});
    expect(result.status, result.stderr).toBe(0);
    expect(result.stdout.trim()).toBe("driver node:sqlite");
  }, 120_000);
});

describe.skipIf(!bun.runnable)("the SQLite store on Bun with bun:sqlite", () => {
  it(
    "passes the conformance suites, the durability test and the SQLite tests",
    () => {
      // --timeout: vitest.config.ts's testTimeout, which bun test does not read (its default is 5 s).
      const result = run(bun.bin, ["test", "--timeout", "20000", ...FILES.map((f) => `./${f}`)], {
        DATAPORT_SQLITE_DRIVER: "bun:sqlite",
        DATAPORT_TEST_SQLITE_DRIVER: "bun:sqlite",
      });
      const output = `${result.stdout}\n${result.stderr}`;
      expect(result.status, output.slice(-6000)).toBe(0);
      expect(/^\s*(\d+) fail$/m.exec(output)?.[1]).toBe("0");
      expect(Number(/^\s*(\d+) pass$/m.exec(output)?.[1])).toBeGreaterThanOrEqual(AT_LEAST);
      expect(output).toContain("sqlite driver (bun, bun:sqlite)");
    },
    RUN_TIMEOUT_MS,
  );
});

describe("a Node without better-sqlite3 and without node:sqlite (Node 20, the addon not installed)", () => {
  const hidden = ["--require", "./test/sqlite/support/without-better-sqlite3.cjs", "--import", "tsx"];
  const SAYS = "no SQLite driver on Node 20";

  it("createSqliteStorage says what to install", () => {
    const script = `import("./src/sqlite/index.ts").then(({ createSqliteStorage }) => {
      try { createSqliteStorage({ path: ":memory:" }); } catch (error) { console.log(error.message); }
    })`;
    const result = run(process.execPath, [...hidden, "-e", script], {});
    expect(result.stdout.trim()).toBe(
      `dataport/sqlite: no SQLite driver on Node ${process.versions.node}: better-sqlite3 is not installed, and this Node has no node:sqlite (Node 22.13 and later have it). ` +
        "Install better-sqlite3 (npm install better-sqlite3; it builds a native addon where no prebuilt one fits), or run on Node 22.13 or later, Bun or Deno.",
    );
  }, 120_000);

  it("the example server (npx dataport --db FILE) exits 1 with that line, and no stack trace", () => {
    const db = join(mkdtempSync(join(tmpdir(), "dataport-no-driver-")), "store.sqlite");
    const result = run(process.execPath, [...hidden, "examples/server/main.ts", "--db", db, "--port", "0"], {});
    expect(result.status).toBe(1);
    expect(result.stderr).toContain(`dataport: could not start: dataport/sqlite: ${SAYS}`);
    expect(result.stderr).not.toMatch(/^\s+at /m);
  }, 120_000);
});
