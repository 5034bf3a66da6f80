/**
 * npm run bench — each scenario runs a Dataport server and a bare baseline
 * server as separate processes on 127.0.0.1, drives each with autocannon
 * from this process for BENCH_SECONDS (default 3) per round, alternating
 * BENCH_ROUNDS times (default 5), and prints the median ratio.
 *
 *   npm run bench                 # every scenario
 *   npm run bench -- me webhook   # scenarios whose name contains a word
 *   BENCH_DATAPORT=adapter-only npm run bench -- me:   # another server in Dataport's place (diagnosis)
 *   BENCH_DATAPORT=sqlite-read-recorded npm run bench -- rows-sqlite   # the bare read plus the records a read keeps
 *   BENCH_PAGE_MEMORY=0 npm run bench -- rows-sqlite   # Dataport with no remembered pages: every read reads its page
 * from the file
 *   npm run bench -- bulk-upload  # a 1,000,000-row CSV upload: rows/s and server peak RSS (bench/bulk-upload.ts)
 *   BENCH_AB=/tmp/dist-before npm run bench -- webhook-memory
 *       # A/B: Dataport built from another checkout's dist/ takes the baseline's
 *       # place, so the ratio is this build against that one (above 1: faster)
 *   npm run bench -- postgres     # the PostgreSQL scenarios (webhook-postgres, me-postgres, postgres-reads)
 *   npm run bench -- rowquery     # opt-in: row-query pages of a 1,000,000-row dataset on SQLite and PostgreSQL
 *   npm run bench -- export       # opt-in: 1,000,000-row CSV/NDJSON exports and the server's RSS growth
 * (bench/row-queries.ts)
 *   npm run bench -- aggregate    # opt-in: aggregates of a 1,000,000-row dataset on SQLite and PostgreSQL against bare
 * SQL and a download
 *
 * PostgreSQL scenarios run on the database BENCH_PG_URL (default
 * postgres://postgres@127.0.0.1:5432/dataport_bench, created when missing:
 * its own database, so pg_stat_database counts only the bench's commits),
 * each measured server in a schema of its own, dropped at the end. After the
 * paired rounds each side runs once more alone, and the database's
 * xact_commit before its start and after its exit (a backend flushes its
 * counters when it exits) gives the commits per request.
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { availableParallelism } from "node:os";
import autocannon from "autocannon";
import pg from "pg";
import { ensureDatabase, ROW_QUERY_SCENARIOS } from "./support.js";

const SECONDS = Number(process.env.BENCH_SECONDS ?? 3);
/**
 * Baseline and Dataport alternate this many times; the median of the per-round ratios is reported (this machine's
 * throughput drifts by ±25% run to run).
 */
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
  /**
   * Server processes sharing the load (and, on PostgreSQL, one schema); the connections are split between them. Default
   * 1.
   */
  instances?: number;
}

interface Scenario {
  name: string;
  goal: number;
  dataport: Side;
  baseline: Side;
  /** Run before measuring, e.g. to capture the bytes the baseline must answer. */
  prepare?: (url: string) => Promise<Record<string, string>>;
  /** Both sides use PostgreSQL: each server gets a schema, and commits per request are measured. */
  postgres?: boolean;
}

const scenarios: Scenario[] = [
  {
    name: "me: GET /api/v1/me, Node adapter vs bare node:http",
    goal: 0.7,
    dataport: {
      server: "me-dataport",
      url: "/api/v1/me",
      request: [{ method: "GET", headers: { authorization: `Bearer ${TOKEN}` } }],
    },
    // The baseline gets the same request (it ignores the Authorization header but parses it, as Dataport does).
    baseline: {
      server: "me-baseline",
      url: "/api/v1/me",
      request: [{ method: "GET", headers: { authorization: `Bearer ${TOKEN}` } }],
    },
    prepare: async (url) => ({
      BODY: await (await fetch(`${url}/api/v1/me`, { headers: { authorization: `Bearer ${TOKEN}` } })).text(),
    }),
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
  {
    name: "me-sqlite: GET /api/v1/me on SQLite vs bare node:http + SHA-256 of the token + one prepared better-sqlite3 SELECT",
    goal: 0.8,
    dataport: {
      server: "webhook-sqlite-dataport",
      url: "/api/v1/me",
      request: [{ method: "GET", headers: { authorization: `Bearer ${TOKEN}` } }],
    },
    baseline: {
      server: "sqlite-read-baseline",
      env: { BENCH_BASELINE: "me", TOKEN },
      url: "/api/v1/me",
      request: [{ method: "GET", headers: { authorization: `Bearer ${TOKEN}` } }],
    },
    prepare: async (url) => ({
      BODY: await (await fetch(`${url}/api/v1/me`, { headers: { authorization: `Bearer ${TOKEN}` } })).text(),
    }),
  },
  {
    name: "rows-sqlite: GET /api/v1/datasets/{id}/rows?maxRows=100 (a 240-row dataset) on SQLite vs bare node:http + one SELECT of 100 stored JSON texts",
    goal: 0.8,
    dataport: {
      server: "webhook-sqlite-dataport",
      url: "/api/v1/datasets/ds_orders/rows?maxRows=100",
      request: [{ method: "GET", headers: { authorization: `Bearer ${TOKEN}` } }],
    },
    baseline: {
      server: "sqlite-read-baseline",
      env: { BENCH_BASELINE: "rows", TOKEN },
      url: "/api/v1/datasets/ds_orders/rows?maxRows=100",
      request: [{ method: "GET", headers: { authorization: `Bearer ${TOKEN}` } }],
    },
    prepare: async (url) => ({
      BODY: await (
        await fetch(`${url}/api/v1/datasets/ds_orders/rows?maxRows=100`, {
          headers: { authorization: `Bearer ${TOKEN}` },
        })
      ).text(),
    }),
  },
  ...[1, 2].map((instances): Scenario => ({
    name: `webhook-postgres${instances === 1 ? "" : "-2i"}: POST 1 KB JSON on PostgreSQL (200 after commit), ${instances === 1 ? "one instance" : "two instances on one schema"} vs bare node:http + pg pool, one INSERT per request${instances === 1 ? "" : " (two servers)"}`,
    goal: 1.0,
    postgres: true,
    dataport: {
      server: "postgres-dataport",
      url: "/api/webhooks/wh_demo_shop_events",
      request: [{ method: "POST", headers: { "content-type": "application/json" }, body: PAYLOAD_1KB }],
      instances,
    },
    baseline: {
      server: "postgres-baseline",
      env: { BENCH_BASELINE: "insert" },
      url: "/",
      request: [{ method: "POST", headers: { "content-type": "application/json" }, body: PAYLOAD_1KB }],
      instances,
    },
  })),
  {
    name: "me-postgres: GET /api/v1/me on PostgreSQL vs bare node:http + pg pool, one SELECT per request",
    goal: 0.8,
    postgres: true,
    dataport: {
      server: "postgres-dataport",
      url: "/api/v1/me",
      request: [{ method: "GET", headers: { authorization: `Bearer ${TOKEN}` } }],
    },
    baseline: {
      server: "postgres-baseline",
      env: { BENCH_BASELINE: "select" },
      url: "/api/v1/me",
      request: [{ method: "GET", headers: { authorization: `Bearer ${TOKEN}` } }],
    },
    prepare: async (url) => ({
      BODY: await (await fetch(`${url}/api/v1/me`, { headers: { authorization: `Bearer ${TOKEN}` } })).text(),
    }),
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
  PIN
    ? ["taskset", ["-c", "1", process.execPath, "--import", "tsx", script]]
    : [process.execPath, ["--import", "tsx", script]];

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
  /**
   * The server processes' own CPU time (user + system) per request, in µs: steadier than req/s when the machine is
   * noisy.
   */
  cpuMicros: number | null;
}

/** utime + stime of a process, in clock ticks (1/100 s), or null where /proc is missing. */
function cpuTicks(pid: number | undefined): number | null {
  if (pid === undefined || !existsSync(`/proc/${pid}/stat`)) return null;
  const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
  return Number(fields[11]) + Number(fields[12]);
}

/** A side's server processes (one per instance) on consecutive ports. */
interface Running {
  side: Side;
  children: ChildProcess[];
  ports: number[];
}

/** PostgreSQL: every started side gets a fresh schema, shared by its instances. */
const PG_URL = process.env.BENCH_PG_URL ?? "postgres://postgres@127.0.0.1:5432/dataport_bench";
const pgSchemas: string[] = [];
function sideEnv(scenario: Scenario): Record<string, string> {
  if (!scenario.postgres) return {};
  const schema = `bench_${process.pid}_${pgSchemas.length + 1}`;
  pgSchemas.push(schema);
  return { BENCH_PG_URL: PG_URL, BENCH_PG_SCHEMA: schema };
}

let port = 18_700;
async function startSide(side: Side, env: Record<string, string>): Promise<Running> {
  const children: ChildProcess[] = [];
  const ports: number[] = [];
  try {
    // One after the other: on a new schema the first migrates and seeds.
    for (let i = 0; i < (side.instances ?? 1); i++) {
      ports.push(++port);
      children.push(await start(side.server, port, { ...env, ...side.env }));
    }
  } catch (error) {
    await stopSide({ side, children, ports });
    throw error;
  }
  return { side, children, ports };
}

async function stopSide(running: Running): Promise<void> {
  for (const child of running.children) child.kill("SIGTERM");
  await Promise.all(
    running.children.map((child) => new Promise((r) => (child.exitCode === null ? child.once("exit", r) : r(null)))),
  );
}

/** The side's instances driven at once, CONNECTIONS split between them; rates and totals summed. */
async function load(running: Running, duration: number): Promise<{ rate: number; total: number; non2xx: number }> {
  const { side, ports } = running;
  const connections = Math.max(1, Math.round(CONNECTIONS / ports.length));
  const results = await Promise.all(
    ports.map((p) =>
      autocannon({ url: `http://127.0.0.1:${p}${side.url}`, connections, duration, requests: side.request }),
    ),
  );
  return {
    rate: results.reduce((sum, r) => sum + r.requests.average, 0),
    total: results.reduce((sum, r) => sum + r.requests.total, 0),
    non2xx: results.reduce((sum, r) => sum + r.non2xx, 0),
  };
}

function sideTicks(running: Running): number | null {
  let sum = 0;
  for (const child of running.children) {
    const ticks = cpuTicks(child.pid);
    if (ticks === null) return null;
    sum += ticks;
  }
  return sum;
}

async function measure(side: Side, env: Record<string, string>): Promise<Measured> {
  const running = await startSide(side, env);
  try {
    await load(running, 1); // warm-up
    const before = sideTicks(running);
    const result = await load(running, SECONDS);
    const after = sideTicks(running);
    if (result.non2xx > 0) console.log(`  ! ${side.server}: ${result.non2xx} non-2xx responses`);
    const cpuMicros =
      before === null || after === null || result.total === 0 ? null : ((after - before) * 10_000) / result.total;
    return { rate: result.rate, cpuMicros };
  } finally {
    await stopSide(running);
  }
}

/**
 * Both servers at once on the same CPU, each driven by its own autocannon
 * run: the scheduler gives each half of the CPU, so the ratio of their rates
 * is the ratio of their CPU cost per request, and whatever else the machine
 * does at that moment slows both alike.
 */
async function measurePair(
  a: Side,
  envA: Record<string, string>,
  b: Side,
  envB: Record<string, string>,
): Promise<[Measured, Measured]> {
  const ra = await startSide(a, envA);
  let rb: Running;
  try {
    rb = await startSide(b, envB);
  } catch (error) {
    await stopSide(ra);
    throw error;
  }
  try {
    await Promise.all([load(ra, 1), load(rb, 1)]); // warm-up
    const before = [sideTicks(ra), sideTicks(rb)];
    const [la, lb] = await Promise.all([load(ra, SECONDS), load(rb, SECONDS)]);
    const after = [sideTicks(ra), sideTicks(rb)];
    for (const [side, r] of [
      [a, la],
      [b, lb],
    ] as const)
      if (r.non2xx > 0) console.log(`  ! ${side.server}: ${r.non2xx} non-2xx responses`);
    const cpu = (i: number, total: number) =>
      before[i] === null || after[i] === null || total === 0 ? null : ((after[i]! - before[i]!) * 10_000) / total;
    return [
      { rate: la.rate, cpuMicros: cpu(0, la.total) },
      { rate: lb.rate, cpuMicros: cpu(1, lb.total) },
    ];
  } finally {
    await Promise.all([stopSide(ra), stopSide(rb)]);
  }
}

/** The bench database's committed transactions so far (read on a connection of its own, which then exits). */
async function pgCommits(): Promise<number> {
  const client = new pg.Client({ connectionString: PG_URL });
  await client.connect();
  try {
    const { rows } = await client.query<{ n: string }>(
      "select xact_commit as n from pg_stat_database where datname = current_database()",
    );
    return Number(rows[0]!.n);
  } finally {
    await client.end();
  }
}

/** The side alone: commits of the bench database per request, from before its start to after its exit. */
async function commitsPerRequest(side: Side, env: Record<string, string>): Promise<number> {
  const before = await pgCommits();
  const running = await startSide(side, env);
  let total = 0;
  try {
    total += (await load(running, 1)).total;
    total += (await load(running, SECONDS)).total;
  } finally {
    await stopSide(running);
  }
  // Backends flush their counters as they exit, just after the server closes its pool.
  await new Promise((resolve) => setTimeout(resolve, 1000));
  return ((await pgCommits()) - before) / total;
}

async function dropPostgresSchemas(): Promise<void> {
  if (pgSchemas.length === 0) return;
  const client = new pg.Client({ connectionString: PG_URL });
  await client.connect();
  try {
    for (const schema of pgSchemas.splice(0)) await client.query(`drop schema if exists "${schema}" cascade`);
  } finally {
    await client.end();
  }
}

const filters = process.argv.slice(2);
const selected = scenarios.filter((scenario) => filters.length === 0 || filters.some((f) => scenario.name.includes(f)));
if (selected.some((scenario) => scenario.postgres)) await ensureDatabase(PG_URL);
try {
  for (const scenario of selected) await run(scenario);
} finally {
  await dropPostgresSchemas();
}

async function run(scenario: Scenario): Promise<void> {
  const missing = [scenario.dataport.server, scenario.baseline.server].filter(
    (s) => !existsSync(`bench/servers/${s}.ts`),
  );
  if (missing.length > 0) {
    console.log(`- ${scenario.name}: skipped (no bench/servers/${missing.join(", ")}.ts)`);
    return;
  }
  let env: Record<string, string> = {};
  if (scenario.prepare) {
    const probe = await startSide({ ...scenario.dataport, instances: 1 }, sideEnv(scenario));
    env = await scenario.prepare(`http://127.0.0.1:${probe.ports[0]}`);
    await stopSide(probe);
  }
  // A diagnosis server in Dataport's place gets what the baseline is told too (BENCH_BASELINE, TOKEN).
  const dataportSide = OVERRIDE
    ? { ...scenario.dataport, server: OVERRIDE, env: { ...scenario.baseline.env, ...scenario.dataport.env } }
    : scenario.dataport;
  const baselineSide = AB_DIST
    ? { ...scenario.dataport, env: { ...scenario.dataport.env, BENCH_DIST: AB_DIST } }
    : scenario.baseline;
  const rounds: Array<{ baseline: Measured; dataport: Measured; ratio: number; cpuRatio: number | null }> = [];
  for (let round = 0; round < ROUNDS; round++) {
    let baseline: Measured;
    let dataport: Measured;
    if (PAIRED) {
      [baseline, dataport] = await measurePair(baselineSide, { ...env, ...sideEnv(scenario) }, dataportSide, {
        ...env,
        ...sideEnv(scenario),
      });
    } else {
      baseline = await measure(baselineSide, { ...env, ...sideEnv(scenario) });
      dataport = await measure(dataportSide, { ...env, ...sideEnv(scenario) });
    }
    const cpuRatio = baseline.cpuMicros !== null && dataport.cpuMicros ? baseline.cpuMicros / dataport.cpuMicros : null;
    rounds.push({ baseline, dataport, ratio: dataport.rate / baseline.rate, cpuRatio });
  }
  const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
  const ratio = median(rounds.map((r) => r.ratio));
  const cpuRatios = rounds.flatMap((r) => (r.cpuRatio === null ? [] : [r.cpuRatio]));
  console.log(`- ${scenario.name}`);
  for (const r of rounds) {
    const cpu =
      r.cpuRatio === null
        ? ""
        : `; CPU per request ${r.baseline.cpuMicros!.toFixed(1)} vs ${r.dataport.cpuMicros!.toFixed(1)} µs, ratio ${r.cpuRatio.toFixed(2)}x`;
    console.log(
      `    round: baseline ${r.baseline.rate.toFixed(0)} req/s, dataport ${r.dataport.rate.toFixed(0)} req/s, ratio ${r.ratio.toFixed(2)}x${cpu}`,
    );
  }
  const cpuLine = cpuRatios.length > 0 ? `; by server CPU per request ${median(cpuRatios).toFixed(2)}x` : "";
  const verdict = AB_DIST
    ? `this build vs ${AB_DIST}`
    : `(goal >= ${scenario.goal}x) ${ratio >= scenario.goal ? "OK" : "BELOW GOAL"}`;
  console.log(`  median ratio ${ratio.toFixed(2)}x ${verdict}${cpuLine}`);
  if (scenario.postgres) {
    const commits = async (side: Side) => (await commitsPerRequest(side, { ...env, ...sideEnv(scenario) })).toFixed(2);
    const sides = AB_DIST
      ? `${AB_DIST} ${await commits(baselineSide)}, this build`
      : `baseline ${await commits(baselineSide)}, dataport`;
    console.log(
      `  PostgreSQL commits per request (each side alone, ${CONNECTIONS} connections): ${sides} ${await commits(dataportSide)}`,
    );
  }
}

// Opt-in scenarios (ROW_QUERY_SCENARIOS, a 1,000,000-row dataset each; see bench/row-queries.ts): run only when
// a word given is a prefix of their name (`rowquery`, `export`, `rowquery-sqlite`…), never in a run without names.
const rowQueryNames = ROW_QUERY_SCENARIOS.filter((name) => filters.some((f) => name.startsWith(f)));
if (rowQueryNames.length > 0) {
  const child = spawn(process.execPath, ["--import", "tsx", "bench/row-queries.ts", ...rowQueryNames], {
    stdio: "inherit",
  });
  await new Promise((r) => child.once("exit", r));
}

for (const script of ["bench/sqlite-reads.ts", "bench/postgres-reads.ts", "bench/bulk-upload.ts"]) {
  if (filters.length > 0 && !filters.some((f) => script.includes(f))) continue;
  if (!existsSync(script)) continue;
  const child = spawn(process.execPath, ["--import", "tsx", "--expose-gc", script], { stdio: "inherit" });
  await new Promise((r) => child.once("exit", r));
}

/**
 * Opt-in: the SQLite store's calls on each driver the machine has
 * (bench/sqlite-drivers.ts), run one after the other, each runtime's
 * medians and their ratio to better-sqlite3's (below 1: faster).
 *
 *   npm run bench -- sqlite-drivers
 */
if (filters.includes("sqlite-drivers")) {
  const runs: Array<[string, string, string[], Record<string, string>]> = [
    [
      "node 20, better-sqlite3",
      process.execPath,
      ["--import", "tsx", "bench/sqlite-drivers.ts"],
      { DATAPORT_SQLITE_DRIVER: "better-sqlite3" },
    ],
    [
      "node 22, node:sqlite",
      "node_modules/node/bin/node",
      ["--import", "tsx", "bench/sqlite-drivers.ts"],
      { DATAPORT_SQLITE_DRIVER: "node:sqlite" },
    ],
    ["bun, bun:sqlite", "node_modules/.bin/bun", ["bench/sqlite-drivers.ts"], {}],
  ];
  console.log("- sqlite-drivers: the SQLite store's calls in process on each driver (median µs per call)");
  let reference: Record<string, number> | null = null;
  for (const [name, runtime, args, env] of runs) {
    if (!existsSync(runtime)) {
      console.log(`    ${name}: not installed (${runtime})`);
      continue;
    }
    const out = await new Promise<string>((resolve) => {
      const child = spawn(runtime, args, { env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "inherit"] });
      let text = "";
      child.stdout!.on("data", (d: Buffer) => (text += d.toString()));
      child.once("exit", () => resolve(text));
    });
    const line = out.trim().split("\n").at(-1) ?? "";
    let result: Record<string, number> | null = null;
    try {
      result = JSON.parse(line) as Record<string, number>;
    } catch {
      console.log(`    ${name}: no result (${line.slice(0, 200)})`);
      continue;
    }
    reference ??= result;
    const cell = (key: string) => `${result![key]} µs (${(result![key]! / reference![key]!).toFixed(2)}x)`;
    console.log(
      `    ${name.padEnd(26)} 100-row page ${cell("page100Us")}, dataset record ${cell("datasetRecordUs")}, webhook row ${cell("ingestRowUs")}`,
    );
  }
}
