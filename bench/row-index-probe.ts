/**
 * Row-query speed on a large declared dataset (issue 29): loads ROWS rows
 * (default 1,000,000) into a dataset with declared columns on each store,
 * through the storage's bulk write (what an upload does), then times reads
 * through the storage's `readDatasetRows`:
 *
 *   - the first page, stored order;       - a cursor page 90% deep, stored order;
 *   - the first page sorted -amount;      - a cursor page 90% deep, sorted -amount;
 *   - an eq on `code` matching ~100 rows (first page, with its count);
 *   - counts alone (maxRows=0): the eq above, and a range on `amount` matching half the rows.
 *
 * Each figure is the median of RUNS reads after one warm-up (the first
 * read, also shown: a store may remember a count), in ms, rows consumed. Also the load itself (rows/s) and, with
 * PROBE_INGEST, the cost of
 * single-row appends (the webhook path's shape) on the loaded dataset.
 *
 *   npx tsx bench/row-index-probe.ts
 *   PROBE_ROWS=100000 PROBE_STORES=sqlite PROBE_DECLARED=0 npx tsx bench/row-index-probe.ts
 *
 * PostgreSQL: DATABASE_URL (default postgres://root@127.0.0.1:5432/test),
 * schema `bench_row_index` (dropped first).
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import pg from "pg";
import type { Column, DatasetRecord, Row } from "../src/domain/model.js";
import { parseSort, parseWhere } from "../src/domain/row-query-model.js";
import type { Storage } from "../src/ports/storage.js";
import type { RowQuery } from "../src/ports/storage/rows.js";
import { createPostgresStorage } from "../src/postgres/index.js";
import { createSqliteStorage } from "../src/sqlite/index.js";

const ROWS = Number(process.env.PROBE_ROWS ?? 1_000_000);
const RUNS = Number(process.env.PROBE_RUNS ?? 5);
const STORES = (process.env.PROBE_STORES ?? "sqlite,postgres").split(",");
const DECLARED = process.env.PROBE_DECLARED !== "0";
const INGEST = Number(process.env.PROBE_INGEST ?? 0);
const URL = process.env.DATABASE_URL ?? "postgres://root@127.0.0.1:5432/test";
const SCHEMA = "bench_row_index";
const DATASET = "ds_probe";

const COLUMNS: Column[] = [
  { name: "id", type: "number" },
  { name: "code", type: "string" },
  { name: "amount", type: "number" },
  { name: "note", type: "string" },
];
const NAMES = new Set(COLUMNS.map((c) => c.name));

function row(i: number): Row {
  // A fixed pseudo-random amount per row (no ties to speak of), 10,000 codes of ~ROWS/10,000 rows each.
  const amount = Math.round(((i * 2654435761) % 1_000_003) / 10) / 100;
  return { id: i, code: `c${(i * 7919) % 10_000}`, amount, note: `row ${i} of the probe` };
}

async function* rows(n: number): AsyncGenerator<Row> {
  for (let i = 0; i < n; i++) yield row(i);
}

async function main(): Promise<void> {
  for (const store of STORES) {
    if (store === "sqlite") {
      const dir = mkdtempSync(join(tmpdir(), "row-index-probe-"));
      const storage = createSqliteStorage({ path: join(dir, "probe.db") });
      try {
        await probe("sqlite", storage);
      } finally {
        await storage.close();
        rmSync(dir, { recursive: true, force: true });
      }
    } else if (store === "postgres") {
      const pool = new pg.Pool({ connectionString: URL, max: 2 });
      await pool.query(`drop schema if exists ${SCHEMA} cascade`);
      await pool.end();
      const storage = await createPostgresStorage({ connectionString: URL, schema: SCHEMA, maxConnections: 4 });
      try {
        await probe("postgres", storage);
      } finally {
        await storage.close();
      }
    }
  }
}

async function probe(name: string, storage: Storage): Promise<void> {
  const dataset: DatasetRecord = {
    id: DATASET,
    teamId: "team_probe",
    name: "probe",
    type: "upload",
    connectionId: null,
    source: null,
    columns: COLUMNS,
    rowCount: 0,
    lastRefreshedAt: null,
    updatedAt: "2026-11-01T00:00:00.000Z",
    ...(DECLARED && { columnsDeclared: true }),
  };
  await storage.catalog.putDataset(dataset);
  const loadStart = performance.now();
  await storage.rows.writeDatasetRows({
    datasetId: DATASET,
    mode: "replace",
    rows: rows(ROWS),
    columns: () => COLUMNS,
    updatedAt: dataset.updatedAt,
  });
  const loadMs = performance.now() - loadStart;
  console.log(
    `${name}: loaded ${ROWS} rows (declared: ${DECLARED}) in ${(loadMs / 1000).toFixed(1)} s (${Math.round(ROWS / (loadMs / 1000))} rows/s)`,
  );
  if (name === "postgres") {
    const pool = new pg.Pool({ connectionString: URL, max: 1 });
    await pool.query(`vacuum analyze ${SCHEMA}.dataset_rows`);
    await pool.end();
  }

  const read = (query: Partial<RowQuery>) =>
    storage.rows.readDatasetRows(DATASET, { offset: 0, limit: 100, columns: null, filters: null, ...query });
  const deep = Math.floor(ROWS * 0.9);
  const sort = parseSort("-amount", NAMES);
  const unsortedKey = (await first(read({ offset: deep - 1, limit: 1 }))).lastKey;
  const sortedKey = (await first(read({ offset: deep - 1, limit: 1, sort }))).lastKey;
  const code = parseWhere({ code: { eq: "c1234" } }, NAMES);
  const half = parseWhere({ amount: { gt: 500 } }, NAMES);

  const figures: Array<[string, number, number, number]> = [];
  const time = async (label: string, query: Partial<RowQuery>) => {
    let got = 0;
    const once = async () => {
      const page = await read(query);
      let n = 0;
      for await (const _ of page.rows) n++;
      got = n;
      return page.totalRows;
    };
    const coldStart = performance.now();
    await once();
    const cold = performance.now() - coldStart;
    const ms: number[] = [];
    let total = 0;
    for (let i = 0; i < RUNS; i++) {
      const start = performance.now();
      total = await once();
      ms.push(performance.now() - start);
    }
    ms.sort((a, b) => a - b);
    figures.push([label, ms[Math.floor(ms.length / 2)]!, total, cold]);
    if (query.limit !== 0 && got === 0) console.log(`  (${label}: no rows)`);
  };
  await time("first page, stored order", {});
  await time("cursor page 90% deep, stored order", { after: unsortedKey });
  await time("first page, sort=-amount", { sort });
  await time("cursor page 90% deep, sort=-amount", { sort, after: sortedKey });
  await time("eq on code (~100 rows), first page", { where: code });
  await time("count: eq on code", { where: code, limit: 0 });
  await time("count: amount gt (half the rows)", { where: half, limit: 0 });
  for (const [label, ms, total, cold] of figures) {
    console.log(
      `  ${label.padEnd(40)} ${ms.toFixed(2).padStart(9)} ms   (first read ${cold.toFixed(2)} ms)   totalRows ${total}`,
    );
  }

  if (INGEST > 0) {
    const start = performance.now();
    for (let i = 0; i < INGEST; i++) {
      await storage.rows.writeDatasetRows({
        datasetId: DATASET,
        mode: "append",
        rows: rows1(ROWS + i),
        columns: () => COLUMNS,
        updatedAt: dataset.updatedAt,
      });
    }
    console.log(`  single-row appends: ${((performance.now() - start) / INGEST).toFixed(3)} ms each (${INGEST})`);
  }
}

async function* rows1(i: number): AsyncGenerator<Row> {
  yield row(i);
}

async function first(page: Promise<{ rows: AsyncIterable<Row>; lastKey(): unknown }>) {
  const p = await page;
  for await (const _ of p.rows) break;
  return { lastKey: p.lastKey() as RowQuery["after"] };
}

await main();
