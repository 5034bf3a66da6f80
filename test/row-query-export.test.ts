import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import http from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import type { AuditEvent } from "../src/domain/model.js";
import { createMemoryStorage } from "../src/memory/memory-storage.js";
import type { Storage } from "../src/ports/storage.js";
import { createSqliteStorage } from "../src/sqlite/index.js";
import { NOW, setup } from "./support/api.js";
import { postgresStores } from "./support/postgres-stores.js";
import { postgresSkipReason } from "./support/services.js";
import { exportRow } from "./support/export-server.js";
import { TOKENS } from "./support/fixture.js";
import { startServerProcess, stopProcess } from "./support/server-process.js";

/** A store whose audit writes are also collected, for the data_access events a read leaves. */
function audited(storage: Storage): { storage: Storage; reads: () => AuditEvent[] } {
  const events: AuditEvent[] = [];
  const append = storage.audit.appendAuditEvent.bind(storage.audit);
  storage.audit.appendAuditEvent = async (event, storedAt) => {
    events.push(event);
    return append(event, storedAt);
  };
  return { storage, reads: () => events.filter((e) => e.category === "data_access") };
}

const pgSkip = await postgresSkipReason();
const pg = postgresStores({ prefix: "dp_rq_export", maxConnections: 4 });

const stores: Array<[name: string, make: () => Storage | Promise<Storage>, skip: string | undefined]> = [
  ["memory", () => createMemoryStorage(), undefined],
  ["sqlite", () => createSqliteStorage({ path: ":memory:" }), undefined],
  ["postgres", () => pg.store(undefined, false), pgSkip],
];

for (const [name, makeStorage, skip] of stores) {
  describe.skipIf(!!skip)(`a read exported counts and is audited like any rows read (${name})`, () =>
    auditedReads(makeStorage),
  );
}

function auditedReads(makeStorage: () => Storage | Promise<Storage>): void {
  async function apiReads(
    call: Awaited<ReturnType<typeof setup>>["call"],
    id: string,
  ): Promise<{ api_reads: number; last_api_read_at: string | null }> {
    const usage = await call("GET", "/api/v1/space/dataset-usage?teamId=team_ops", { token: TOKENS.sessionAda });
    return usage.json.rows.find((r: { dataset_id: string }) => r.dataset_id === id);
  }

  it("a table read, as a JSON page or a download, is a data_access event table.rows.read and counts in dataset-usage", async () => {
    const { storage, reads } = audited(await makeStorage());
    const { call } = await setup({ storage });
    for (const [region, target] of [
      ["AMER", 5],
      ["APAC", 50],
      ["LATAM", 500],
    ] as const) {
      expect(
        (await call("POST", "/api/v1/tables/tbl_targets/rows", { token: TOKENS.sync, body: { region, target } }))
          .status,
      ).toBe(201);
    }
    const before = await apiReads(call, "tbl_targets");
    const url = (params: Record<string, string>) => `/api/v1/tables/tbl_targets/rows?${new URLSearchParams(params)}`;
    const init = { token: TOKENS.sync, headers: { "user-agent": "sync/1" } };

    const page = await call("GET", url({ sort: "target", limit: "2" }), init);
    expect(page.json.data.map((r: { region: string }) => r.region)).toEqual(["AMER", "APAC"]);
    const rest = await call("GET", url({ sort: "target", format: "csv", cursor: page.json.metadata.nextCursor }), init);
    expect(rest.text.split("\r\n").map((line) => line.split(",")[1])).toEqual(["region", "LATAM", "EMEA", undefined]);
    const big = await call("GET", url({ where: JSON.stringify({ target: { gte: 50 } }), limit: "1" }), {
      ...init,
      headers: { ...init.headers, accept: "application/x-ndjson" },
    });
    expect(
      big.text
        .trim()
        .split("\n")
        .map((line) => JSON.parse(line).region),
    ).toEqual(["EMEA"]);
    const refused = await call("GET", url({ sort: "nope", format: "csv" }), init);
    expect(refused.status).toBe(400);

    await vi.waitFor(() => expect(reads()).toHaveLength(3));
    const common = {
      teamId: "team_ops",
      category: "data_access",
      action: "table.rows.read",
      actor: { type: "api-key", id: "key_sync", name: "Warehouse sync" },
      target: { type: "table", id: "tbl_targets" },
      outcome: "success",
      ip: "198.51.100.7",
      userAgent: "sync/1",
      time: NOW,
    };
    expect(reads()).toEqual([
      {
        ...common,
        id: expect.any(String),
        details: { requestId: page.headers.get("x-request-id"), offset: 0, returnedRows: 2 },
      },
      {
        ...common,
        id: expect.any(String),
        details: { requestId: rest.headers.get("x-request-id"), offset: 2, returnedRows: 2, format: "csv" },
      },
      {
        ...common,
        id: expect.any(String),
        details: { requestId: big.headers.get("x-request-id"), offset: 0, returnedRows: 1, format: "ndjson" },
      },
    ]);
    // The three reads count, the refused one does not.
    await vi.waitFor(async () =>
      expect(await apiReads(call, "tbl_targets")).toMatchObject({
        api_reads: before.api_reads + 3,
        last_api_read_at: NOW,
      }),
    );
  });

  it("a dataset download is audited as dataset.rows.read with its format and the rows it holds, and counts as a read", async () => {
    const { storage, reads } = audited(await makeStorage());
    const { call } = await setup({ storage });
    const before = await apiReads(call, "ds_orders");
    const csv = await call(
      "GET",
      "/api/v1/datasets/ds_orders/rows?format=csv&sort=amount&offset=1&maxRows=2&columns=order_id,amount",
      { token: TOKENS.sync },
    );
    expect(csv.text).toBe("order_id,amount\r\nA-3,7.25\r\nA-1,12.5\r\n");
    await vi.waitFor(() => expect(reads()).toHaveLength(1));
    expect(reads()[0]).toEqual({
      id: expect.any(String),
      time: NOW,
      teamId: "team_ops",
      category: "data_access",
      action: "dataset.rows.read",
      actor: { type: "api-key", id: "key_sync", name: "Warehouse sync" },
      target: { type: "dataset", id: "ds_orders" },
      outcome: "success",
      ip: "198.51.100.7",
      userAgent: null,
      details: { requestId: csv.headers.get("x-request-id"), offset: 1, returnedRows: 2, format: "csv" },
    });
    await vi.waitFor(async () =>
      expect(await apiReads(call, "ds_orders")).toMatchObject({
        api_reads: before.api_reads + 1,
        last_api_read_at: NOW,
      }),
    );
  });
}

/**
 * A large download streams: the server (a process of its own, on a SQLite
 * file) grows its RSS by far less than the download's size. The bound for
 * 1,000,000 rows is 150 MB (row-queries.md; `npm run bench -- export`
 * measures that); these 150,000 rows are about 45 MB of CSV, and a server
 * holding them (as text, or as row objects) would grow past the limit here.
 */
describe.skipIf(!existsSync("/proc/self/status"))("a large export streams", () => {
  const ROWS = 150_000;
  const LIMIT_MB = 40;
  let dir: string;
  let server: Awaited<ReturnType<typeof startServerProcess>>;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "dataport-export-"));
    server = await startServerProcess(["test/support/export-server.ts", join(dir, "export.sqlite"), String(ROWS)]);
  }, 120_000);

  afterAll(async () => {
    if (server) await stopProcess(server.child, "SIGTERM");
    rmSync(dir, { recursive: true, force: true });
  });

  it.each(["csv", "ndjson"] as const)(
    `%s: all ${ROWS.toLocaleString("en-US")} rows, exact, with the server's RSS growing by less than ${LIMIT_MB} MB`,
    async (format) => {
      const url = `${server.url}/api/v1/datasets/ds_export/rows?format=${format}`;
      await download(`${url}&maxRows=1000`); // the export path warmed up before the idle figure
      const pid = server.child.pid!;
      const idle = rss(pid);
      writeFileSync(`/proc/${pid}/clear_refs`, "5"); // VmHWM := VmRSS
      let peak = idle;
      const sampler = setInterval(() => (peak = Math.max(peak, rss(pid))), 10);
      const got = await download(url).finally(() => clearInterval(sampler));
      peak = Math.max(peak, rss(pid, "VmHWM"));

      const lines = format === "csv" ? ROWS + 1 : ROWS;
      expect(got.lines).toBe(lines);
      const asCsv = (i: number) => {
        const row = exportRow(i);
        return `${row.id},${row.lane},${row.weightKg},"${String(row.note).replace(/"/g, '""')}"`;
      };
      if (format === "csv") {
        expect(got.head.slice(0, 2)).toEqual(["id,lane,weightKg,note", asCsv(0)]);
        expect(got.last).toBe(asCsv(ROWS - 1));
      } else {
        expect(JSON.parse(got.head[0]!)).toEqual(exportRow(0));
        expect(JSON.parse(got.last)).toEqual(exportRow(ROWS - 1));
      }
      expect(got.bytes).toBeGreaterThan(ROWS * 280);
      expect((peak - idle) / 1024 / 1024).toBeLessThan(LIMIT_MB);
    },
    120_000,
  );
});

function rss(pid: number, field: "VmRSS" | "VmHWM" = "VmRSS"): number {
  const text = readFileSync(`/proc/${pid}/status`, "utf8");
  return Number(new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(text)![1]) * 1024;
}

/**
 * A download drained as it arrives: its size, its line count, its first lines and its last line (nothing else kept).
 */
function download(url: string): Promise<{ bytes: number; lines: number; head: string[]; last: string }> {
  return new Promise((resolve, reject) => {
    http
      .get(url, { headers: { authorization: `Bearer ${TOKENS.sessionAda}` } }, (res) => {
        if (res.statusCode !== 200) reject(new Error(`${url}: ${res.statusCode}`));
        let bytes = 0;
        let lines = 0;
        let head = "";
        let tail = "";
        res.on("data", (chunk: Buffer) => {
          bytes += chunk.length;
          for (let i = chunk.indexOf(10); i !== -1; i = chunk.indexOf(10, i + 1)) lines++;
          if (head.length < 2048) head += chunk.toString("utf8");
          tail = (tail + chunk.toString("utf8")).slice(-2048);
        });
        res.on("end", () =>
          resolve({
            bytes,
            lines,
            head: head.split(/\r?\n/),
            last: tail
              .replace(/\r?\n$/, "")
              .split(/\r?\n/)
              .at(-1)!,
          }),
        );
        res.on("error", reject);
      })
      .on("error", reject);
  });
}
