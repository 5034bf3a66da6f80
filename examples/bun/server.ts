/**
 * Dataport on Bun, over the in-memory store with the demo fixture, or with
 * `--db FILE` over a SQLite file through bun:sqlite:
 *
 *   npx bun examples/bun/server.ts [--fixture FILE] [--db FILE] [--port 8787] [--host 127.0.0.1] [--now ISO]
 */
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { serveBun } from "../../adapters/bun.js";
import { createExampleApi, parseExampleArgs, runExample } from "../shared/options.js";

const demoFixture = fileURLToPath(new URL("../demo/space.json", import.meta.url));

await runExample("bun", "npx bun examples/bun/server.ts", async () => {
  const options = parseExampleArgs(process.argv.slice(2), demoFixture);
  const api = await createExampleApi(options, (path) => readFileSync(path, "utf8"));
  const server = serveBun(api, { port: options.port, hostname: options.host });
  // The configured app URL names the requested port; with --port 0 the real one is only known now.
  console.log(`dataport (bun ${process.versions.bun}) listening on http://${options.host}:${server.port}`);
  const stop = () => {
    void Promise.resolve(server.stop(true)).then(() => process.exit(0));
  };
  process.once("SIGINT", stop);
  process.once("SIGTERM", stop);
});
