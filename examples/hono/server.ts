/**
 * Dataport inside a Hono application, served by Bun (Hono itself runs on any
 * fetch runtime; on Node add @hono/node-server):
 *
 *   npx bun examples/hono/server.ts [--fixture FILE] [--port 8787] [--host 127.0.0.1]
 */
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { getConnInfo } from "hono/bun";
import { createExampleApi, parseExampleArgs } from "../shared/options.js";
import { createHonoApp } from "./app.js";

const options = parseExampleArgs(process.argv.slice(2), fileURLToPath(new URL("../demo/space.json", import.meta.url)));
const api = await createExampleApi(options, (path) => readFileSync(path, "utf8"));
const app = createHonoApp(api, (c) => getConnInfo(c).remote.address ?? null);

const bun = (globalThis as { Bun?: { serve(options: object): { port: number } } }).Bun;
if (!bun) throw new Error("run this example with bun (npx bun examples/hono/server.ts)");
const server = bun.serve({ port: options.port, hostname: options.host, fetch: app.fetch });
console.log(`dataport (hono on bun) listening on http://${options.host}:${server.port}`);
