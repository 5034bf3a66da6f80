/**
 * In-process cost of one `api.handle` call (no HTTP): the core's own work per
 * request, for profiling. Prints the best of several runs, in CPU µs.
 *
 *   node --import tsx bench/handle-micro.ts me|wh|wh-sqlite|me-sqlite|rows-sqlite|rows-memory|rows-sorted-memory
 *
 * Calls run 50 at a time (like 50 connections), so SQLite's group commit
 * batches as it does under load.
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createDataApi } from "../src/core/api.js";
import { parseFixture } from "../src/fixture/load.js";
import type { ApiRequest } from "../src/http/types.js";
import { createMemoryStorage } from "../src/memory/storage.js";
import { createSqliteStorage } from "../src/sqlite/index.js";

const which = process.argv[2] ?? "me";
const dir = mkdtempSync(join(tmpdir(), "dataport-micro-"));
const reads = which === "me" || which.endsWith("me-sqlite") || which.startsWith("rows-");
const storage = which.endsWith("sqlite") ? createSqliteStorage({ path: join(dir, "micro.sqlite") }) : createMemoryStorage();
await storage.seed(parseFixture(JSON.parse(readFileSync(new URL("../examples/demo/space.json", import.meta.url), "utf8"))));
const api = createDataApi({ storage, webhookRatePerSecond: 1e9 });
const payload = new TextEncoder().encode(
  JSON.stringify({ event: "order.created", order: { id: "NW-9999", region: "EMEA", items: [{ sku: "LATTE", qty: 2 }], customer: { name: "Ada", tier: "gold" } }, note: "x".repeat(820) }),
);
const sent: Record<string, string> =
  reads ? { authorization: "Bearer dp_demo_full_access_0000000000001" } : { "content-type": "application/json", "content-length": String(payload.length) };
const request: ApiRequest = {
  method: reads ? "GET" : "POST",
  url: which.startsWith("rows-") ? `http://localhost/api/v1/datasets/ds_orders/rows?maxRows=100${which.startsWith("rows-sorted") ? "&sort=amount" : ""}` : reads ? "http://localhost/api/v1/me" : "http://localhost/api/webhooks/wh_demo_shop_events",
  headers: { get: (name) => sent[name] ?? null, keys: () => Object.keys(sent) },
  clientAddress: "127.0.0.1",
  readBody: async () => payload,
};
const CONCURRENCY = 50;
async function run(calls: number): Promise<void> {
  for (let i = 0; i < calls; i += CONCURRENCY) {
    const replies = await Promise.all(Array.from({ length: CONCURRENCY }, () => api.handle(request)));
    if (replies[0]!.status !== 200) throw new Error(`status ${replies[0]!.status}: ${String(replies[0]!.body)}`);
  }
}
await run(20_000);
const N = 30_000;
let best = Number.POSITIVE_INFINITY;
for (let round = 0; round < 7; round++) {
  const before = process.cpuUsage();
  await run(N);
  const used = process.cpuUsage(before);
  best = Math.min(best, (used.user + used.system) / N);
}
console.log(which, best.toFixed(2), "µs CPU per handle (best of 7)");
await storage.close();
rmSync(dir, { recursive: true, force: true });
