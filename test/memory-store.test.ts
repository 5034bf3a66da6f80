import { describe, expect, it } from "vitest";
import { parseFixture } from "../src/fixture/load.js";
import { createMemoryStorage } from "../src/memory/storage.js";
import { testFixture } from "./support/fixture.js";

describe("memory store", () => {
  it("a streaming read neither skips nor repeats rows when retention trims the front under it", async () => {
    const storage = createMemoryStorage();
    await storage.seed(parseFixture(testFixture()));
    const page = await storage.readDatasetRows("ds_orders", { offset: 0, limit: null, columns: ["order_id"], filters: null });
    const iterator = page.rows[Symbol.asyncIterator]();
    const seen: unknown[] = [];
    for (let i = 0; i < 2; i++) seen.push((await iterator.next()).value.order_id);
    for (const id of ["N-1", "N-2"]) {
      await storage.ingestWebhookRow({
        datasetId: "ds_orders",
        dedupKey: null,
        row: { _id: id, order_id: id },
        columns: [],
        retainRows: 5,
        receivedAt: "2026-11-01T00:00:00.000Z",
      });
    }
    for (;;) {
      const next = await iterator.next();
      if (next.done) break;
      seen.push(next.value.order_id);
    }
    expect(seen).toEqual(["A-1", "A-2", "A-3", "A-4", "A-5", "N-1", "N-2"]);
  });
});
