/**
 * PostgreSQL dataset reads at scale (issue #18): a dataset of ROWS rows
 * (default 200,000) written through writeDatasetRows, then, through the
 * store, the median time of a page (count + rows) for
 *   - a filter matching one row (`order_id`),
 *   - a filter matching 1 row in 8 (`region`), first page and a page 90% deep,
 *   - no filter, first page and a page 90% deep.
 *
 *   npx tsx bench/postgres-reads.ts                       # the build in dist/
 *   BENCH_AB=/tmp/dist-before npx tsx bench/postgres-reads.ts   # and another build, alternately, with the ratio
 *   ROWS=20000 npx tsx bench/postgres-reads.ts            # a quick smoke run
 *
 * Each build reads its own schema of BENCH_PG_URL (default the dataport_bench
 * database), dropped at the end.
 */
import { existsSync, readFileSync } from "node:fs";
import { performance } from "node:perf_hooks";
import pg from "pg";
import type { Row } from "../src/domain/model.js";
import { built, type Dataport, type PostgresEntry } from "./servers/built.js";

const ROWS = Number(process.env.ROWS ?? 200_000);
const READS = Number(process.env.READS ?? 15);
const PG_URL = process.env.BENCH_PG_URL ?? "postgres://postgres@127.0.0.1:5432/dataport_bench";
const REGIONS = ["EMEA", "APAC", "LATAM", "NA", "ANZ", "MENA", "CEE", "NORDICS"];
/** The build measured: dist/, or BENCH_DIST when set (as for the servers). */
const THIS_DIST = process.env.BENCH_DIST;

type Store = Awaited<ReturnType<PostgresEntry["createPostgresStorage"]>>;

interface Build {
  name: string;
  store: Store;
  schema: string;
}

async function open(dist: string | undefined, name: string): Promise<Build> {
  if (dist) process.env.BENCH_DIST = dist;
  else delete process.env.BENCH_DIST;
  const [{ parseFixture }, { createPostgresStorage }] = await Promise.all([
    built<Dataport>(`index.js?${name}`),
    built<PostgresEntry>(`postgres/index.js?${name}`),
  ]);
  const schema = `bench_reads_${process.pid}_${name}`;
  const store = await createPostgresStorage({ connectionString: PG_URL, schema });
  const fixture =
    dist && existsSync(`${dist}/../examples/demo/space.json`)
      ? `${dist}/../examples/demo/space.json`
      : new URL("../examples/demo/space.json", import.meta.url);
  await store.seed(parseFixture(JSON.parse(readFileSync(fixture, "utf8"))));
  const started = performance.now();
  await store.rows.writeDatasetRows({
    datasetId: "ds_orders",
    mode: "replace",
    rows: rowsOf(ROWS),
    columns: () => [
      { name: "order_id", type: "string" },
      { name: "region", type: "string" },
      { name: "amount", type: "number" },
      { name: "note", type: "string" },
    ],
    updatedAt: new Date().toISOString(),
  });
  console.log(
    `${name}: ${ROWS.toLocaleString()} rows written in ${((performance.now() - started) / 1000).toFixed(1)} s`,
  );
  return { name, store, schema };
}

async function* rowsOf(n: number): AsyncGenerator<Row> {
  for (let i = 0; i < n; i++)
    yield { order_id: `NW-${i}`, region: REGIONS[i % REGIONS.length]!, amount: i % 1000, note: "x".repeat(100) };
}

interface Read {
  name: string;
  offset: number;
  limit: number;
  filters: Record<string, unknown> | null;
  /** The total the page must report. */
  total: number;
}

const perRegion = Math.ceil(ROWS / REGIONS.length);
const reads: Read[] = [
  { name: "filter, 1 match", offset: 0, limit: 100, filters: { order_id: `NW-${Math.floor(ROWS * 0.7)}` }, total: 1 },
  {
    name: "filter, 1 in 8, first page",
    offset: 0,
    limit: 100,
    filters: { region: "APAC" },
    total: Math.floor((ROWS - 2) / REGIONS.length) + 1,
  },
  {
    name: "filter, 1 in 8, 90% deep",
    offset: Math.floor(perRegion * 0.9),
    limit: 100,
    filters: { region: "APAC" },
    total: Math.floor((ROWS - 2) / REGIONS.length) + 1,
  },
  { name: "no filter, first page", offset: 0, limit: 1000, filters: null, total: ROWS },
  { name: "no filter, 90% deep", offset: Math.floor(ROWS * 0.9), limit: 1000, filters: null, total: ROWS },
];

async function timeRead(store: Store, read: Read): Promise<number> {
  const started = performance.now();
  const page = await store.rows.readDatasetRows("ds_orders", {
    offset: read.offset,
    limit: read.limit,
    columns: null,
    filters: read.filters,
  });
  let n = 0;
  for await (const _ of page.rows) n++;
  const ms = performance.now() - started;
  if (page.totalRows !== read.total || n !== Math.min(read.limit, Math.max(0, read.total - read.offset))) {
    throw new Error(`${read.name}: ${page.totalRows} rows, ${n} on the page`);
  }
  return ms;
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;

const builds = [await open(THIS_DIST, "this")];
if (process.env.BENCH_AB) builds.push(await open(process.env.BENCH_AB, "other"));
try {
  for (const read of reads) {
    const times = builds.map(() => [] as number[]);
    for (let k = 0; k < READS; k++)
      for (const [i, build] of builds.entries()) times[i]!.push(await timeRead(build.store, read));
    const [mine, other] = times.map(median);
    const ab =
      other === undefined
        ? ""
        : `; ${process.env.BENCH_AB} ${other.toFixed(1)} ms, ${(other / mine!).toFixed(1)}x faster`;
    console.log(
      `- ${read.name} (offset ${read.offset.toLocaleString()}, ${read.limit} rows): median ${mine!.toFixed(1)} ms${ab}`,
    );
  }
} finally {
  for (const build of builds) await build.store.close();
  const client = new pg.Client({ connectionString: PG_URL });
  await client.connect();
  for (const build of builds) await client.query(`drop schema if exists "${build.schema}" cascade`);
  await client.end();
}
