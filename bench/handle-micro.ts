/**
 * In-process cost of one `api.handle` call (no HTTP): the core's own work per
 * request, for profiling. Prints the best of several runs, in CPU µs.
 *
 *   node --import tsx bench/handle-micro.ts me|wh
 */
import { readFileSync } from "node:fs";
import { createDataApi } from "../src/api.js";
import { parseFixture } from "../src/fixture/load.js";
import type { ApiRequest } from "../src/http/types.js";
import { createMemoryStorage } from "../src/memory/storage.js";

const storage = createMemoryStorage();
await storage.seed(parseFixture(JSON.parse(readFileSync(new URL("../examples/demo/space.json", import.meta.url), "utf8"))));
const api = createDataApi({ storage, webhookRatePerSecond: 1e9 });
const which = process.argv[2] ?? "me";
const payload = new TextEncoder().encode(
  JSON.stringify({ event: "order.created", order: { id: "NW-9999", region: "EMEA", items: [{ sku: "LATTE", qty: 2 }], customer: { name: "Ada", tier: "gold" } }, note: "x".repeat(820) }),
);
const sent: Record<string, string> =
  which === "me" ? { authorization: "Bearer dp_demo_full_access_0000000000001" } : { "content-type": "application/json", "content-length": String(payload.length) };
const request: ApiRequest = {
  method: which === "me" ? "GET" : "POST",
  url: which === "me" ? "http://localhost/api/v1/me" : "http://localhost/api/webhooks/wh_demo_shop_events",
  headers: { get: (name) => sent[name] ?? null, keys: () => Object.keys(sent) },
  clientAddress: "127.0.0.1",
  readBody: async () => payload,
};
for (let i = 0; i < 20_000; i++) await api.handle(request);
const N = 30_000;
let best = Number.POSITIVE_INFINITY;
for (let run = 0; run < 7; run++) {
  const before = process.cpuUsage();
  for (let i = 0; i < N; i++) await api.handle(request);
  const used = process.cpuUsage(before);
  best = Math.min(best, (used.user + used.system) / N);
}
console.log(which, best.toFixed(2), "µs CPU per handle (best of 7)");
