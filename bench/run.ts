/**
 * npm run bench — each scenario runs a Dataport server and a bare baseline
 * server as separate processes on 127.0.0.1, drives each with autocannon
 * from this process for BENCH_SECONDS (default 3) per round, alternating
 * BENCH_ROUNDS times (default 5), and prints the median ratio.
 *
 *   npm run bench                 # every scenario
 *   npm run bench -- me webhook   # scenarios whose name contains a word
 *   BENCH_DATAPORT=adapter-only npm run bench -- me:   # another server in Dataport's place (diagnosis)
 *   npm run bench -- bulk-upload  # a 1,000,000-row CSV upload: rows/s and server peak RSS (bench/bulk-upload.ts)
 *   BENCH_AB=/tmp/dist-before npm run bench -- webhook-memory
 *       # A/B: Dataport built from another checkout's dist/ takes the baseline's
 *       # place, so the ratio is this build against that one (above 1: faster)
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { availableParallelism } from "node:os";
import autocannon from "autocannon";

const SECONDS = Number(process.env.BENCH_SECONDS ?? 3);
/** Baseline and Dataport alternate this many times; the median of the per-round ratios is reported (this machine's throughput drifts by ±25% run to run). */
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
const CONNECTIONS = 50;
const OVERRIDE = process.env.BENCH_DATAPORT;
/** Another build's dist/ directory: run as the baseline side (same server, same requests), see the header. */
const AB_DIST = process.env.BENCH_AB;
/** BENCH_MODE=alternate runs baseline and Dataport one after the other instead of side by side (see measurePair). */
const PAIRED = process.env.BENCH_MODE !== "alternate";
const TOKEN = "dp_demo_full_access_0000000000001";
const PAYLOAD_1KB = JSON.stringify({
  event: "order.created",
  order: { id: "NW-9999", region: "EMEA", items: [{ sku: "LATTE", qty: 2 }], customer: { name: "Ada", tier: "gold" } },
  note: "x".repeat(820),
});

interface Side {
  server: string;
  env?: Record<string, string>;
  request: autocannon.Options["requests"];
  url: string;
}

interface Scenario {
  name: string;
  goal: number;
  dataport: Side;
  baseline: Side;
  /** Run before measuring, e.g. to capture the bytes the baseline must answer. */
  prepare?: (url: string) => Promise<Record<string, string>>;
}

const scenarios: Scenario[] = [
  {
    name: "me: GET /api/v1/me, Node adapter vs bare node:http",
    goal: 0.7,
    dataport: { server: "me-dataport", url: "/api/v1/me", request: [{ method: "GET", headers: { authorization: `Bearer ${TOKEN}` } }] },
    // The baseline gets the same request (it ignores the Authorization header but parses it, as Dataport does).
    baseline: { server: "me-baseline", url: "/api/v1/me", request: [{ method: "GET", headers: { authorization: `Bearer ${TOKEN}` } }] },
    prepare: async (url) => ({ BODY: await (await fetch(`${url}/api/v1/me`, { headers: { authorization: `Bearer ${TOKEN}` } })).text() }),
  },
  {
    name: "webhook-memory: POST 1 KB JSON to /api/webhooks/{id} on the memory store vs bare node:http JSON.parse",
    goal: 0.6,
    dataport: {
      server: "me-dataport",
      url: "/api/webhooks/wh_demo_shop_events",
      request: [{ method: "POST", headers: { "content-type": "application/json" }, body: PAYLOAD_1KB }],
    },
    baseline: {
      server: "webhook-baseline",
      url: "/",
      request: [{ method: "POST", headers: { "content-type": "application/json" }, body: PAYLOAD_1KB }],
    },
  },
  {
    name: "webhook-sqlite: POST 1 KB JSON on SQLite (200 after commit) vs bare node:http + better-sqlite3 insert per request",
    goal: 1.0,
    dataport: {
      server: "webhook-sqlite-dataport",
      url: "/api/webhooks/wh_demo_shop_events",
      request: [{ method: "POST", headers: { "content-type": "application/json" }, body: PAYLOAD_1KB }],
    },
    baseline: {
      server: "sqlite-baseline",
      url: "/",
      request: [{ method: "POST", headers: { "content-type": "application/json" }, body: PAYLOAD_1KB }],
    },
  },
];

/**
 * With taskset and two or more CPUs, the load generator (this process) runs
 * on CPU 0 and every server on CPU 1, so neither side's throughput depends on
 * where the scheduler happens to put them (unpinned, runs on this 2-core
 * machine were bimodal).
 */
const PIN = availableParallelism() >= 2 && existsSync("/usr/bin/taskset");
if (PIN) execFileSync("taskset", ["-a", "-cp", "0", String(process.pid)], { stdio: "ignore" });
const serverCommand = (script: string): [string, string[]] =>
  PIN ? ["taskset", ["-c", "1", process.execPath, "--import", "tsx", script]] : [process.execPath, ["--import", "tsx", script]];

async function start(name: string, port: number, env: Record<string, string> = {}): Promise<ChildProcess> {
  const [command, args] = serverCommand(`bench/servers/${name}.ts`);
  const child = spawn(command, args, {
    env: { ...process.env, ...env, PORT: String(port) },
    stdio: ["ignore", "pipe", "inherit"],
  });
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${name} did not start`)), 30_000);
    child.stdout!.on("data", (d: Buffer) => {
      if (d.toString().includes("ready")) {
        clearTimeout(timer);
        resolve();
      }
    });
    child.on("exit", (code) => reject(new Error(`${name} exited with ${code}`)));
  });
  return child;
}

interface Measured {
  /** Requests per second. */
  rate: number;
  /** The server process's own CPU time (user + system) per request, in µs: steadier than req/s when the machine is noisy. */
  cpuMicros: number | null;
}

/** utime + stime of a process, in clock ticks (1/100 s), or null where /proc is missing. */
function cpuTicks(pid: number | undefined): number | null {
  if (pid === undefined || !existsSync(`/proc/${pid}/stat`)) return null;
  const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
  return Number(fields[11]) + Number(fields[12]);
}

async function measure(side: Side, port: number, env: Record<string, string> = {}): Promise<Measured> {
  const child = await start(side.server, port, { ...env, ...side.env });
  try {
    const url = `http://127.0.0.1:${port}${side.url}`;
    await autocannon({ url, connections: CONNECTIONS, duration: 1, requests: side.request }); // warm-up
    const before = cpuTicks(child.pid);
    const result = await autocannon({ url, connections: CONNECTIONS, duration: SECONDS, requests: side.request });
    const after = cpuTicks(child.pid);
    if (result.non2xx > 0) console.log(`  ! ${side.server}: ${result.non2xx} non-2xx responses`);
    const cpuMicros = before === null || after === null || result.requests.total === 0 ? null : ((after - before) * 10_000) / result.requests.total;
    return { rate: result.requests.average, cpuMicros };
  } finally {
    child.kill("SIGTERM");
    await new Promise((r) => child.once("exit", r));
  }
}

/**
 * Both servers at once on the same CPU, each driven by its own autocannon
 * run: the scheduler gives each half of the CPU, so the ratio of their rates
 * is the ratio of their CPU cost per request, and whatever else the machine
 * does at that moment slows both alike.
 */
async function measurePair(a: Side, portA: number, b: Side, portB: number, env: Record<string, string>): Promise<[Measured, Measured]> {
  const [childA, childB] = [await start(a.server, portA, { ...env, ...a.env }), await start(b.server, portB, { ...env, ...b.env })];
  const load = (side: Side, port: number, duration: number) =>
    autocannon({ url: `http://127.0.0.1:${port}${side.url}`, connections: CONNECTIONS, duration, requests: side.request });
  try {
    await Promise.all([load(a, portA, 1), load(b, portB, 1)]); // warm-up
    const before = [cpuTicks(childA.pid), cpuTicks(childB.pid)];
    const [ra, rb] = await Promise.all([load(a, portA, SECONDS), load(b, portB, SECONDS)]);
    const after = [cpuTicks(childA.pid), cpuTicks(childB.pid)];
    for (const [side, r] of [[a, ra], [b, rb]] as const) if (r.non2xx > 0) console.log(`  ! ${side.server}: ${r.non2xx} non-2xx responses`);
    const cpu = (i: number, total: number) => (before[i] === null || after[i] === null || total === 0 ? null : ((after[i]! - before[i]!) * 10_000) / total);
    return [
      { rate: ra.requests.average, cpuMicros: cpu(0, ra.requests.total) },
      { rate: rb.requests.average, cpuMicros: cpu(1, rb.requests.total) },
    ];
  } finally {
    for (const child of [childA, childB]) child.kill("SIGTERM");
    await Promise.all([childA, childB].map((child) => new Promise((r) => (child.exitCode === null ? child.once("exit", r) : r(null)))));
  }
}

const filters = process.argv.slice(2);
let port = 18_700;
for (const scenario of scenarios) {
  if (filters.length > 0 && !filters.some((f) => scenario.name.includes(f))) continue;
  const missing = [scenario.dataport.server, scenario.baseline.server].filter((s) => !existsSync(`bench/servers/${s}.ts`));
  if (missing.length > 0) {
    console.log(`- ${scenario.name}: skipped (no bench/servers/${missing.join(", ")}.ts)`);
    continue;
  }
  let env: Record<string, string> = {};
  if (scenario.prepare) {
    const probe = await start(scenario.dataport.server, ++port);
    env = await scenario.prepare(`http://127.0.0.1:${port}`);
    probe.kill("SIGTERM");
    await new Promise((r) => probe.once("exit", r));
  }
  const rounds: Array<{ baseline: Measured; dataport: Measured; ratio: number; cpuRatio: number | null }> = [];
  for (let round = 0; round < ROUNDS; round++) {
    const dataportSide = OVERRIDE ? { ...scenario.dataport, server: OVERRIDE } : scenario.dataport;
    const baselineSide = AB_DIST ? { ...scenario.dataport, env: { ...scenario.dataport.env, BENCH_DIST: AB_DIST } } : scenario.baseline;
    let baseline: Measured;
    let dataport: Measured;
    if (PAIRED) {
      [baseline, dataport] = await measurePair(baselineSide, ++port, dataportSide, ++port, env);
    } else {
      baseline = await measure(baselineSide, ++port, env);
      dataport = await measure(dataportSide, ++port, env);
    }
    const cpuRatio = baseline.cpuMicros !== null && dataport.cpuMicros ? baseline.cpuMicros / dataport.cpuMicros : null;
    rounds.push({ baseline, dataport, ratio: dataport.rate / baseline.rate, cpuRatio });
  }
  const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
  const ratio = median(rounds.map((r) => r.ratio));
  const cpuRatios = rounds.flatMap((r) => (r.cpuRatio === null ? [] : [r.cpuRatio]));
  console.log(`- ${scenario.name}`);
  for (const r of rounds) {
    const cpu = r.cpuRatio === null ? "" : `; CPU per request ${r.baseline.cpuMicros!.toFixed(1)} vs ${r.dataport.cpuMicros!.toFixed(1)} µs, ratio ${r.cpuRatio.toFixed(2)}x`;
    console.log(`    round: baseline ${r.baseline.rate.toFixed(0)} req/s, dataport ${r.dataport.rate.toFixed(0)} req/s, ratio ${r.ratio.toFixed(2)}x${cpu}`);
  }
  const cpuLine = cpuRatios.length > 0 ? `; by server CPU per request ${median(cpuRatios).toFixed(2)}x` : "";
  const verdict = AB_DIST ? `this build vs ${AB_DIST}` : `(goal >= ${scenario.goal}x) ${ratio >= scenario.goal ? "OK" : "BELOW GOAL"}`;
  console.log(`  median ratio ${ratio.toFixed(2)}x ${verdict}${cpuLine}`);
}

for (const script of ["bench/sqlite-reads.ts", "bench/bulk-upload.ts"]) {
  if (filters.length > 0 && !filters.some((f) => script.includes(f))) continue;
  if (!existsSync(script)) continue;
  const child = spawn(process.execPath, ["--import", "tsx", "--expose-gc", script], { stdio: "inherit" });
  await new Promise((r) => child.once("exit", r));
}
