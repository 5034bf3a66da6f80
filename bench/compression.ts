/**
 * What compression costs and saves (docs/performance.md, "Compression"):
 * a 1,000-row JSON page and a 20,000-row NDJSON download of the row-query
 * bench's rows, each answered by an in-process API (memory store) as it is,
 * gzip-compressed and brotli-compressed (Dataport's settings), and — for the
 * choice of node:zlib — through the Web `CompressionStream` (gzip at zlib's
 * default level, the only one it offers). Time: from `handle` to the last
 * byte of the body, median of RUNS (default 30), and the process's CPU time
 * per answer (the main thread and zlib's pool).
 *
 *   npx tsx bench/compression.ts
 */
import { performance } from "node:perf_hooks";
import { createDataApi } from "../src/server/api.js";
import type { Row } from "../src/domain/model.js";
import { parseFixture } from "../src/fixture/load.js";
import type { ApiReply, ApiRequest, ReplyBody } from "../src/http/types.js";
import { compressReply } from "../src/http/compression.js";
import { createMemoryStorage } from "../src/memory/memory-storage.js";

const RUNS = Number(process.env.RUNS ?? 30);
const TOKEN = "dp_demo_full_access_0000000000001";
const FIXTURE = new URL("../examples/demo/space.json", import.meta.url);

/** The row-query bench's row shape (bench/row-queries.ts). */
function rowAt(i: number): Row {
  const lane = `L-${String(i % 500).padStart(4, "0")}`;
  const weight = ((i * 7919) % 1_000_000) / 10;
  const shipped = new Date(Date.UTC(2025, 0, 1) + ((i * 104_729) % 1_000_000) * 30_000).toISOString();
  const note = `parcel ${i} via ${lane}`;
  return { shipment: `SH-${i}`, lane, weightKg: weight, shippedAt: shipped, fragile: i % 5 === 0, note };
}

async function api() {
  const { readFile } = await import("node:fs/promises");
  const fixture = JSON.parse(await readFile(FIXTURE, "utf8"));
  fixture.datasets.push({
    ...{
      id: "ds_bench",
      teamId: fixture.datasets[0].teamId,
      name: "Bench",
      type: "upload",
      connectionId: null,
      source: null,
    },
    ...{ columns: [], lastRefreshedAt: null, updatedAt: "-P1D" },
    rows: Array.from({ length: 20_000 }, (_, i) => rowAt(i)),
  });
  const key = fixture.apiKeys.find((k: { token: string }) => k.token === TOKEN);
  key.allowlist.datasets.push("ds_bench");
  const storage = createMemoryStorage();
  await storage.seed(parseFixture(fixture));
  return createDataApi({ storage });
}

function request(path: string, acceptEncoding: string | null): ApiRequest {
  const headers: Record<string, string> = { authorization: `Bearer ${TOKEN}` };
  if (acceptEncoding !== null) headers["accept-encoding"] = acceptEncoding;
  return {
    method: "GET",
    url: `http://localhost${path}`,
    path,
    headers: { get: (name) => headers[name] ?? null },
    clientAddress: null,
    readBody: () => new Uint8Array(0),
  };
}

/** The body's size in bytes, read to its end. */
async function drain(body: ReplyBody): Promise<number> {
  if (body === null) return 0;
  if (typeof body === "string") return Buffer.byteLength(body);
  if (body instanceof Uint8Array) return body.byteLength;
  let size = 0;
  for await (const chunk of body) size += typeof chunk === "string" ? Buffer.byteLength(chunk) : chunk.byteLength;
  return size;
}

/** The uncompressed answer through the Web CompressionStream (gzip), as a core using it would send it. */
async function webGzip(reply: ApiReply): Promise<number> {
  const stream = new CompressionStream("gzip");
  const writer = stream.writable.getWriter();
  const encoder = new TextEncoder();
  const counted = (async () => {
    const reader = stream.readable.getReader();
    let size = 0;
    for (let next = await reader.read(); !next.done; next = await reader.read()) size += next.value.byteLength;
    return size;
  })();
  const { body } = reply;
  if (typeof body === "string") await writer.write(encoder.encode(body));
  else if (body !== null && !(body instanceof Uint8Array)) {
    for await (const chunk of body)
      await writer.write(typeof chunk === "string" ? encoder.encode(chunk) : new Uint8Array(chunk));
  }
  await writer.close();
  return counted;
}

/**
 * Size, median wall time, and CPU time per answer (every thread of the
 * process: zlib's pool too), which a shared machine disturbs less.
 */
async function measure(run: () => Promise<number>): Promise<{ bytes: number; ms: number; cpuMs: number }> {
  for (let i = 0; i < 3; i++) await run();
  const times: number[] = [];
  let bytes = 0;
  const cpu = process.cpuUsage();
  for (let i = 0; i < RUNS; i++) {
    const started = performance.now();
    bytes = await run();
    times.push(performance.now() - started);
  }
  const used = process.cpuUsage(cpu);
  times.sort((a, b) => a - b);
  return { bytes, ms: times[Math.floor(times.length / 2)]!, cpuMs: (used.user + used.system) / 1000 / RUNS };
}

const dataApi = await api();
const answers = [
  ["1,000-row JSON page", "/api/v1/datasets/ds_bench/rows?maxRows=1000"],
  ["20,000-row NDJSON download", "/api/v1/datasets/ds_bench/rows?format=ndjson"],
] as const;
const cell = ({ bytes, ms, cpuMs }: { bytes: number; ms: number; cpuMs: number }) =>
  `${(bytes / 1024).toFixed(0)} KB, ${ms.toFixed(1)} ms (CPU ${cpuMs.toFixed(1)} ms)`;

console.log("Answered through `handle`, read to the last byte (median wall time; CPU of every thread per answer):\n");
console.log("| answer | as it is | gzip (level 1) | br (quality 4 whole, 1 streamed) |");
console.log("|---|---|---|---|");
for (const [name, path] of answers) {
  const plain = await measure(async () => drain((await dataApi.handle(request(path, null))).body));
  const gzip = await measure(async () => drain((await dataApi.handle(request(path, "gzip"))).body));
  const br = await measure(async () => drain((await dataApi.handle(request(path, "br"))).body));
  console.log(`| ${name} | ${cell(plain)} | ${cell(gzip)} | ${cell(br)} |`);
}

console.log("\nThe compression alone, of the same answer already produced (node:zlib as Dataport uses it, and the Web");
console.log("CompressionStream):\n");
console.log("| answer | gzip (level 1) | br | CompressionStream gzip |");
console.log("|---|---|---|---|");
for (const [name, path] of answers) {
  const chunks = await collected((await dataApi.handle(request(path, null))).body);
  const again = (): ApiReply => ({
    status: 200,
    headers: { "content-type": path.includes("ndjson") ? "application/x-ndjson" : "application/json" },
    body: chunks.length === 1 ? chunks[0]! : replay(chunks),
  });
  const headers = (coding: string) => ({ get: (header: string) => (header === "accept-encoding" ? coding : null) });
  const compressed = async (coding: string) =>
    drain((await compressReply(again(), headers(coding), { minBytes: 1024 })).body);
  const gzip = await measure(() => compressed("gzip"));
  const br = await measure(() => compressed("br"));
  const web = await measure(() => webGzip(again()));
  console.log(`| ${name} | ${cell(gzip)} | ${cell(br)} | ${cell(web)} |`);
}

/** A body's text chunks, read once. */
async function collected(body: ReplyBody): Promise<string[]> {
  if (typeof body === "string") return [body];
  const out: string[] = [];
  if (body === null || body instanceof Uint8Array) return out;
  for await (const chunk of body) out.push(typeof chunk === "string" ? chunk : Buffer.from(chunk).toString());
  return out;
}

async function* replay(chunks: readonly string[]): AsyncGenerator<string> {
  yield* chunks;
}
