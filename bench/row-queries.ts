/**
 * Row queries at scale (issue #29): a 1,000,000-row dataset with declared
 * columns, read through the Node adapter by a server process running dist/.
 *
 *   rowquery-sqlite, rowquery-postgres: latency (median and p95 of READS
 *     requests, default 20, the cases interleaved) of a 100-row page:
 *       first page; a selective `where` (1 row in 1,000) on a string and on a
 *       datetime column; a cursor page 90% deep in stored order; and sorted
 *       by `-weightKg`, its first page and a cursor page 90% deep;
 *     with the ratios deep / first ("a deep cursor page costs about what the
 *     first page costs", row-queries.md).
 *   export-sqlite, export-postgres, export-memory: the whole dataset as
 *     `format=csv` and as `format=ndjson`, drained by this process: rows
 *     checked (count, first and last line), time, and the server's RSS
 *     growth over its idle RSS while it streams (goal < 150 MB), with the
 *     heap at the peak and after a full GC (what the export left behind).
 *   aggregate-sqlite, aggregate-postgres (issue #39): `groupBy=fragile,
 *     month(shippedAt)&metrics=count,sum(weightKg),avg(weightKg)` over the
 *     whole dataset through the API: its first run (each one a question not
 *     asked before, so it scans), against the bare SQL computing the same
 *     groups over the same stored rows in this process (goal ≤ 1.5×) and
 *     against downloading the rows as NDJSON (goal ≤ 0.25×); the same
 *     question again on the unchanged dataset (goal ≤ 0.05× of a first run);
 *     and the server's RSS growth over a first run (goal < 50 MB).
 *   export-table-sqlite: the same for an input table holding the same rows,
 *     and the time of a sorted download of the TABLE_SORTED heaviest rows
 *     (default 50,000); with BENCH_AB=<other dist/> also on that build.
 *
 *   npm run bench -- rowquery          # both rowquery scenarios (a name prefix selects them)
 *   npm run bench -- export-sqlite     # one scenario
 *   ROWS=100000 npx tsx bench/row-queries.ts rowquery-sqlite   # a smaller dataset (its own cache entry)
 *
 * Opt-in: a run without names (the default `npm run bench`) does not run
 * these, nor does a word that is not a prefix of their names (`sqlite`).
 *
 * The dataset is loaded as a host loads one: `admin.putDataset` declaring
 * its columns, then `admin.writeDatasetRows` (the bulk upload path). Loading
 * takes minutes, so it is built once and kept: a SQLite file under
 * BENCH_CACHE (default <tmpdir>/dataport-bench-cache), copied for each run
 * so reads never change it, and a PostgreSQL schema `bench_rq_<key>` of
 * BENCH_PG_URL that is kept across runs. The key is DATA_VERSION, ROWS and a
 * hash of the store's sources (src/<store>/, src/domain/row-query*.ts): a
 * change to how the store lays out or indexes rows builds a fresh copy and
 * removes the stale ones of that size. BENCH_REBUILD=1 forces a rebuild. The memory
 * store loads the rows in its server at every run.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { createHash } from "node:crypto";
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
} from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import pg from "pg";
import { ensureDatabase, processMemory, resetPeak, ROW_QUERY_SCENARIOS } from "./support.js";
import type { Row } from "../src/domain/model.js";
import {
  built,
  type Dataport,
  type MemoryEntry,
  type NodeAdapter,
  type PostgresEntry,
  type SqliteEntry,
} from "./servers/built.js";

/** Bump when the generated rows or the dataset's declaration change: every cached copy is rebuilt. */
const DATA_VERSION = 2;
const ROWS = Number(process.env.ROWS ?? 1_000_000);
const READS = Number(process.env.READS ?? 20);
const PAGE = 100;
const GOAL_MB = 150;
const PG_URL = process.env.BENCH_PG_URL ?? "postgres://postgres@127.0.0.1:5432/dataport_bench";
const CACHE_DIR = process.env.BENCH_CACHE ?? join(tmpdir(), "dataport-bench-cache");
const TOKEN = "dp_demo_full_access_0000000000001";
const DATASET = "ds_shipments";
/** The same rows as an input table (SQLite only). */
const TABLE = "tbl_shipments";
/**
 * Rows of the sorted table download (each batch of a sorted download sorts the table until per-column indexes exist).
 */
const TABLE_SORTED = Number(process.env.TABLE_SORTED ?? 50_000);
const LANES = 1000;
const COLUMNS = [
  { name: "shipment", type: "string" },
  { name: "lane", type: "string" },
  { name: "weightKg", type: "number" },
  { name: "shippedAt", type: "datetime" },
  { name: "fragile", type: "boolean" },
  { name: "note", type: "string" },
] as const;
const DATASET_INPUT = {
  teamId: "team_ops",
  name: "Shipments",
  type: "upload",
  connectionId: null,
  source: null,
  columns: COLUMNS.map((c) => ({ ...c })),
} as const;
const FIXTURE = new URL("../examples/demo/space.json", import.meta.url);

type ScenarioName = (typeof ROW_QUERY_SCENARIOS)[number];
type StoreKind = "sqlite" | "postgres" | "memory";

/**
 * Row i of the dataset. `weightKg` and `shippedAt` are permutations of i
 * (multipliers prime to ROWS), so sorting by them is not stored order.
 */
function rowAt(i: number): Row {
  const lane = `L-${String(i % LANES).padStart(4, "0")}`;
  const weight = ((i * 7919) % ROWS) / 10;
  const shipped = new Date(Date.UTC(2025, 0, 1) + ((i * 104_729) % ROWS) * 30_000).toISOString();
  return {
    shipment: `SH-${i}`,
    lane,
    weightKg: weight,
    shippedAt: shipped,
    fragile: i % 5 === 0,
    note: `parcel ${i} via ${lane}`,
  };
}

async function* generatedRows(count: number): AsyncGenerator<Row> {
  for (let i = 0; i < count; i++) yield rowAt(i);
}

/**
 * The demo fixture with the bench dataset, empty, in the full-access key's
 * allowlist (the fixture is how a key with a known token is made), and with
 * `withTable` the input table holding the same ROWS rows (a fixture is how
 * a host loads a table's rows in bulk).
 */
function fixtureJson(withTable: boolean): unknown {
  const fixture = JSON.parse(readFileSync(FIXTURE, "utf8")) as {
    apiKeys: Array<{ token: string; allowlist: { datasets: string[]; tables: string[] } }>;
    datasets: unknown[];
    tables: unknown[];
  };
  const key = fixture.apiKeys.find((k) => k.token === TOKEN)!;
  key.allowlist.datasets.push(DATASET);
  fixture.datasets.push({ ...DATASET_INPUT, id: DATASET, rows: [], lastRefreshedAt: null, updatedAt: "-P1D" });
  if (withTable) {
    key.allowlist.tables.push(TABLE);
    const stamp = "2026-10-01T00:00:00.000Z";
    const rows = Array.from({ length: ROWS }, (_, i) => ({
      _id: `row_${i}`,
      ...rowAt(i),
      _createdAt: stamp,
      _updatedAt: stamp,
    }));
    fixture.tables.push({
      id: TABLE,
      teamId: "team_ops",
      name: "Shipments table",
      columns: DATASET_INPUT.columns,
      rows,
      updatedAt: stamp,
    });
  }
  return fixture;
}

type Storage =
  | Awaited<ReturnType<PostgresEntry["createPostgresStorage"]>>
  | ReturnType<SqliteEntry["createSqliteStorage"]>
  | ReturnType<MemoryEntry["createMemoryStorage"]>;

/** Seed the fixture, declare the dataset and write ROWS rows through the admin functions (as a host does). */
async function load(storage: Storage, withTable = false): Promise<void> {
  const { createDataApi, createAdmin, parseFixture } = await built<Dataport>("index.js");
  const seeding = performance.now();
  await storage.seed(parseFixture(fixtureJson(withTable)));
  if (withTable)
    console.log(
      `    seeded the ${ROWS.toLocaleString("en-US")}-row input table in ${((performance.now() - seeding) / 1000).toFixed(1)} s`,
    );
  const admin = createAdmin(createDataApi({ storage }));
  await admin.putDataset(DATASET, DATASET_INPUT);
  const started = performance.now();
  const stored = await admin.writeDatasetRows(DATASET, "replace", generatedRows(ROWS));
  if (stored.rowCount !== ROWS) throw new Error(`loaded ${stored.rowCount} rows, expected ${ROWS}`);
  console.log(
    `    loaded ${ROWS.toLocaleString("en-US")} rows in ${((performance.now() - started) / 1000).toFixed(1)} s`,
  );
}

/** What decides a cached copy: the data and the store's sources. */
function cacheKey(kind: "sqlite" | "postgres"): string {
  const hash = createHash("sha256").update(`v${DATA_VERSION} rows ${ROWS}\n`);
  const sources = [
    ...readdirSync(`src/${kind}`)
      .filter((f) => f.endsWith(".ts"))
      .map((f) => `src/${kind}/${f}`),
    ...readdirSync("src/domain")
      .filter((f) => f.startsWith("row-query"))
      .map((f) => `src/domain/${f}`),
  ].sort();
  for (const file of sources) hash.update(file).update(readFileSync(file));
  return hash.digest("hex").slice(0, 12);
}

/** The cached SQLite file, built when missing; older copies are removed. */
async function sqliteCache(): Promise<string> {
  mkdirSync(CACHE_DIR, { recursive: true });
  const name = `rowquery-${cacheKey("sqlite")}-${ROWS}.sqlite`;
  const path = join(CACHE_DIR, name);
  // Copies of this size built from other sources are stale; other sizes (ROWS) are kept.
  for (const file of readdirSync(CACHE_DIR))
    if (file.startsWith("rowquery-") && file.includes(`-${ROWS}.sqlite`) && !file.startsWith(name))
      rmSync(join(CACHE_DIR, file), { force: true });
  if (existsSync(path) && process.env.BENCH_REBUILD !== "1") {
    console.log(`    reusing ${path}`);
    return path;
  }
  console.log(`    building ${path}`);
  const building = `${path}.building`;
  for (const suffix of ["", "-wal", "-shm"]) rmSync(`${building}${suffix}`, { force: true });
  const { createSqliteStorage } = await built<SqliteEntry>("sqlite/index.js");
  const storage = createSqliteStorage({ path: building });
  await load(storage, true);
  storage.db.pragma("wal_checkpoint(TRUNCATE)");
  await storage.close();
  renameSync(building, path);
  return path;
}

/** The cached PostgreSQL schema, built when missing or incomplete; older `bench_rq_` schemas are dropped. */
async function postgresCache(): Promise<string> {
  await ensureDatabase(PG_URL);
  const schema = `bench_rq_${cacheKey("postgres")}_${ROWS}`;
  const client = new pg.Client({ connectionString: PG_URL });
  await client.connect();
  try {
    const stale = await client.query<{ name: string }>(
      "select nspname as name from pg_namespace where nspname ~ $1 and nspname <> all($2)",
      [`^bench_rq_[0-9a-f]+_${ROWS}(_done)?$`, [schema, `${schema}_done`]],
    );
    for (const { name } of stale.rows) await client.query(`drop schema "${name}" cascade`);
    const done = await client.query("select 1 from pg_namespace where nspname = $1", [`${schema}_done`]);
    if (done.rowCount === 1 && process.env.BENCH_REBUILD !== "1") {
      console.log(`    reusing schema ${schema}`);
      return schema;
    }
    console.log(`    building schema ${schema}`);
    await client.query(`drop schema if exists "${schema}" cascade`);
    await client.query(`drop schema if exists "${schema}_done" cascade`);
  } finally {
    await client.end();
  }
  const { createPostgresStorage } = await built<PostgresEntry>("postgres/index.js");
  const storage = await createPostgresStorage({ connectionString: PG_URL, schema, callTimeoutMs: 0 });
  try {
    await load(storage);
    await storage.db.pool.query("analyze");
  } finally {
    await storage.close();
  }
  // An empty schema marks the copy complete (a build interrupted halfway leaves none).
  const marker = new pg.Client({ connectionString: PG_URL });
  await marker.connect();
  await marker.query(`create schema "${schema}_done"`);
  await marker.end();
  return schema;
}

/** A server on a copy of the SQLite cache, the PostgreSQL schema, or a memory store it loads itself. */
interface Server {
  /** The dataset's rows URL. */
  base: string;
  /** The SQLite file it serves, or the PostgreSQL schema. */
  file?: string;
  schema?: string;
  origin: string;
  child: ChildProcess;
  cleanup: () => void;
}

/** `dist`: another build's dist/ (BENCH_AB) in this one's place. */
async function serverFor(kind: StoreKind, dist?: string): Promise<Server> {
  let arg: string;
  let cleanup = () => {};
  if (kind === "sqlite") {
    const dir = mkdtempSync(join(tmpdir(), "dataport-bench-rq-"));
    arg = join(dir, "run.sqlite");
    copyFileSync(await sqliteCache(), arg);
    cleanup = () => rmSync(dir, { recursive: true, force: true });
  } else if (kind === "postgres") {
    arg = await postgresCache();
  } else {
    arg = "memory";
  }
  const child = spawn(
    process.execPath,
    ["--expose-gc", "--import", "tsx", "bench/row-queries.ts", "--serve", kind, arg],
    {
      stdio: ["ignore", "pipe", "inherit"],
      env: dist ? { ...process.env, BENCH_DIST: dist } : process.env,
    },
  );
  const port = await new Promise<number>((resolve, reject) => {
    child.stdout!.on("data", (d: Buffer) => {
      const text = d.toString();
      process.stdout.write(text.replace(/^ready \d+\n?/m, ""));
      const ready = /ready (\d+)/.exec(text);
      if (ready) resolve(Number(ready[1]));
    });
    child.on("exit", (code) => reject(new Error(`the ${kind} server exited with ${code}`)));
  });
  const origin = `http://127.0.0.1:${port}`;
  const where = kind === "sqlite" ? { file: arg } : kind === "postgres" ? { schema: arg } : {};
  return { base: `${origin}/api/v1/datasets/${DATASET}/rows`, origin, child, cleanup, ...where };
}

async function stop(server: { child: ChildProcess; cleanup: () => void }): Promise<void> {
  server.child.kill("SIGTERM");
  await new Promise((r) => (server.child.exitCode === null ? server.child.once("exit", r) : r(null)));
  server.cleanup();
}

async function getJson(
  url: string,
): Promise<{ data: Row[]; metadata: { totalRows: number; nextCursor: string | null } }> {
  const res = await fetch(url, { headers: { authorization: `Bearer ${TOKEN}` } });
  if (res.status !== 200) throw new Error(`${url}: ${res.status} ${(await res.text()).slice(0, 300)}`);
  return (await res.json()) as { data: Row[]; metadata: { totalRows: number; nextCursor: string | null } };
}

const q = (params: Record<string, string | number>) =>
  `?${new URLSearchParams(Object.entries(params).map(([k, v]) => [k, String(v)]))}`;

/**
 * The cursor that starts a page at `position` of the read `params` names (asked once with an offset, which may be
 * slow).
 */
async function cursorAt(base: string, params: Record<string, string>, position: number): Promise<string> {
  const page = await getJson(`${base}${q({ ...params, maxRows: 1, offset: position - 1 })}`);
  if (!page.metadata.nextCursor) throw new Error(`no cursor at ${position}`);
  return page.metadata.nextCursor;
}

interface Case {
  name: string;
  url: string;
  /** The first row the page must start with (checked once). */
  check?: (rows: Row[], total: number) => string | null;
}

async function rowQueryScenario(kind: "sqlite" | "postgres"): Promise<void> {
  console.log(
    `- rowquery-${kind}: ${PAGE}-row pages of a ${ROWS.toLocaleString("en-US")}-row dataset with declared columns on ${kind === "sqlite" ? "SQLite" : "PostgreSQL"}, through the Node adapter`,
  );
  const server = await serverFor(kind);
  try {
    const { base } = server;
    const deep = Math.floor(ROWS * 0.9);
    const lane = "L-0042";
    const since = rowAt(Math.floor(ROWS / 2)).shippedAt as string;
    const until = new Date(Date.parse(since) + (ROWS / 1000) * 30_000).toISOString();
    const setup = performance.now();
    const deepCursor = await cursorAt(base, {}, deep);
    const sortedCursor = await cursorAt(base, { sort: "-weightKg" }, deep);
    console.log(`    cursors 90% deep made (by offset, once) in ${((performance.now() - setup) / 1000).toFixed(1)} s`);
    const laneWhere = JSON.stringify({ lane: { eq: lane } });
    const rangeWhere = JSON.stringify({ shippedAt: { gte: since, lt: until } });
    const cases: Case[] = [
      {
        name: "first page",
        url: q({ maxRows: PAGE }),
        check: (r, t) => (r[0]?.shipment === "SH-0" && t === ROWS ? null : `starts ${r[0]?.shipment}, total ${t}`),
      },
      {
        name: `where lane eq (1 in ${LANES}), first page`,
        url: q({ maxRows: PAGE, where: laneWhere }),
        check: (r, t) => (r.every((x) => x.lane === lane) && t === ROWS / LANES ? null : `total ${t}`),
      },
      {
        name: "where shippedAt range (1 in 1,000), first page",
        url: q({ maxRows: PAGE, where: rangeWhere }),
        check: (_r, t) => (t === ROWS / 1000 ? null : `total ${t}`),
      },
      {
        name: "cursor 90% deep, stored order",
        url: q({ maxRows: PAGE, cursor: deepCursor }),
        check: (r) => (r[0]?.shipment === `SH-${deep}` ? null : `starts ${r[0]?.shipment}`),
      },
      {
        name: "sort=-weightKg, first page",
        url: q({ maxRows: PAGE, sort: "-weightKg" }),
        check: (r) => (r[0]?.weightKg === (ROWS - 1) / 10 ? null : `starts ${r[0]?.weightKg}`),
      },
      {
        name: "sort=-weightKg, cursor 90% deep",
        url: q({ maxRows: PAGE, sort: "-weightKg", cursor: sortedCursor }),
        check: (r) => (r[0]?.weightKg === (ROWS - 1 - deep) / 10 ? null : `starts ${r[0]?.weightKg}`),
      },
    ];
    for (const c of cases) {
      const page = await getJson(`${base}${c.url}`);
      const problem =
        c.check?.(page.data, page.metadata.totalRows) ??
        (page.data.length === Math.min(PAGE, page.metadata.totalRows) ? null : `${page.data.length} rows`);
      if (problem) throw new Error(`${c.name}: unexpected page (${problem})`);
    }
    const times = new Map(cases.map((c) => [c.name, [] as number[]]));
    for (let round = 0; round < READS + 2; round++) {
      // Rotated each round, so drift over the run hits every case alike; two warm-up rounds are not counted.
      for (let k = 0; k < cases.length; k++) {
        const c = cases[(k + round) % cases.length]!;
        const started = performance.now();
        await getJson(`${base}${c.url}`);
        if (round >= 2) times.get(c.name)!.push(performance.now() - started);
      }
    }
    const stat = (name: string) => ({ median: quantile(times.get(name)!, 0.5), p95: quantile(times.get(name)!, 0.95) });
    for (const c of cases) {
      const { median, p95 } = stat(c.name);
      console.log(`    ${c.name.padEnd(48)} median ${fmt(median)} ms, p95 ${fmt(p95)} ms`);
    }
    const ratio = (a: string, b: string) => `${(stat(a).median / stat(b).median).toFixed(2)}x`;
    console.log(
      `    deep / first (medians): stored order ${ratio("cursor 90% deep, stored order", "first page")}, sorted ${ratio("sort=-weightKg, cursor 90% deep", "sort=-weightKg, first page")}; sorted first / first ${ratio("sort=-weightKg, first page", "first page")}; where lane / first ${ratio(cases[1]!.name, "first page")}`,
    );
  } finally {
    await stop(server);
  }
}

async function exportScenario(kind: StoreKind): Promise<void> {
  const label = { sqlite: "SQLite", postgres: "PostgreSQL", memory: "the memory store" }[kind];
  console.log(
    `- export-${kind}: the whole ${ROWS.toLocaleString("en-US")}-row dataset as CSV and NDJSON on ${label}, server RSS growth while it streams (goal < ${GOAL_MB} MB)`,
  );
  // A fresh server for each format, so neither export's growth hides behind the other's.
  for (const format of ["csv", "ndjson"] as const) {
    const server = await serverFor(kind);
    try {
      await measureExport(
        server,
        `/api/v1/datasets/${DATASET}/rows`,
        format,
        format === "csv" ? "SH-0,L-0000," : '{"shipment":"SH-0",',
      );
    } finally {
      await stop(server);
    }
  }
}

/**
 * The input table (same rows, same declared columns) on SQLite: whole downloads, and a sorted one of the TABLE_SORTED
 * heaviest rows.
 */
async function exportTableScenario(): Promise<void> {
  console.log(
    `- export-table-sqlite: the whole ${ROWS.toLocaleString("en-US")}-row input table as CSV and NDJSON on SQLite, server RSS growth while it streams (goal < ${GOAL_MB} MB)`,
  );
  const path = `/api/v1/tables/${TABLE}/rows`;
  for (const format of ["csv", "ndjson"] as const) {
    const server = await serverFor("sqlite");
    try {
      await measureExport(
        server,
        path,
        format,
        format === "csv" ? "row_0,SH-0,L-0000," : '{"_id":"row_0","shipment":"SH-0",',
      );
    } finally {
      await stop(server);
    }
  }
  const sorted = Math.min(TABLE_SORTED, ROWS);
  const builds: Array<[string, string | undefined]> = [["this build", undefined]];
  if (process.env.BENCH_AB) builds.push([process.env.BENCH_AB, process.env.BENCH_AB]);
  const seconds: number[] = [];
  for (const [name, dist] of builds) {
    const server = await serverFor("sqlite", dist);
    try {
      const started = performance.now();
      // The heaviest `sorted` rows (weights are i / 10 for every i below ROWS), a download having no limit above 1,000.
      const where = JSON.stringify({ weightKg: { gte: (ROWS - sorted) / 10 } });
      const got = await download(`${server.origin}${path}${q({ format: "csv", sort: "-weightKg", where })}`);
      seconds.push((performance.now() - started) / 1000);
      const ok = got.count === sorted + 1 && got.lines[1]?.includes(`,${(ROWS - 1) / 10},`);
      console.log(
        `    sort=-weightKg, where weightKg gte (the ${sorted.toLocaleString("en-US")} heaviest), as CSV (${name}): ${got.count.toLocaleString("en-US")} lines${ok ? "" : " UNEXPECTED"} in ${seconds.at(-1)!.toFixed(2)} s`,
      );
    } finally {
      await stop(server);
    }
  }
  if (seconds.length === 2)
    console.log(`    this build ${(seconds[1]! / seconds[0]!).toFixed(2)}x faster than ${process.env.BENCH_AB}`);
}

/** One whole download from a fresh server: rows checked, time, RSS growth, and the heap at the peak and after a GC. */
async function measureExport(
  server: Server,
  path: string,
  format: "csv" | "ndjson",
  firstStartsWith: string,
): Promise<void> {
  const pid = server.child.pid!;
  const url = `${server.origin}${path}`;
  // Warm-up: the export path compiled before the idle figure is taken.
  await download(`${url}${q({ format, ...(path.includes("/tables/") ? { limit: 1000 } : { maxRows: 1000 }) })}`);
  await fetch(`${server.origin}/__gc`, { method: "POST" });
  const idleHeap = ((await (await fetch(`${server.origin}/__peak`)).json()) as NodeJS.MemoryUsage).heapUsed;
  await new Promise((r) => setTimeout(r, 300));
  const idle = processMemory(pid).rss;
  const resettable = resetPeak(pid);
  let peak = idle;
  const sampler = setInterval(() => (peak = Math.max(peak, processMemory(pid).rss)), 20);
  const started = performance.now();
  const got = await download(`${url}${q({ format })}`);
  const seconds = (performance.now() - started) / 1000;
  clearInterval(sampler);
  const atPeak = (await (await fetch(`${server.origin}/__peak`)).json()) as NodeJS.MemoryUsage;
  await fetch(`${server.origin}/__gc`, { method: "POST" });
  const afterHeap = ((await (await fetch(`${server.origin}/__peak`)).json()) as NodeJS.MemoryUsage).heapUsed;
  peak = Math.max(peak, resettable ? processMemory(pid).hwm : 0);
  const expectedLines = ROWS + (format === "csv" ? 1 : 0);
  const first = format === "csv" ? got.lines[1] : got.lines[0];
  const lastId = format === "csv" ? `SH-${ROWS - 1},` : `"SH-${ROWS - 1}"`;
  const complete = got.count === expectedLines && first?.startsWith(firstStartsWith) && got.last.includes(lastId);
  const growth = (peak - idle) / 1024 / 1024;
  console.log(
    `    ${format.padEnd(6)} ${got.count.toLocaleString("en-US")} lines${complete ? "" : ` INCOMPLETE (expected ${expectedLines}, first ${first?.slice(0, 60)}, last ${got.last.slice(0, 60)})`}, ${(got.bytes / 1e6).toFixed(0)} MB in ${seconds.toFixed(1)} s; ` +
      `server RSS idle ${mb(idle)}, peak ${mb(peak)}: growth ${growth.toFixed(0)} MB ${growth < GOAL_MB ? "OK" : "ABOVE GOAL"}`,
  );
  console.log(
    `           at the peak: heap ${mb(atPeak.heapUsed)} used of ${mb(atPeak.heapTotal)}, external ${mb(atPeak.external)}; ` +
      `heap used after a full GC ${mb(afterHeap)}, before the export ${mb(idleHeap)}`,
  );
}

/** Drain a download: its byte and line count, its first two lines and its last line. */
function download(url: string): Promise<{ bytes: number; count: number; lines: string[]; last: string }> {
  return new Promise((resolve, reject) => {
    http
      .get(url, { headers: { authorization: `Bearer ${TOKEN}` } }, (res) => {
        if (res.statusCode !== 200) {
          reject(new Error(`${url}: ${res.statusCode}`));
          res.resume();
          return;
        }
        let bytes = 0;
        let count = 0;
        let head = "";
        let tail = "";
        res.on("data", (chunk: Buffer) => {
          bytes += chunk.length;
          for (let i = chunk.indexOf(10); i !== -1; i = chunk.indexOf(10, i + 1)) count++;
          if (head.length < 4096) head += chunk.toString("utf8");
          tail = (tail + chunk.toString("utf8")).slice(-4096);
        });
        res.on("end", () => {
          const lines = tail.replace(/\r?\n$/, "").split(/\r?\n/);
          resolve({ bytes, count, lines: head.split(/\r?\n/).slice(0, 2), last: lines.at(-1) ?? "" });
        });
        res.on("error", reject);
      })
      .on("error", reject);
  });
}

/** The aggregate of the aggregate scenarios, and how many runs of each case are timed. */
const AGGREGATE = { groupBy: "fragile,month(shippedAt)", metrics: "count,sum(weightKg),avg(weightKg)" };
const AGGREGATE_RUNS = Number(process.env.AGGREGATE_RUNS ?? 7);

async function aggregateScenario(kind: "sqlite" | "postgres"): Promise<void> {
  const label = kind === "sqlite" ? "SQLite" : "PostgreSQL";
  console.log(
    `- aggregate-${kind}: groupBy=${AGGREGATE.groupBy}&metrics=${AGGREGATE.metrics} over ${ROWS.toLocaleString("en-US")} rows on ${label}, through the Node adapter`,
  );
  const server = await serverFor(kind);
  const bare = await bareAggregate(kind, server);
  try {
    const url = (having: number) =>
      `${server.origin}/api/v1/datasets/${DATASET}/aggregate${q({ ...AGGREGATE, having: JSON.stringify({ count: { gte: having } }) })}`;
    const timed = async (target: string) => {
      const started = performance.now();
      const res = await fetch(target, { headers: { authorization: `Bearer ${TOKEN}` } });
      const body = (await res.json()) as { data?: Array<Record<string, unknown>>; metadata?: { matchedRows: number } };
      if (res.status !== 200 || body.metadata?.matchedRows !== ROWS)
        throw new Error(`${target}: ${res.status} ${JSON.stringify(body).slice(0, 300)}`);
      return { ms: performance.now() - started, groups: body.data! };
    };
    // The answer checked against the bare SQL's once (group count and the grand count).
    const expected = await bare.run();
    const pid = server.child.pid!;
    await fetch(`${server.origin}/__gc`, { method: "POST" });
    const idle = processMemory(pid).rss;
    let peak = idle;
    const sampler = setInterval(() => (peak = Math.max(peak, processMemory(pid).rss)), 20);
    const first = await timed(url(1));
    clearInterval(sampler);
    if (first.groups.length !== expected.groups)
      throw new Error(`${first.groups.length} groups, the bare SQL has ${expected.groups}`);
    // Each later first run asks a question not asked before (another having bound), so it scans again.
    const firsts: number[] = [first.ms];
    const bares: number[] = [];
    const overJson: number[] = [];
    const repeats: number[] = [];
    for (let i = 0; i < AGGREGATE_RUNS; i++) {
      firsts.push((await timed(url(2 + i))).ms);
      let started = performance.now();
      await bare.run();
      bares.push(performance.now() - started);
      started = performance.now();
      await bare.overJson();
      overJson.push(performance.now() - started);
      repeats.push((await timed(url(1))).ms);
    }
    const downloadStarted = performance.now();
    const got = (await download(`${server.origin}/api/v1/datasets/${DATASET}/rows${q({ format: "ndjson" })}`)).count;
    const downloadMs = performance.now() - downloadStarted;
    if (got !== ROWS) throw new Error(`the NDJSON download had ${got} lines`);
    const med = (xs: number[]) => quantile(xs, 0.5);
    const ratio = (a: number, b: number, goal: number) =>
      `${(a / b).toFixed(3)}x (goal <= ${goal}x ${a / b <= goal ? "OK" : "MISSED"})`;
    const growth = (peak - idle) / 1024 / 1024;
    console.log(
      `    first run median ${fmt(med(firsts))} ms; bare SQL median ${fmt(med(bares))} ms; again on the unchanged dataset median ${fmt(med(repeats))} ms; NDJSON download ${fmt(downloadMs)} ms`,
    );
    console.log(
      `    (the bare SQL over the rows' JSON text instead of the typed copy: median ${fmt(med(overJson))} ms, ${(med(overJson) / downloadMs).toFixed(3)}x the download)`,
    );
    console.log(
      `    first / bare SQL ${ratio(med(firsts), med(bares), 1.5)}; first / download ${ratio(med(firsts), downloadMs, 0.25)}; again / first ${ratio(med(repeats), med(firsts), 0.05)}`,
    );
    console.log(
      `    server RSS growth over a first run ${growth.toFixed(0)} MB (goal < 50 MB ${growth < 50 ? "OK" : "MISSED"})`,
    );
  } finally {
    await bare.close();
    await stop(server);
  }
}

/**
 * The bare SQL of the aggregate over the store's own tables, run in this
 * process: the same groups (a JSON boolean, the month as `YYYY-MM` of an ISO
 * text) and metrics, over the dataset's window.
 */
async function bareAggregate(
  kind: "sqlite" | "postgres",
  server: Server,
): Promise<{ run(): Promise<{ groups: number }>; overJson(): Promise<{ groups: number }>; close(): Promise<void> }> {
  if (kind === "sqlite") {
    const { default: Database } = await import("better-sqlite3");
    const db = new Database(server.file!, { readonly: true });
    // The page cache Dataport's reader thread runs an aggregate with (src/sqlite/reader-thread.ts): SQLite's sorter
    // sorts in runs of the cache's size, faster in 2 MB runs than in the driver's default 16 MB.
    db.pragma("cache_size = -2000");
    // And the sorter's helper threads it runs with (STATEMENT_SORTER_THREADS there).
    db.pragma("threads = 2");
    const at = db.prepare("SELECT seq, first_position, next_position FROM datasets WHERE id = ?").get(DATASET) as {
      seq: number;
      first_position: number;
      next_position: number;
    };
    const json = db.prepare(
      `SELECT json_extract(data, '$.fragile') AS f, substr(json_extract(data, '$.shippedAt'), 1, 7) AS m,
         count(*) AS n, sum(json_extract(data, '$.weightKg')) AS s, avg(json_extract(data, '$.weightKg')) AS a
       FROM dataset_rows WHERE dataset_seq = ? AND position >= ? AND position < ? GROUP BY f, m ORDER BY f, m`,
    );
    // The declared columns' typed copy (src/sqlite/dataset-values.ts), which Dataport reads: its slots by name.
    const layout = db
      .prepare("SELECT layout FROM dataset_value_layouts WHERE dataset_seq = ?")
      .pluck()
      .get(at.seq) as string;
    const slots = JSON.parse(layout) as Array<[string, number | null]>;
    const slot = (name: string) => slots.findIndex(([n]) => n === name);
    const [f, w] = [slot("fragile"), slot("weightKg")];
    const m = slots.find(([n]) => n === "shippedAt")![1]!;
    const number = `(CASE WHEN typeof(v${w}) IN ('integer', 'real') THEN v${w} END)`;
    const typed = db.prepare(
      `SELECT v${f} AS f, substr(h${m}, 1, 7) AS m, count(*) AS n, total(${number}) AS s, total(${number}) / count(${number}) AS a
       FROM dataset_values WHERE row_key >= ? AND row_key < ? GROUP BY f, m ORDER BY f, m`,
    );
    const span = 2n ** 43n;
    return {
      run: async () => ({
        groups: typed.all(
          BigInt(at.seq) * span + BigInt(at.first_position),
          BigInt(at.seq) * span + BigInt(at.next_position),
        ).length,
      }),
      overJson: async () => ({ groups: json.all(at.seq, at.first_position, at.next_position).length }),
      close: async () => {
        db.close();
      },
    };
  }
  const client = new pg.Client({ connectionString: PG_URL });
  await client.connect();
  const schema = server.schema!;
  const text = `select row->>'fragile' as f, substr(row->>'shippedAt', 1, 7) as m, count(*) as n,
      sum((row->>'weightKg')::numeric) as s, avg((row->>'weightKg')::numeric) as a
    from "${schema}".dataset_rows r join "${schema}".datasets d on d.id = r.dataset_id
    where d.id = $1 and r.pos >= d.first_pos and r.pos < d.next_pos group by 1, 2 order by 1, 2`;
  // The declared columns' typed copy (src/postgres/dataset-values-sql.ts), which Dataport reads: its slots by name.
  const layout = (
    await client.query<{ layout: string }>(
      `select layout from "${schema}".dataset_value_layouts where dataset_id = $1`,
      [DATASET],
    )
  ).rows[0]!.layout;
  const slots = JSON.parse(layout) as Array<[string, number | null]>;
  const slot = (name: string) => slots.findIndex(([n]) => n === name);
  const [f, w] = [slot("fragile"), slot("weightKg")];
  const m = slots.find(([n]) => n === "shippedAt")![1]!;
  const number = `(case when json_typeof(v${w}) = 'number' then (v${w}::jsonb)::numeric end)`;
  const typed = `select v${f}::jsonb as f, substr(h${m}, 1, 7) as m, count(*) as n, sum(${number}) as s, avg(${number}) as a
    from "${schema}".dataset_values v join "${schema}".datasets d on d.id = v.dataset_id
    where d.id = $1 and v.pos >= d.first_pos and v.pos < d.next_pos group by 1, 2 order by 1, 2`;
  return {
    run: async () => ({ groups: (await client.query(typed, [DATASET])).rowCount ?? 0 }),
    overJson: async () => ({ groups: (await client.query(text, [DATASET])).rowCount ?? 0 }),
    close: () => client.end(),
  };
}

function quantile(values: number[], q: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)]!;
}

const fmt = (ms: number) => (ms < 10 ? ms.toFixed(2) : ms.toFixed(1));
const mb = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(0)} MB`;

/** The measured server: Dataport from dist/ through the Node adapter, plus POST /__gc. */
async function serve(kind: StoreKind, arg: string): Promise<void> {
  const { createDataApi } = await built<Dataport>("index.js");
  const { toNodeHandler } = await built<NodeAdapter>("adapters/node.js");
  let storage: Storage;
  if (kind === "sqlite") storage = (await built<SqliteEntry>("sqlite/index.js")).createSqliteStorage({ path: arg });
  // No call timeout: a read slower than the default 10 s (a 503 in production) is measured, not refused.
  else if (kind === "postgres")
    storage = await (
      await built<PostgresEntry>("postgres/index.js")
    ).createPostgresStorage({ connectionString: PG_URL, schema: arg, callTimeoutMs: 0 });
  else {
    storage = (await built<MemoryEntry>("memory/index.js")).createMemoryStorage();
    await load(storage);
  }
  const handler = toNodeHandler(createDataApi({ storage }));
  // Where the memory is at the RSS peak (sampled every 20 ms): heap or outside it.
  let peak = process.memoryUsage();
  setInterval(() => {
    const now = process.memoryUsage();
    if (now.rss > peak.rss) peak = now;
  }, 20).unref();
  const server = http.createServer((req, res) => {
    if (req.url === "/__gc") {
      globalThis.gc?.();
      peak = process.memoryUsage();
      res.end();
    } else if (req.url === "/__peak") {
      res.end(JSON.stringify(peak));
    } else handler(req, res);
  });
  // The client's keep-alive socket idles while the bare SQL runs (seconds under load): Node's 5 s default would close
  // it as a request goes out.
  server.keepAliveTimeout = 120_000;
  server.listen(0, "127.0.0.1", () => console.log(`ready ${(server.address() as AddressInfo).port}`));
  const shutdown = () => {
    server.closeAllConnections();
    void storage.close().finally(() => process.exit(0));
  };
  process.on("SIGTERM", shutdown);
  process.on("SIGINT", shutdown);
}

async function main(names: string[]): Promise<void> {
  if (!process.env.BENCH_DIST && !existsSync(new URL("../dist/index.js", import.meta.url))) {
    throw new Error("dist/ is missing: run `npm run build` first (npm run bench does)");
  }
  const selected = ROW_QUERY_SCENARIOS.filter((s) => names.some((n) => s.startsWith(n)));
  for (const name of selected as ScenarioName[]) {
    const [what, kind] = name.split("-") as ["rowquery" | "export" | "aggregate", StoreKind | "table"];
    if (kind === "table") await exportTableScenario();
    else if (what === "aggregate") await aggregateScenario(kind as "sqlite" | "postgres");
    else if (what === "rowquery") await rowQueryScenario(kind as "sqlite" | "postgres");
    else await exportScenario(kind);
  }
}

if (process.argv[2] === "--serve") await serve(process.argv[3] as StoreKind, process.argv[4]!);
else await main(process.argv.slice(2));
