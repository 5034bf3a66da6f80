/**
 * SQLite read paths at scale (issue 8, Performance):
 *   - an audit page (200 events, from a cursor in the middle of the log) at 10,000 and at 1,000,000 stored events;
 *   - GET /datasets/{id}/rows?maxRows=1000 at offset 0 and at offset 900,000 of a 1,000,000-row dataset;
 *   - peak RSS of the server process while it streams that whole dataset (no maxRows).
 *
 *   npx tsx bench/sqlite-reads.ts                 # 1M rows, 1M events (builds a temp file; needs ~1 GB disk)
 *   ROWS=50000 EVENTS=50000 npx tsx bench/sqlite-reads.ts   # a quick smoke run
 *
 * The dataset and the log are written with raw SQL into the store's own
 * tables (building 1M rows through `seed` would need them all in memory);
 * the reads go through the store and, for rows, through the Node adapter
 * in a separate server process, whose RSS is what is measured.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import type { AuditEvent } from "../src/domain/model.js";
import { parseFixture } from "../src/fixture/load.js";
import { appendRowsStatement } from "../src/sqlite/rows.js";
import { createSqliteStorage, type SqliteStorage } from "../src/sqlite/index.js";

const TOKEN = "dp_demo_full_access_0000000000001";
const DATASET = "ds_orders";
const FIXTURE = new URL("../examples/demo/space.json", import.meta.url);

if (process.argv[2] === "--serve") await serve(process.argv[3]!);
else await main();

async function main(): Promise<void> {
  const rows = Number(process.env.ROWS ?? 1_000_000);
  const events = Number(process.env.EVENTS ?? 1_000_000);
  const small = Math.min(10_000, events);
  const deepOffset = Math.floor(rows * 0.9);
  const dir = mkdtempSync(join(tmpdir(), "dataport-bench-reads-"));
  const path = join(dir, "reads.sqlite");
  try {
    const store = createSqliteStorage({ path });
    await store.seed(parseFixture(JSON.parse(readFileSync(FIXTURE, "utf8"))));

    console.log(`building ${rows.toLocaleString()} rows and ${events.toLocaleString()} audit events in ${path}`);
    let t = performance.now();
    fillDataset(store, rows);
    console.log(`  rows written in ${((performance.now() - t) / 1000).toFixed(1)} s`);

    t = performance.now();
    fillAudit(store, 0, events);
    console.log(`  events written in ${((performance.now() - t) / 1000).toFixed(1)} s`);
    // The small log lives in its own file; the two are timed alternately so machine noise hits both alike.
    const smallStore = createSqliteStorage({ path: join(dir, "audit-small.sqlite") });
    await smallStore.seed(parseFixture(JSON.parse(readFileSync(FIXTURE, "utf8"))));
    fillAudit(smallStore, 0, small);
    const [auditSmall, auditLarge] = await timeAlternately(
      () => readAuditPage(smallStore, small),
      () => readAuditPage(store, events),
      100,
    );
    await smallStore.close();
    await store.close();

    const port = 18_900 + Math.floor(Math.random() * 50);
    const server = await startServer(path, port);
    try {
      const base = `http://127.0.0.1:${port}`;
      const [shallow, deep] = await timeAlternately(
        () => drain(`${base}/api/v1/datasets/${DATASET}/rows?maxRows=1000&offset=0`),
        () => drain(`${base}/api/v1/datasets/${DATASET}/rows?maxRows=1000&offset=${deepOffset}`),
        30,
      );
      await fetch(`${base}/__rss/reset`, { method: "POST" });
      const idle = (await (await fetch(`${base}/__rss`)).json()) as { peak: number };
      t = performance.now();
      const bytes = await drain(`${base}/api/v1/datasets/${DATASET}/rows`);
      const fullMs = performance.now() - t;
      const peak = (await (await fetch(`${base}/__rss`)).json()) as { peak: number; atPeak: NodeJS.MemoryUsage };

      const mb = (n: number) => `${(n / 1024 / 1024).toFixed(0)} MB`;
      console.log("\nresults (median of repeated reads)");
      console.log(`  audit page of 200 at ${small.toLocaleString()} events: ${auditSmall.toFixed(3)} ms`);
      console.log(`  audit page of 200 at ${events.toLocaleString()} events: ${auditLarge.toFixed(3)} ms`);
      console.log(`    ratio ${(auditLarge / auditSmall).toFixed(2)}x (goal <= 1.5x)`);
      console.log(`  rows maxRows=1000 offset 0: ${shallow.toFixed(2)} ms`);
      console.log(`  rows maxRows=1000 offset ${deepOffset.toLocaleString()}: ${deep.toFixed(2)} ms`);
      console.log(`    ratio ${(deep / shallow).toFixed(2)}x (goal <= 2x)`);
      console.log(`  full streamed read: ${mb(bytes)} of JSON in ${(fullMs / 1000).toFixed(1)} s`);
      console.log(`    server RSS idle ${mb(idle.peak)}, peak while streaming ${mb(peak.peak)} (goal < 200 MB)`);
      const { heapTotal, heapUsed, external, arrayBuffers } = peak.atPeak;
      console.log(
        `    at the peak: heap ${mb(heapUsed)} used of ${mb(heapTotal)}, external ${mb(external)} (array buffers ${mb(arrayBuffers)})`,
      );
    } finally {
      server.kill("SIGTERM");
      await new Promise((r) => server.once("exit", r));
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * Replace the demo dataset's rows with `count` generated rows at positions 0..count-1, through the store's own append
 * statement.
 */
function fillDataset(store: SqliteStorage, count: number): void {
  const { db } = store;
  const seq = (db.prepare("SELECT seq FROM datasets WHERE id = ?").get(DATASET) as { seq: number }).seq;
  const append = appendRowsStatement(db);
  const regions = ["EMEA", "AMER", "APAC"];
  const CHUNK = 10_000;
  db.transaction(() => {
    db.prepare("DELETE FROM dataset_rows WHERE dataset_seq = ?").run(seq);
    for (let from = 0; from < count; from += CHUNK) {
      const rows = [];
      for (let i = from; i < Math.min(count, from + CHUNK); i++) {
        rows.push({
          order_id: `NW-${i}`,
          ordered_on: "2026-10-01",
          region: regions[i % 3],
          product: "Latte",
          quantity: (i % 7) + 1,
          amount: (i % 1000) / 4,
          paid: i % 2 === 0,
        });
      }
      append(seq, from, rows);
    }
    db.prepare("UPDATE datasets SET first_position = 0, next_position = ? WHERE seq = ?").run(count, seq);
  })();
}

function fillAudit(store: SqliteStorage, from: number, to: number): void {
  const { db } = store;
  const insert = db.prepare(
    "INSERT INTO audit_events (team_id, category, time_ms, stored_at, target_id, event) VALUES (?, ?, ?, ?, ?, ?)",
  );
  const categories = ["audit", "data_access", "error"] as const;
  const BATCH = 50_000;
  for (let start = from; start < to; start += BATCH) {
    db.transaction(() => {
      for (let i = start; i < Math.min(to, start + BATCH); i++) {
        const time = Date.UTC(2026, 9, 1) + i * 1000;
        const event: AuditEvent = {
          id: `evt_${i}`,
          teamId: "team_ops",
          time: new Date(time).toISOString(),
          category: categories[i % 3]!,
          action: "dataset.rows.read",
          actor: { type: "api-key", id: "key_sync", name: "Warehouse sync" },
          target: { type: "dataset", id: DATASET },
          outcome: "success",
          ip: "203.0.113.7",
          userAgent: "bench",
        };
        insert.run(event.teamId, event.category, time, time, DATASET, JSON.stringify(event));
      }
    })();
  }
}

/** A page of 200 from a cursor in the middle of the log, in the default `audit` category. */
async function readAuditPage(store: SqliteStorage, size: number): Promise<void> {
  const page = await store.audit.readAuditEvents({
    teamIds: ["team_ops", "team_mkt"],
    categories: ["audit"],
    after: String(Math.floor(size / 2)),
    since: null,
    storedBefore: Number.MAX_SAFE_INTEGER,
    limit: 200,
  });
  if (page.events.length !== 200) throw new Error(`audit page returned ${page.events.length} events`);
}

/** Median times of `a` and `b`, run alternately `rounds` times after a warm-up. */
async function timeAlternately(
  a: () => Promise<unknown>,
  b: () => Promise<unknown>,
  rounds: number,
): Promise<[number, number]> {
  for (let i = 0; i < 5; i++) {
    await a();
    await b();
  }
  const ta: number[] = [];
  const tb: number[] = [];
  for (let i = 0; i < rounds; i++) {
    for (const [fn, times] of i % 2 === 0
      ? ([
          [a, ta],
          [b, tb],
        ] as const)
      : ([
          [b, tb],
          [a, ta],
        ] as const)) {
      const t = performance.now();
      await fn();
      times.push(performance.now() - t);
    }
  }
  return [median(ta), median(tb)];
}

async function drain(url: string): Promise<number> {
  const res = await fetch(url, { headers: { authorization: `Bearer ${TOKEN}` } });
  if (res.status !== 200) throw new Error(`${url}: ${res.status} ${await res.text()}`);
  const reader = res.body!.getReader();
  let bytes = 0;
  for (let next = await reader.read(); !next.done; next = await reader.read()) bytes += next.value.length;
  return bytes;
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
}

async function startServer(path: string, port: number): Promise<ChildProcess> {
  const child = spawn(process.execPath, ["--import", "tsx", "bench/sqlite-reads.ts", "--serve", path], {
    env: { ...process.env, PORT: String(port) },
    stdio: ["ignore", "pipe", "inherit"],
  });
  await new Promise<void>((resolve, reject) => {
    child.stdout!.on("data", (d: Buffer) => d.toString().includes("ready") && resolve());
    child.on("exit", (code) => reject(new Error(`server exited with ${code}`)));
  });
  return child;
}

/**
 * The measured server: the Node adapter on the SQLite file, plus /__rss reporting its own peak RSS (sampled every 10
 * ms).
 */
async function serve(path: string): Promise<void> {
  const { toNodeHandler } = await import("../adapters/node.js");
  const { createDataApi } = await import("../src/server/api.js");
  const storage = createSqliteStorage({ path });
  const handler = toNodeHandler(createDataApi({ storage }));
  let peak = process.memoryUsage().rss;
  let atPeak = process.memoryUsage();
  setInterval(() => {
    const now = process.memoryUsage();
    if (now.rss > peak) {
      peak = now.rss;
      atPeak = now;
    }
  }, 10).unref();
  createServer((req, res) => {
    if (req.url === "/__rss/reset") {
      peak = process.memoryUsage().rss;
      res.end();
    } else if (req.url === "/__rss") {
      res.setHeader("content-type", "application/json");
      res.end(JSON.stringify({ peak: Math.max(peak, process.memoryUsage().rss), atPeak }));
    } else {
      handler(req, res);
    }
  }).listen(Number(process.env.PORT), "127.0.0.1", () => console.log("ready"));
  process.on("SIGTERM", () => {
    void storage.close().finally(() => process.exit(0));
  });
}
