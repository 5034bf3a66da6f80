/**
 * The event loop while long reads run on SQLite (issue 37). A file with an
 * undeclared dataset of PROBE_ROWS rows (default 10,000,000; built once and
 * kept at PROBE_FILE, ~1 GB for ten million) beside the demo space, served
 * over HTTP by a child process from `dist/` (build it first: `npx tsup`).
 * While PROBE_SORTS sorted reads of it run at once, again and again for
 * PROBE_SECONDS (`?sort=name&maxRows=100`: no index, so each scans and sorts
 * every row), two probes ask every PROBE_EVERY_MS ms, each for itself:
 * `/api/health/live` and a 100-row plain page (`ds_orders`). Prints their
 * p50/p99/max, and the sorted reads' statuses and times.
 *
 *   npx tsup && npx tsx bench/sqlite-loop-probe.ts
 *   PROBE_THREADS=0 npx tsx bench/sqlite-loop-probe.ts             # every read on the event loop
 *   PROBE_DEADLINE_MS=10000 npx tsx bench/sqlite-loop-probe.ts     # the default deadline: sorts past it answer 503
 *   PROBE_ROWS=1000000 PROBE_FILE=/tmp/probe-1m.sqlite npx tsx bench/sqlite-loop-probe.ts
 *
 * Also printed: how busy the server's event loop was, and how late it ran
 * its timers (`monitorEventLoopDelay`, whose 5 ms resolution is included:
 * an idle loop shows p50 5 ms), which the machine's other work does not blur.
 *
 * PROBE_DEADLINE_MS is the store's `callTimeoutMs` (default here 120,000, so
 * that the sorts finish); PROBE_THREADS its `readerThreads` (default 2).
 */
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { createServer } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { monitorEventLoopDelay, performance } from "node:perf_hooks";
import { fileURLToPath } from "node:url";
import { built, type Dataport, type NodeAdapter, type SqliteEntry } from "./servers/built.js";

const ROWS = Number(process.env.PROBE_ROWS ?? 10_000_000);
const FILE = process.env.PROBE_FILE ?? join(tmpdir(), `dataport-loop-probe-${ROWS}.sqlite`);
const SORTS = Number(process.env.PROBE_SORTS ?? 1);
const SECONDS = Number(process.env.PROBE_SECONDS ?? 60);
const EVERY_MS = Number(process.env.PROBE_EVERY_MS ?? 50);
const DEADLINE_MS = Number(process.env.PROBE_DEADLINE_MS ?? 120_000);
const THREADS = Number(process.env.PROBE_THREADS ?? 2);
const PORT = Number(process.env.PROBE_PORT ?? 19_870);
const TOKEN = "dp_demo_full_access_0000000000001";
const BIG = "ds_probe_big";

if (process.argv[2] === "serve") await serve();
else await probe();

/** The child: the store on FILE (built when missing), the API on PORT. */
async function serve(): Promise<void> {
  const { createDataApi, parseFixture } = await built<Dataport>("index.js");
  const { toNodeHandler } = await built<NodeAdapter>("adapters/node.js");
  const { createSqliteStorage } = await built<SqliteEntry>("sqlite/index.js");
  const fresh = !existsSync(FILE);
  const storage = createSqliteStorage({ path: FILE, readerThreads: THREADS, callTimeoutMs: DEADLINE_MS });
  if (fresh) {
    const started = performance.now();
    const demo = fileURLToPath(new URL("../examples/demo/space.json", import.meta.url));
    await storage.seed(parseFixture(JSON.parse(readFileSync(demo, "utf8"))));
    await storage.catalog.putDataset({
      id: BIG,
      teamId: "team_ops",
      name: "Loop probe",
      type: "upload",
      connectionId: null,
      source: null,
      columns: [
        { name: "id", type: "number" },
        { name: "name", type: "string" },
        { name: "amount", type: "number" },
      ],
      rowCount: 0,
      lastRefreshedAt: null,
      updatedAt: "2026-01-01T00:00:00.000Z",
    });
    // Straight into the file (the bulk write path would take minutes more): positions 0..ROWS-1, keys as rowKey() makes
    // them.
    const { db } = storage;
    const seq = db.prepare("SELECT seq FROM datasets WHERE id = ?").pluck().get(BIG) as number;
    db.exec("BEGIN");
    db.prepare(
      `WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i + 1 < ?)
       INSERT INTO dataset_rows (row_key, dataset_seq, position, data)
       SELECT ? * 8796093022208 + i, ?, i,
         json_object('id', i, 'name', 'n' || ((i * 7919) % 1000003), 'amount', ((i * 2654435761) % 1000003) / 100.0)
       FROM n`,
    ).run(ROWS, seq, seq);
    db.prepare("UPDATE datasets SET first_position = 0, next_position = ? WHERE seq = ?").run(ROWS, seq);
    // The demo key may read it.
    db.prepare(
      "UPDATE api_keys SET allowlist = json_insert(allowlist, '$.datasets[#]', ?) WHERE id = 'key_demo_full'",
    ).run(BIG);
    db.exec("COMMIT");
    console.error(`built ${FILE}: ${ROWS} rows in ${((performance.now() - started) / 1000).toFixed(0)} s`);
  }
  const api = createDataApi({ storage, webhookRatePerSecond: 1e9 });
  // How busy the event loop was, and how late it ran its timers: what the probes see, without the network and the
  // client.
  const delay = monitorEventLoopDelay({ resolution: 5 });
  let busy = performance.eventLoopUtilization();
  createServer(toNodeHandler(api)).listen(PORT, "127.0.0.1", () => {
    delay.enable();
    busy = performance.eventLoopUtilization();
    console.log("ready");
  });
  process.on("SIGTERM", () => {
    delay.disable();
    const ms = (ns: number) => (ns / 1e6).toFixed(1);
    const utilization = (performance.eventLoopUtilization(busy).utilization * 100).toFixed(1);
    console.log(`loop ${ms(delay.percentile(50))} ${ms(delay.percentile(99))} ${ms(delay.max)} ${utilization}`);
    void storage.close().finally(() => process.exit(0));
  });
}

/** The parent: starts the child, runs the sorts and the probes, prints the figures. */
async function probe(): Promise<void> {
  const args = ["--import", "tsx", fileURLToPath(import.meta.url), "serve"];
  const child = spawn(process.execPath, args, { stdio: ["ignore", "pipe", "inherit"], env: process.env });
  process.on("exit", () => child.kill("SIGKILL"));
  await new Promise<void>((resolve, reject) => {
    child.stdout!.on("data", (chunk: Buffer) => {
      if (chunk.toString().includes("ready")) resolve();
    });
    child.once("exit", (code) => reject(new Error(`the server exited with ${code}`)));
  });
  const until = performance.now() + SECONDS * 1000;
  const sorts: { status: number; ms: number }[] = [];
  const sorting = Array.from({ length: SORTS }, async () => {
    while (performance.now() < until) {
      const started = performance.now();
      const status = await get(`/api/v1/datasets/${BIG}/rows?sort=name&maxRows=100`, true);
      sorts.push({ status, ms: performance.now() - started });
    }
  });
  const probing = async (path: string, withKey: boolean) => {
    const times: number[] = [];
    let failed = 0;
    // Probes start once the sorts have begun (a sort is the first request the server gets).
    await sleep(200);
    while (performance.now() < until) {
      const started = performance.now();
      if ((await get(path, withKey)) !== 200) failed++;
      times.push(performance.now() - started);
      await sleep(EVERY_MS);
    }
    return { path, times, failed };
  };
  const [live, page] = await Promise.all([
    probing("/api/health/live", false),
    probing("/api/v1/datasets/ds_orders/rows?maxRows=100", true),
    ...sorting,
  ]);
  const loop = await stop(child);
  console.log(
    `${ROWS} rows, ${SORTS} sorted read(s) at once for ${SECONDS} s, readerThreads ${THREADS}, callTimeoutMs ${DEADLINE_MS}`,
  );
  console.log(`  ${loop}`);
  for (const { path, times, failed } of [live!, page!]) {
    const sorted = [...times].sort((a, b) => a - b);
    const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!.toFixed(1);
    const max = sorted.at(-1)!.toFixed(1);
    console.log(
      `  ${path}: ${sorted.length} probes, p50 ${at(0.5)} ms, p99 ${at(0.99)} ms, max ${max} ms, ${failed} not answered 200`,
    );
  }
  const byStatus = new Map<number, number[]>();
  for (const s of sorts) byStatus.set(s.status, [...(byStatus.get(s.status) ?? []), s.ms]);
  for (const [status, times] of byStatus) {
    const sorted = times.sort((a, b) => a - b);
    const s = (ms: number) => `${(ms / 1000).toFixed(1)} s`;
    const range = `fastest ${s(sorted[0]!)}, median ${s(sorted[Math.floor(sorted.length / 2)]!)}, slowest ${s(sorted.at(-1)!)}`;
    console.log(`  sorted reads answering ${status || "nothing (connection dropped)"}: ${times.length}, ${range}`);
  }
}

/**
 * The status of a GET to the server; 0 when no answer came (a keep-alive
 * connection the server dropped while its event loop was held).
 */
function get(path: string, withKey: boolean): Promise<number> {
  const init = withKey ? { headers: { authorization: `Bearer ${TOKEN}` } } : {};
  return fetch(`http://127.0.0.1:${PORT}${path}`, init).then(
    async (res) => (await res.arrayBuffer(), res.status),
    () => 0,
  );
}

/** Stops the server; answers how busy its event loop was, and how late its timers ran, while it served. */
async function stop(child: ChildProcess): Promise<string> {
  let said = "";
  child.stdout!.on("data", (chunk: Buffer) => (said += chunk.toString()));
  const exited = new Promise((resolve) => child.once("exit", resolve));
  child.kill("SIGTERM");
  await exited;
  const [p50, p99, max, busy] = /loop (\S+) (\S+) (\S+) (\S+)/.exec(said)?.slice(1) ?? ["?", "?", "?", "?"];
  return `the server's event loop: busy ${busy} % of the time; its timers late by p50 ${p50} ms, p99 ${p99} ms, max ${max} ms`;
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
