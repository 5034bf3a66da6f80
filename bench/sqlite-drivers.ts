/**
 * The SQLite store's calls on each driver, in process (no HTTP): a
 * 100-row page of a 100,000-row dataset (page memory off, so every read
 * reads the file), a dataset record read (remembered: what it costs is the
 * `PRAGMA data_version` check), and a webhook row ingested (one group
 * commit each).
 * Median µs per call over the runs; the runtime and driver running it:
 *
 *   npx tsx bench/sqlite-drivers.ts                                                  # Node 20, better-sqlite3
 *   DATAPORT_SQLITE_DRIVER=node:sqlite node_modules/node/bin/node --import tsx bench/sqlite-drivers.ts   # Node 22
 *   node_modules/.bin/bun bench/sqlite-drivers.ts                                    # Bun, bun:sqlite
 *
 * Not part of `npm run bench` (which measures servers over HTTP): a hand
 * check of what the driver layer costs (docs/storage.md, "Drivers").
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseFixture } from "../src/fixture/load.js";
import { createSqliteStorage } from "../src/sqlite/index.js";
import { conformanceFixture } from "../src/testing/conformance/fixture.js";
import { fillRows } from "../test/sqlite/support/filled-dataset.js";

const ROWS = Number(process.env.ROWS ?? 100_000);
const RUNS = Number(process.env.RUNS ?? 2000);

const dir = mkdtempSync(join(tmpdir(), "dataport-bench-drivers-"));
const store = createSqliteStorage({ path: join(dir, "drivers.sqlite"), pageMemoryBytes: 0 });
try {
  const fixture = conformanceFixture() as ReturnType<typeof conformanceFixture> & { connections: unknown[] };
  fixture.connections.push({
    id: "conn_hook",
    teamId: "team_ops",
    name: "Hook",
    type: "webhook",
    config: { endpointId: "ep", signingSecret: null, retainRows: 1_000_000 },
    createdAt: "2026-09-01T00:00:00Z",
  });
  await store.seed(parseFixture(fixture));
  fillRows(store, "ds_orders", ROWS);

  const page = async (i: number) => {
    const offset = (i * 997) % (ROWS - 100);
    const read = await store.rows.readDatasetRows("ds_orders", { offset, limit: 100, columns: null, filters: null });
    let n = 0;
    for await (const _ of read.rows) n++;
    if (n !== 100) throw new Error(`page of ${n} rows`);
  };
  const record = async () => {
    if (!(await store.catalog.getDataset("ds_orders"))) throw new Error("no dataset");
  };
  let seq = 0;
  const ingest = async () => {
    await store.webhooks.ingestWebhookRow({
      datasetId: "ds_conn_hook",
      dedupKey: null,
      row: { seq: seq++, note: "bench" },
      columns: [
        { name: "seq", type: "number" },
        { name: "note", type: "string" },
      ],
      retainRows: 1_000_000,
      receivedAt: "2026-11-27T00:00:00.000Z",
    });
  };

  const runtime = "Bun" in globalThis ? `bun ${process.versions.bun}` : `node ${process.versions.node}`;
  const result: Record<string, number | string> = { runtime, driver: store.driver };
  for (const [name, call] of [
    ["page100", page],
    ["datasetRecord", record],
    ["ingestRow", ingest],
  ] as const) {
    for (let i = 0; i < Math.min(200, RUNS); i++) await call(i);
    const times: number[] = [];
    for (let i = 0; i < RUNS; i++) {
      const start = performance.now();
      await call(i);
      times.push(performance.now() - start);
    }
    times.sort((a, b) => a - b);
    result[`${name}Us`] = Math.round(times[Math.floor(times.length / 2)]! * 1000 * 10) / 10;
  }
  console.log(JSON.stringify(result));
} finally {
  await store.close();
  rmSync(dir, { recursive: true, force: true });
}
