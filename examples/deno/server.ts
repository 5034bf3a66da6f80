/**
 * Dataport on Deno, over the in-memory store with the demo fixture, or with
 * `--db FILE` over a SQLite file through node:sqlite:
 *
 *   npx deno run --sloppy-imports --allow-net --allow-read --allow-env examples/deno/server.ts [--fixture FILE] [--port
 * 8787] [--host 127.0.0.1]
 *   (with --db FILE, also --allow-write)
 */
import { fileURLToPath } from "node:url";
import { serveDeno } from "../../adapters/deno.js";
import { createExampleApi, parseExampleArgs, runExample } from "../shared/options.js";

/** The part of the `Deno` namespace this example uses (the project compiles without Deno's types). */
declare const Deno: {
  args: string[];
  readTextFileSync(path: string | URL): string;
  addSignalListener(signal: "SIGINT" | "SIGTERM", handler: () => void): void;
  exit(code: number): never;
  version: { deno: string };
};

const demoFixture = fileURLToPath(new URL("../demo/space.json", import.meta.url));

await runExample(
  "deno",
  "npx deno run --sloppy-imports --allow-net --allow-read --allow-env examples/deno/server.ts",
  async () => {
    const options = parseExampleArgs(Deno.args, demoFixture);
    const api = await createExampleApi(options, (path) => Deno.readTextFileSync(path));
    const shutdown = new AbortController();
    const server = serveDeno(api, {
      port: options.port,
      hostname: options.host,
      signal: shutdown.signal,
      onListen: ({ hostname, port }) =>
        console.log(`dataport (deno ${Deno.version.deno}) listening on http://${hostname}:${port}`),
    });
    const stop = () => {
      shutdown.abort();
      void server.finished.then(() => Deno.exit(0));
    };
    Deno.addSignalListener("SIGINT", stop);
    Deno.addSignalListener("SIGTERM", stop);
  },
);
