/**
 * Dataport inside a Hono application, served by Bun (Hono itself runs on any
 * fetch runtime; on Node, serve `app.fetch` with @hono/node-server):
 *
 *   npx bun examples/hono/server.ts [--fixture FILE] [--port 8787] [--host 127.0.0.1]
 */
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { createExampleApi, parseExampleArgs, runExample } from "../shared/options.js";
import { createHonoApp } from "./app.js";

/** The part of Bun's global this example uses (the project compiles without Bun's types). */
interface BunRuntime {
  serve(options: {
    port: number;
    hostname: string;
    fetch: (request: Request, server: unknown) => Response | Promise<Response>;
  }): { port: number; stop(closeActive?: boolean): unknown };
}

await runExample("bun", "npx bun examples/hono/server.ts", async () => {
  const options = parseExampleArgs(
    process.argv.slice(2),
    fileURLToPath(new URL("../demo/space.json", import.meta.url)),
  );
  // hono/bun reads Bun's globals when loaded: imported only once the runtime is known to be Bun.
  const { getConnInfo } = await import("hono/bun");
  const api = await createExampleApi(options, (path) => readFileSync(path, "utf8"));
  const app = createHonoApp(api, (c) => getConnInfo(c).remote.address ?? null);
  const bun = (globalThis as unknown as { Bun: BunRuntime }).Bun;
  const server = bun.serve({ port: options.port, hostname: options.host, fetch: app.fetch });
  console.log(`dataport (hono on bun) listening on http://${options.host}:${server.port}`);
  const stop = () => {
    void Promise.resolve(server.stop(true)).then(() => process.exit(0));
  };
  process.once("SIGINT", stop);
  process.once("SIGTERM", stop);
});
