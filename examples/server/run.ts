import fs from "node:fs";
import { FixtureError } from "../../src/fixture/load.js";
import { HelpRequested, help, parseServerArgs, StartError, type ServerConfig, usage, UsageError } from "./cli.js";
import { type RunningServer, startServer } from "./server.js";

export interface ServerCommand {
  /** How the server was started, for the usage line: `npm start --`, `npx dataport`. */
  command: string;
  /** The fixture and store used when no --fixture / --db is given. */
  defaults: { fixture: string; db: string };
}

/**
 * The example server as a command (`npm start`, `npx dataport`): parse the
 * flags, start, print `listening on http://HOST:PORT`, drain and exit on
 * SIGTERM or SIGINT. Exit codes: 0 after a clean stop or `--help`, 2 for a
 * bad flag or fixture, 1 when it cannot start (the message says which flag
 * or service to fix).
 */
export async function runServerCommand(argv: readonly string[], { command, defaults }: ServerCommand): Promise<void> {
  let config: ServerConfig;
  try {
    config = parseServerArgs(argv, defaults);
  } catch (error) {
    if (error instanceof HelpRequested) {
      console.log(help(command, defaults));
      process.exit(0);
    }
    if (error instanceof UsageError) fail(2, `${error.message}\n${usage(command)}`);
    throw error;
  }
  let running: RunningServer;
  try {
    running = await startServer(config, { fs, env: process.env });
  } catch (error) {
    if (error instanceof FixtureError) fail(2, `bad fixture ${config.fixture}: ${error.message}`);
    if (error instanceof UsageError) fail(2, `${error.message}\n${usage(command)}`);
    if (error instanceof StartError) fail(1, error.message);
    fail(1, `could not start: ${(error as Error).message}`);
  }
  console.log(`dataport: listening on ${running.url} (db ${config.db.replace(/\/\/[^@/]*@/, "//***@")})`);
  let stopping = false;
  const stop = (why: string) => {
    if (stopping) {
      // A second signal while draining: the operator does not want to wait.
      console.error(`dataport: ${why} again, exiting without waiting for the drain`);
      process.exit(1);
    }
    stopping = true;
    console.log(
      `dataport: ${why}, draining (in-flight requests get ${config.drainTimeoutSeconds} s), then shutting down`,
    );
    running.close().then(
      () => {
        console.log("dataport: drained, store closed");
        process.exit(0);
      },
      (error: unknown) => {
        console.error("dataport: error while shutting down", error);
        process.exit(1);
      },
    );
  };
  process.on("SIGINT", () => stop("SIGINT"));
  process.on("SIGTERM", () => stop("SIGTERM"));
  stopWithNpm(() => stop("npm stopped"));
}

function fail(code: number, message: string): never {
  console.error(`dataport: ${message}`);
  process.exit(code);
}

/**
 * `npm start` and `npx dataport` run the server under `sh -c`, and npm passes
 * a SIGTERM to that shell, which exits without passing it on: the server
 * would run on, orphaned. So when npm started it (npm sets
 * npm_lifecycle_event), the shell going away is taken as the SIGTERM. Not
 * otherwise: a server started with `nohup … &` must outlive its shell.
 */
function stopWithNpm(stop: () => void): void {
  if (process.env.npm_lifecycle_event === undefined) return;
  const parent = process.ppid;
  const watch = setInterval(() => {
    if (process.ppid === parent) return;
    clearInterval(watch);
    stop();
  }, 250);
  watch.unref();
}
