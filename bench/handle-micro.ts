/**
 * In-process cost of one `api.handle` call (no HTTP): the core's own work per
 * request, for profiling. Prints the best of several runs, in CPU µs.
 *
 *   node --import tsx bench/handle-micro.ts
 * me|wh|wh-sqlite|me-sqlite|rows-sqlite|rows-memory|rows-sorted-memory|rows-postgres
 *
 * MICRO_CALLS sets the calls per round (default 30,000).
 * rows-postgres reads a schema of its own in BENCH_PG_URL (default the
 * dataport_bench database), dropped at the end; only this process's CPU counts.
 *
 * Calls run 50 at a time (like 50 connections), so SQLite's group commit
 * batches as it does under load.
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createDataApi } from "../src/server/api.js";
import { parseFixture } from "../src/fixture/load.js";
import type { ApiRequest } from "../src/http/types.js";
import { createMemoryStorage } from "../src/memory/memory-storage.js";
import { createPostgresStorage } from "../src/postgres/index.js";
import { createSqliteStorage } from "../src/sqlite/index.js";
import pg from "pg";
import { ensureDatabase } from "./support.js";

const which = process.argv[2] ?? "me";
const dir = mkdtempSync(join(tmpdir(), "dataport-micro-"));
const reads = which === "me" || which.endsWith("me-sqlite") || which.startsWith("rows-");
const PG_URL = process.env.BENCH_PG_URL ?? "postgres://postgres@127.0.0.1:5432/dataport_bench";
const schema = `bench_micro_${process.pid}`;
if (which.endsWith("postgres")) await ensureDatabase(PG_URL);
const storage = which.endsWith("sqlite")
  ? createSqliteStorage({ path: join(dir, "micro.sqlite") })
  : which.endsWith("postgres")
    ? await createPostgresStorage({ connectionString: PG_URL, schema })
    : createMemoryStorage();
await storage.seed(
  parseFixture(JSON.parse(readFileSync(new URL("../examples/demo/space.json", import.meta.url), "utf8"))),
);
const api = createDataApi({ storage, webhookRatePerSecond: 1e9 });
const payload = new TextEncoder().encode(
  JSON.stringify({
    event: "order.created",
    order: {
      id: "NW-9999",
      region: "EMEA",
      items: [{ sku: "LATTE", qty: 2 }],
      customer: { name: "Ada", tier: "gold" },
    },
    note: "x".repeat(820),
  }),
);
const sent: Record<string, string> = reads
  ? { authorization: "Bearer dp_demo_full_access_0000000000001" }
  : { "content-type": "application/json", "content-length": String(payload.length) };
const request: ApiRequest = {
  method: reads ? "GET" : "POST",
  url: which.startsWith("rows-")
    ? `http://localhost/api/v1/datasets/ds_orders/rows?maxRows=100${which.startsWith("rows-sorted") ? "&sort=amount" : ""}`
    : reads
      ? "http://localhost/api/v1/me"
      : "http://localhost/api/webhooks/wh_demo_shop_events",
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
/** Calls per round (MICRO_CALLS, default 30,000; the warm-up is two thirds of that). */
const N = Number(process.env.MICRO_CALLS ?? 30_000);
await run(Math.round((N * 2) / 3 / CONCURRENCY) * CONCURRENCY);
if (process.env.MICRO_CALLGRIND) {
  // Under `valgrind --tool=callgrind --instr-atstart=no`: count the instructions of N warm calls only.
  const { execFileSync } = await import("node:child_process");
  execFileSync("callgrind_control", ["-i", "on", String(process.pid)]);
  await run(N);
  execFileSync("callgrind_control", ["-i", "off", String(process.pid)]);
  console.log(which, N, "calls counted");
  await storage.close();
  process.exit(0);
}
let best = Number.POSITIVE_INFINITY;
for (let round = 0; round < 7; round++) {
  const before = process.cpuUsage();
  await run(N);
  const used = process.cpuUsage(before);
  best = Math.min(best, (used.user + used.system) / N);
}
console.log(which, best.toFixed(2), "µs CPU per handle (best of 7)");
await storage.close();
if (which.endsWith("postgres")) {
  const client = new pg.Client({ connectionString: PG_URL });
  await client.connect();
  await client.query(`drop schema if exists "${schema}" cascade`);
  await client.end();
}
rmSync(dir, { recursive: true, force: true });
