/**
 * Bulk row upload at scale (issue 16): a 1,000,000-row CSV (about 45 MB)
 * sent to `PUT /api/admin/v1/datasets/{id}/rows` of a server on the SQLite
 * store, generated and sent as a stream. Prints rows per second and the
 * server's peak RSS growth over its idle RSS (goal: < 150 MB, so the body
 * is not held in memory).
 *
 *   npm run bench -- bulk-upload                 # builds dist/ first, then this
 *   npx tsx bench/bulk-upload.ts                 # against the current dist/
 *   BULK_ROWS=100000 BULK_FORMATS=csv,ndjson npx tsx bench/bulk-upload.ts
 *   BULK_PROFILE=/tmp/prof npx tsx bench/bulk-upload.ts   # the server's CPU profile
 *
 * The server is a separate process (this file with `--serve`): the Node
 * adapter and createDataApi from dist/ (BENCH_DIST for another build) with
 * an admin token, on a fresh SQLite temp file. Its peak RSS is read from
 * /proc/<pid>/status (VmHWM, reset through /proc/<pid>/clear_refs before
 * the upload) and, where that cannot be reset, from VmRSS sampled every 20 ms.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { built, type Dataport, type NodeAdapter, type SqliteEntry } from "./servers/built.js";
import { processMemory, resetPeak } from "./support.js";

const ADMIN_TOKEN = "x".repeat(32);
const TEAM = "team_bulk";
const DATASET = "ds_bulk";
const GOAL_MB = 150;

async function main(): Promise<void> {
  const rows = Number(process.env.BULK_ROWS ?? 1_000_000);
  const formats = (process.env.BULK_FORMATS ?? "csv").split(",").map((f) => f.trim()) as Format[];
  for (const format of formats) {
    if (!(format in CONTENT_TYPES)) throw new Error(`BULK_FORMATS: unknown format ${format} (csv, ndjson)`);
    await run(format, rows);
  }
}

async function run(format: Format, rows: number): Promise<void> {
  const { server, port } = await startServer();
  const base = `http://127.0.0.1:${port}/api/admin/v1`;
  try {
    const team = await admin("PUT", `${base}/teams/${TEAM}`, {
      name: "Bulk bench",
      plan: "pro",
      businessId: null,
      isPersonal: false,
    });
    const dataset = await admin("PUT", `${base}/datasets/${DATASET}`, {
      teamId: TEAM,
      name: "Bulk bench",
      type: "upload",
      connectionId: null,
      source: null,
    });
    if (team.status >= 300 || dataset.status >= 300) {
      console.log(
        `- bulk-upload ${format}: skipped: the admin API answered ${team.status} to PUT /teams and ${dataset.status} to PUT /datasets (${dataset.body.slice(0, 200)})`,
      );
      return;
    }
    // Warm-up: the code paths compiled and the store's statements prepared before the idle figure is taken.
    const warm = await upload(base, format, 10_000);
    if (warm.status !== 200) {
      console.log(
        `- bulk-upload ${format}: skipped: PUT /datasets/${DATASET}/rows answered ${warm.status} ${warm.body.slice(0, 300)}`,
      );
      return;
    }
    await new Promise((r) => setTimeout(r, 500));
    const pid = server.pid!;
    const idle = processMemory(pid).rss;
    const resettable = resetPeak(pid);
    let sampled = idle;
    const sampler = setInterval(() => {
      sampled = Math.max(sampled, processMemory(pid).rss);
    }, 20);
    const started = performance.now();
    const result = await upload(base, format, rows);
    const seconds = (performance.now() - started) / 1000;
    clearInterval(sampler);
    const peak = Math.max(sampled, resettable ? processMemory(pid).hwm : 0);
    const stored = JSON.parse(result.body) as { rowCount?: number; error?: { message: string } };
    if (result.status !== 200 || stored.rowCount !== rows) {
      console.log(`- bulk-upload ${format}: FAILED: ${result.status} ${result.body.slice(0, 300)}`);
      return;
    }
    const growth = (peak - idle) / 1024 / 1024;
    console.log(
      `- bulk-upload ${format}: PUT ${rows.toLocaleString("en-US")} rows (${(result.sentBytes / 1e6).toFixed(1)} MB) on SQLite through the Node adapter`,
    );
    console.log(
      `    ${seconds.toFixed(1)} s, ${Math.round(rows / seconds).toLocaleString("en-US")} rows/s; rowCount ${stored.rowCount}`,
    );
    console.log(
      `    server RSS idle ${mb(idle)}, peak ${mb(peak)} (${resettable ? "VmHWM" : "VmRSS sampled every 20 ms"}): growth ${growth.toFixed(0)} MB (goal < ${GOAL_MB} MB) ${growth < GOAL_MB ? "OK" : "ABOVE GOAL"}`,
    );
  } finally {
    server.kill("SIGTERM");
    await new Promise((r) => (server.exitCode === null ? server.once("exit", r) : r(null)));
  }
}

type Format = "csv" | "ndjson";
const CONTENT_TYPES: Record<Format, string> = { csv: "text/csv", ndjson: "application/x-ndjson" };
const REGIONS = ["EMEA", "APAC", "AMER", "LATAM"];

/**
 * The body, about 64 KB at a time, never whole: `id,customer,amount,paid,day,region,note`,
 * every tenth note quoted with a comma and a doubled quote inside.
 */
function* bodyChunks(format: Format, rows: number): Generator<Buffer> {
  let text = format === "csv" ? "id,customer,amount,paid,day,region,note\n" : "";
  for (let i = 0; i < rows; i++) {
    const amount = ((i * 37) % 100_000) / 100;
    const day = `2026-${String((i % 12) + 1).padStart(2, "0")}-${String((i % 28) + 1).padStart(2, "0")}`;
    const region = REGIONS[i % 4]!;
    if (format === "csv") {
      const note = i % 10 === 0 ? `"note ${i}, ""quoted"""` : `n${i}`;
      text += `${i},C-${i % 5000},${amount},${i % 3 === 0},${day},${region},${note}\n`;
    } else {
      const note = i % 10 === 0 ? `note ${i}, "quoted"` : `n${i}`;
      text += `${JSON.stringify({ id: i, customer: `C-${i % 5000}`, amount, paid: i % 3 === 0, day, region, note })}\n`;
    }
    if (text.length >= 65_536) {
      yield Buffer.from(text);
      text = "";
    }
  }
  if (text.length > 0) yield Buffer.from(text);
}

/** PUT the rows, written as the socket takes them (chunked transfer encoding). */
function upload(
  base: string,
  format: Format,
  rows: number,
): Promise<{ status: number; body: string; sentBytes: number }> {
  return new Promise((resolve, reject) => {
    let sentBytes = 0;
    const req = http.request(
      `${base}/datasets/${DATASET}/rows`,
      { method: "PUT", headers: { authorization: `Bearer ${ADMIN_TOKEN}`, "content-type": CONTENT_TYPES[format] } },
      (res) => {
        let body = "";
        res.setEncoding("utf8");
        res.on("data", (d) => (body += d));
        res.on("end", () => resolve({ status: res.statusCode!, body, sentBytes }));
      },
    );
    req.on("error", reject);
    const chunks = bodyChunks(format, rows);
    const pump = (): void => {
      for (let next = chunks.next(); !next.done; next = chunks.next()) {
        sentBytes += next.value.length;
        if (!req.write(next.value)) {
          req.once("drain", pump);
          return;
        }
      }
      req.end();
    };
    pump();
  });
}

async function admin(method: string, url: string, body: unknown): Promise<{ status: number; body: string }> {
  const res = await fetch(url, {
    method,
    headers: { authorization: `Bearer ${ADMIN_TOKEN}`, "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  return { status: res.status, body: await res.text() };
}

const mb = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(0)} MB`;

async function startServer(): Promise<{ server: ChildProcess; port: number }> {
  if (!process.env.BENCH_DIST && !existsSync(new URL("../dist/index.js", import.meta.url))) {
    throw new Error("dist/ is missing: run `npm run build` first (npm run bench does)");
  }
  // BULK_PROFILE=<dir>: the server writes a CPU profile there when it stops (diagnosis).
  const profile = process.env.BULK_PROFILE ? ["--cpu-prof", `--cpu-prof-dir=${process.env.BULK_PROFILE}`] : [];
  const child = spawn(process.execPath, [...profile, "--import", "tsx", "bench/bulk-upload.ts", "--serve"], {
    stdio: ["ignore", "pipe", "inherit"],
  });
  const port = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error("the bulk-upload server did not start")), 30_000);
    child.stdout!.on("data", (d: Buffer) => {
      const ready = /ready (\d+)/.exec(d.toString());
      if (ready) {
        clearTimeout(timer);
        resolve(Number(ready[1]));
      }
    });
    child.on("exit", (code) => reject(new Error(`the bulk-upload server exited with ${code}`)));
  });
  return { server: child, port };
}

/** The measured server: Dataport from dist/ through the Node adapter, on a fresh SQLite file, with the admin API. */
async function serve(): Promise<void> {
  const { createDataApi } = await built<Dataport>("index.js");
  const { toNodeHandler } = await built<NodeAdapter>("adapters/node.js");
  const { createSqliteStorage } = await built<SqliteEntry>("sqlite/index.js");
  const dir = mkdtempSync(join(tmpdir(), "dataport-bench-bulk-"));
  const storage = createSqliteStorage({ path: join(dir, "bulk.sqlite") });
  const api = createDataApi({ storage, adminToken: ADMIN_TOKEN });
  const server = http.createServer(toNodeHandler(api));
  server.listen(0, "127.0.0.1", () => console.log(`ready ${(server.address() as AddressInfo).port}`));
  const stop = () => {
    void storage.close().finally(() => {
      rmSync(dir, { recursive: true, force: true });
      process.exit(0);
    });
  };
  process.on("SIGTERM", stop);
  process.on("SIGINT", stop);
}

// Last, once every constant above is initialised.
if (process.argv[2] === "--serve") await serve();
else await main();
