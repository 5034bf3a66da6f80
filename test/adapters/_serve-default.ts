/**
 * Run by bun or deno (test/adapters/{bun,deno}.test.ts): `serveBun` or
 * `serveDeno` with no hostname, one real request through the core, then one
 * JSON line saying where it listened and what it answered.
 */
import { serveBun } from "../../adapters/bun.js";
import { serveDeno } from "../../adapters/deno.js";
import { createDataApi } from "../../src/index.js";

const api = createDataApi({});
const runtime = (globalThis as { Bun?: unknown }).Bun ? "bun" : "deno";
if (runtime === "bun") {
  const server = serveBun(api, { port: 0 });
  const status = (await fetch(`http://127.0.0.1:${server.port}/api/v1/openapi.json`)).status;
  console.log(JSON.stringify({ hostname: server.hostname, status }));
  await server.stop(true);
} else {
  const shutdown = new AbortController();
  const server = serveDeno(api, { port: 0, signal: shutdown.signal, onListen: () => {} });
  const res = await fetch(`http://127.0.0.1:${server.addr.port}/api/v1/openapi.json`);
  await res.arrayBuffer();
  // Give a deprecation notice printed once the answer was delivered the time to appear.
  await new Promise((resolve) => setTimeout(resolve, 200));
  console.log(JSON.stringify({ hostname: server.addr.hostname, status: res.status }));
  shutdown.abort();
  await server.finished;
}
