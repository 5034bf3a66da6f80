import { createDataApi, type DataApi } from "../../src/server/api.js";
import { FixtureError, parseFixture } from "../../src/fixture/load.js";
import { createOffsetClock } from "../../src/memory/fixed-clock.js";
import { createMemoryStorage } from "../../src/memory/memory-storage.js";
import type { Storage } from "../../src/ports/storage.js";
import { HelpRequested, parseServerArgs, UsageError } from "../server/cli.js";

export { UsageError };

/** The runtime each example is written for, and how to tell it is the one running. */
const RUNTIMES = {
  node: () =>
    typeof (globalThis as { process?: { versions?: { node?: string; bun?: string } } }).process?.versions?.node ===
      "string" &&
    !("Bun" in globalThis) &&
    !("Deno" in globalThis),
  bun: () => "Bun" in globalThis,
  deno: () => "Deno" in globalThis,
} as const;

/**
 * Run an example: on the runtime it names (else it says which, exit 2),
 * with `--help` (usage on stdout, exit 0) and mistakes in flags or the
 * fixture (the message, exit 2) handled the same way in every example.
 * `command` is how to start it, for the messages.
 */
export async function runExample(
  runtime: keyof typeof RUNTIMES,
  command: string,
  start: () => Promise<void>,
): Promise<void> {
  if (!RUNTIMES[runtime]())
    exit(
      2,
      `dataport: this example runs on ${runtime === "node" ? "Node.js" : runtime === "bun" ? "Bun" : "Deno"}: ${command}`,
    );
  try {
    await start();
  } catch (error) {
    if (error instanceof HelpRequested) {
      console.log(`usage: ${command} [--fixture FILE] [--db FILE] [--port 8787] [--host 127.0.0.1] [--now ISO_INSTANT]
       [--audit-lag SECONDS] [--webhook-rate PER_SECOND] [--app-url URL] [--view-url URL] [--help]`);
      exit(0);
    }
    if (error instanceof UsageError || error instanceof FixtureError) exit(2, `dataport: ${error.message}`);
    throw error;
  }
}

/** process.exit, which Node, Bun and Deno 2 all have. */
function exit(code: number, message?: string): never {
  if (message !== undefined) console.error(message);
  return (globalThis as unknown as { process: { exit(code: number): never } }).process.exit(code);
}

/**
 * What the example servers share: the command line of
 * `shared/fixture-format.md` (less PostgreSQL and `--redis`: these examples
 * run on the in-memory store, or with `--db FILE` on SQLite through the
 * runtime's own binding, bun:sqlite on Bun and node:sqlite on Deno) and an
 * API with the fixture loaded.
 */
export interface ExampleOptions {
  fixture: string;
  /** `:memory:` (the in-memory store, the default) or a SQLite file. */
  db: string;
  port: number;
  host: string;
  now: string | undefined;
  auditLag: number | undefined;
  webhookRate: number | undefined;
  appUrl: string | undefined;
  viewUrl: string | undefined;
}

/**
 * Flags of the example server's operations features (logs, metrics, limits, drain), which these small examples leave
 * out.
 */
const OPERATIONS_FLAGS = [
  "--admin-token",
  "--log",
  "--metrics",
  "--metrics-token",
  "--api-rate",
  "--drain-timeout",
  "--storage-timeout",
  "--upstream-timeout",
  "--rate-limit-fail-open",
];

/** The example server's own flag parser (examples/server/cli.ts), minus storage choices. */
export function parseExampleArgs(args: string[], defaultFixture: string): ExampleOptions {
  const config = parseServerArgs(args, { fixture: defaultFixture, db: ":memory:" });
  if (/^postgres(ql)?:\/\//.test(config.db) || config.redis !== null) {
    throw new UsageError(
      "this example runs on the in-memory store or a SQLite file (--db FILE); PostgreSQL and --redis are for npm start",
    );
  }
  const given = (flag: string) => args.some((a) => a === flag || a.startsWith(`${flag}=`));
  const operational = OPERATIONS_FLAGS.find(given);
  if (operational)
    throw new UsageError(`${operational} is for npm start (the example server); this example keeps to the basics`);
  return {
    fixture: config.fixture,
    db: config.db,
    port: config.port,
    host: config.host,
    now: config.now === null ? undefined : new Date(config.now).toISOString(),
    auditLag: given("--audit-lag") ? config.auditLagSeconds : undefined,
    webhookRate: given("--webhook-rate") ? config.webhookRatePerSecond : undefined,
    appUrl: given("--app-url") ? config.appUrl : undefined,
    viewUrl: given("--view-url") ? config.viewUrl : undefined,
  };
}

/**
 * An API on the in-memory store or a SQLite file, with the fixture loaded. `readText` is the runtime's own file read.
 */
export async function createExampleApi(options: ExampleOptions, readText: (path: string) => string): Promise<DataApi> {
  let json: unknown;
  try {
    json = JSON.parse(readText(options.fixture));
  } catch (error) {
    throw new UsageError(`cannot read the fixture ${options.fixture}: ${(error as Error).message}`);
  }
  const clock = options.now !== undefined ? createOffsetClock(options.now) : undefined;
  const space = parseFixture(json, clock ? { clock } : {});
  const storage = options.db === ":memory:" ? createMemoryStorage() : await openSqliteFile(options.db);
  await storage.seed(space);
  return createDataApi({
    storage,
    ...(clock && { clock }),
    ...(options.auditLag !== undefined && { auditLagSeconds: options.auditLag }),
    ...(options.webhookRate !== undefined && { webhookRatePerSecond: options.webhookRate }),
    appUrl: options.appUrl ?? `http://${options.host}:${options.port}`,
    ...(options.viewUrl !== undefined && { viewUrl: options.viewUrl }),
  });
}

/** A SQLite store on `path` (its folder created), through the runtime's own SQLite: loaded only when asked for. */
async function openSqliteFile(path: string): Promise<Storage> {
  const { mkdirSync } = await import("node:fs");
  const { dirname } = await import("node:path");
  mkdirSync(dirname(path), { recursive: true });
  const { createSqliteStorage } = await import("../../src/sqlite/index.js");
  return createSqliteStorage({ path });
}
