import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { describe, expect, it } from "vitest";
import { toNodeHandler } from "../adapters/node.js";
import { createAdmin, type UploadProgress } from "../src/index.js";
import { createAdminClient, type UploadSent } from "../src/admin-client/index.js";
import { createJsonLogger } from "../src/server/logging.js";
import { setup } from "./support/api.js";
import { ADMIN_TOKEN } from "./support/admin.js";

const DATASET = { teamId: "team_ops", name: "Big", type: "upload" as const, connectionId: null, source: null };

/**
 * `count` NDJSON lines of 20 bytes each (`{"n":1000000…}\n`), a chunk of `perChunk` lines at a time, the clock moved
 * `stepMs` before each.
 */
async function* ndjsonChunks(count: number, perChunk: number, step: () => void): AsyncGenerator<Uint8Array> {
  const encoder = new TextEncoder();
  for (let at = 0; at < count; at += perChunk) {
    step();
    let text = "";
    for (let n = at; n < Math.min(count, at + perChunk); n++) text += `{"n":${1_000_000 + n}}\n`.padEnd(20, " ");
    yield encoder.encode(text);
  }
}

describe("uploadDatasetRows: progress", () => {
  it("tells onProgress the rows and bytes so far, on the API's clock, at most once per progressEveryMs", async () => {
    const { api, clock } = await setup();
    const admin = createAdmin(api);
    await admin.putDataset("ds_big", DATASET);
    const seen: UploadProgress[] = [];
    // 10 chunks of 1,000 rows (20,000 bytes), 600 ms apart: one report per second of the clock.
    const body = { chunks: ndjsonChunks(10_000, 1000, () => clock.advance(600)), contentType: "application/x-ndjson" };
    const stored = await admin.uploadDatasetRows("ds_big", "replace", body, {
      onProgress: (p) => seen.push(p),
      progressEveryMs: 1000,
    });
    expect(stored.rowCount).toBe(10_000);
    expect(seen.map((p) => p.elapsedMs)).toEqual([1200, 2400, 3600, 4800, 6000]);
    expect(seen.map((p) => p.bytes)).toEqual([40_000, 80_000, 120_000, 160_000, 200_000]);
    // Rows are counted as the store takes them: behind the bytes read, never ahead.
    for (const p of seen) expect(p.rows).toBeLessThanOrEqual(p.bytes / 20);
    expect(seen.at(-1)!.rows).toBeGreaterThan(seen[0]!.rows);
    // writeDatasetRows takes the same options; a listener that throws does not fail the upload.
    const again = await admin.writeDatasetRows("ds_big", "append", [{ n: 1 }], {
      onProgress: () => {
        throw new Error("listener broke");
      },
      progressEveryMs: 0,
    });
    expect(again.rowCount).toBe(10_001);
  });

  it("logs `upload progress` lines for a long upload over HTTP, with the request id", async () => {
    const lines: string[] = [];
    const { api, clock } = await setup({
      adminToken: ADMIN_TOKEN,
      logger: createJsonLogger({ write: (line) => lines.push(line), requests: false }),
    });
    await createAdmin(api).putDataset("ds_big", DATASET);
    const chunks = ndjsonChunks(10_000, 1000, () => clock.advance(2000));
    const body = new ReadableStream<Uint8Array>({
      async pull(controller) {
        const next = await chunks.next();
        if (next.done) controller.close();
        else controller.enqueue(next.value);
      },
    });
    const init: RequestInit & { duplex: "half" } = {
      method: "PUT",
      headers: { authorization: `Bearer ${ADMIN_TOKEN}`, "content-type": "application/x-ndjson" },
      body,
      duplex: "half",
    };
    const res = await api.fetch(new Request("http://dataport.test/api/admin/v1/datasets/ds_big/rows", init));
    expect(res.status).toBe(200);
    const progress = lines.map((line) => JSON.parse(line)).filter((line) => line.msg === "upload progress");
    // Every 5 s of the clock: the 20 s upload logs at 6, 12 and 18 s.
    expect(progress.map((p) => [p.level, p.datasetId, p.mode, p.elapsedMs, p.bytes])).toEqual([
      ["info", "ds_big", "replace", 6000, 60_000],
      ["info", "ds_big", "replace", 12_000, 120_000],
      ["info", "ds_big", "replace", 18_000, 180_000],
    ]);
    expect(new Set(progress.map((p) => p.requestId))).toEqual(new Set([res.headers.get("x-request-id")]));
  });
});

describe("the admin client: upload progress", () => {
  async function listening() {
    const { api } = await setup({ adminToken: ADMIN_TOKEN });
    const server = createServer(toNodeHandler(api));
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const close = () => new Promise((resolve) => server.close(resolve).closeAllConnections());
    return { origin, close };
  }

  it("reports rows and bytes sent while a generator streams, and once done", async () => {
    const { origin, close } = await listening();
    try {
      const admin = createAdminClient({ baseUrl: `${origin}/api/admin/v1`, token: ADMIN_TOKEN, timeoutMs: 0 });
      await admin.datasets.put("ds_big", DATASET);
      async function* rows() {
        for (let i = 0; i < 5000; i++) yield { i };
      }
      const seen: UploadSent[] = [];
      const stored = await admin.datasets.replaceRows("ds_big", rows(), {
        onProgress: (p) => seen.push({ ...p }),
        progressEveryMs: 0,
      });
      expect(stored.rowCount).toBe(5000);
      const bytes = Array.from({ length: 5000 }, (_, i) => `{"i":${i}}\n`.length).reduce((a, b) => a + b, 0);
      expect(seen.at(-1)).toEqual({ bytes, rows: 5000, done: true });
      expect(seen.filter((p) => p.done)).toHaveLength(1);
      expect(seen.length).toBeGreaterThan(100);
      for (let i = 1; i < seen.length; i++) expect(seen[i]!.bytes).toBeGreaterThanOrEqual(seen[i - 1]!.bytes);
    } finally {
      await close();
    }
  });

  it("reports a body in hand once, whole; an encoded body without rows", async () => {
    const { origin, close } = await listening();
    try {
      const admin = createAdminClient({ baseUrl: `${origin}/api/admin/v1`, token: ADMIN_TOKEN });
      await admin.datasets.put("ds_big", DATASET);
      const seen: UploadSent[] = [];
      await admin.datasets.replaceRows("ds_big", [{ n: 1 }, { n: 2 }], { onProgress: (p) => seen.push(p) });
      await admin.datasets.appendRows("ds_big", { format: "csv", body: "n\n3\n" }, { onProgress: (p) => seen.push(p) });
      expect(seen).toEqual([
        { bytes: 16, rows: 2, done: true },
        { bytes: 4, rows: null, done: true },
      ]);
    } finally {
      await close();
    }
  });
});
