/**
 * The example server: `npm start -- [flags]` (see README).
 * Prints `listening on http://HOST:PORT` when ready; exits 2 on a bad flag or fixture.
 */
import fs from "node:fs";
import { fileURLToPath } from "node:url";
import { FixtureError } from "../../src/fixture/load.js";
import { parseServerArgs, USAGE, UsageError } from "./cli.js";
import { startServer } from "./server.js";

const root = fileURLToPath(new URL("../..", import.meta.url));

async function main(): Promise<void> {
  let config;
  try {
    config = parseServerArgs(process.argv.slice(2), {
      fixture: `${root}examples/demo/space.json`,
      db: `${root}.data/dataport.sqlite`,
    });
  } catch (error) {
    if (error instanceof UsageError) {
      console.error(`dataport: ${error.message}\n${USAGE}`);
      process.exit(2);
    }
    throw error;
  }
  let running;
  try {
    running = await startServer(config, { fs, env: process.env });
  } catch (error) {
    if (error instanceof FixtureError) {
      console.error(`dataport: bad fixture ${config.fixture}: ${error.message}`);
      process.exit(2);
    }
    if (error instanceof UsageError) {
      console.error(`dataport: ${error.message}\n${USAGE}`);
      process.exit(2);
    }
    console.error(`dataport: could not start: ${(error as Error).message}`);
    process.exit(1);
  }
  console.log(`dataport: listening on ${running.url} (db ${config.db.replace(/\/\/[^@/]*@/, "//***@")})`);
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) {
      // A second signal while draining: the operator does not want to wait.
      console.error(`dataport: ${signal} again, exiting without waiting for the drain`);
      process.exit(1);
    }
    stopping = true;
    console.log(`dataport: ${signal}, draining (in-flight requests get ${config.drainTimeoutSeconds} s), then shutting down`);
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
}

await main();
