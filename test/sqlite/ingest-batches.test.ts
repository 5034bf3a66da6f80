import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import type { Storage } from "../../src/ports/storage.js";
import type { WebhookReceipt } from "../../src/ports/storage/webhooks.js";
import { createMemoryStorage } from "../../src/memory/memory-storage.js";
import { createSqliteStorage } from "../../src/sqlite/index.js";

const dir = mkdtempSync(join(tmpdir(), "dataport-ingest-batches-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** One group commit's deliveries (all handed over in one turn), as the memory store (the reference) answers them. */
async function deliver(
  storage: Storage,
  keys: Array<string | null>,
  retainRows: number,
): Promise<{ receipts: WebhookReceipt[]; rows: unknown[] }> {
  await storage.webhooks.createWebhookConnection({
    connection: { id: "c1", teamId: "t1", name: "hook", createdAt: "2026-11-01T00:00:00.000Z" },
    endpoint: { endpointId: "e1", signingSecret: null, retainRows },
    dataset: { id: "d1", name: "hook" },
  });
  const receipts = await Promise.all(
    keys.map((dedupKey, i) =>
      storage.webhooks.ingestWebhookRow({
        datasetId: "d1",
        dedupKey,
        row: { _id: `r${i}`, n: i },
        columns: [
          { name: "_id", type: "string" },
          { name: "n", type: "number" },
        ],
        retainRows,
        receivedAt: `2026-11-01T00:00:00.${String(i).padStart(3, "0")}Z`,
      }),
    ),
  );
  const page = await storage.rows.readDatasetRows("d1", { offset: 0, limit: null, columns: null, filters: null });
  const rows: unknown[] = [];
  for await (const row of page.rows) rows.push(row._id);
  // A key is remembered exactly as long as its row: a later delivery with each key says which are.
  const again = await Promise.all(
    [...new Set(keys.filter((k) => k !== null))].map((dedupKey) =>
      storage.webhooks.ingestWebhookRow({
        datasetId: "d1",
        dedupKey,
        row: { _id: `again-${dedupKey}`, n: -1 },
        columns: [],
        retainRows: 1000,
        receivedAt: "2026-11-02T00:00:00.000Z",
      }),
    ),
  );
  return { receipts: [...receipts, ...again], rows };
}

describe("SQLite: a group commit's rows are written together", () => {
  const cases: Array<[string, Array<string | null>, number]> = [
    ["a key twice in one batch", ["a", "b", "a", null, "b", "c"], 100],
    ["a key again after its first row left the window in the same batch", ["a", "b", "a", "b", "a"], 1],
    ["a key again after two rows of a window of two", ["a", "b", "c", "a", "c"], 2],
    [
      "more rows than one statement writes",
      Array.from({ length: 75 }, (_, i) => (i % 7 === 0 ? "k" : `k${i % 20}`)),
      30,
    ],
  ];
  for (const [name, keys, retainRows] of cases) {
    it(`answers as the memory store does: ${name}`, async () => {
      const reference = await deliver(createMemoryStorage(), keys, retainRows);
      const sqlite = createSqliteStorage({ path: join(dir, `${name.replace(/\W+/g, "-")}.sqlite`) });
      try {
        expect(await deliver(sqlite, keys, retainRows)).toEqual(reference);
      } finally {
        await sqlite.close();
      }
    });
  }
});
