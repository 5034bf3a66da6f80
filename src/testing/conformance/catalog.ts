import { describe, expect, it } from "vitest";
import type { Row } from "../../domain/model.js";
import type { RowQuery } from "../../ports/storage/catalog.js";
import { type ConformanceOptions, seededStore, type StorageFactory } from "./harness.js";

async function collect(rows: AsyncIterable<Row>): Promise<Row[]> {
  const out: Row[] = [];
  for await (const row of rows) out.push({ ...row });
  return out;
}

const all: RowQuery = { offset: 0, limit: null, columns: null, filters: null };

export function describeCatalogConformance(name: string, factory: StorageFactory, options: ConformanceOptions): void {
  describe.skipIf(!!options.skip)(`${name}: catalog`, () => {
    const seeded = seededStore(factory);

    it("lists a team's datasets and input tables by name, optionally only some ids", async () => {
      const store = await seeded();
      expect((await store.listDatasets({ teamId: "team_ops" })).map((d) => [d.id, d.type])).toEqual([
        ["ds_orders", "upload"],
        ["ds_secret", "upload"],
        ["tbl_targets", "input_table"],
        ["ds_stores", "connection"],
      ]);
      expect((await store.listDatasets({ teamId: "team_ops", ids: ["ds_stores", "tbl_targets", "ds_campaigns"] })).map((d) => d.id)).toEqual([
        "tbl_targets",
        "ds_stores",
      ]);
      expect(await store.listDatasets({ teamId: "team_ops", ids: [] })).toEqual([]);
    });

    it("gets datasets and tables with their metadata", async () => {
      const store = await seeded();
      expect(await store.getDataset("ds_stores")).toEqual({
        id: "ds_stores",
        teamId: "team_ops",
        name: "Stores",
        type: "connection",
        connectionId: "conn_retail",
        source: "stores",
        columns: [
          { name: "store_id", type: "string" },
          { name: "city", type: "string" },
        ],
        rowCount: 1,
        lastRefreshedAt: "2026-10-03T00:00:00Z",
        updatedAt: "2026-10-03T00:00:00Z",
      });
      expect(await store.getDataset("tbl_targets")).toMatchObject({ type: "input_table", rowCount: 1, connectionId: null });
      expect(await store.getDataset("nope")).toBeNull();
      expect(await store.getConnection("conn_retail")).toMatchObject({ id: "conn_retail", type: "memory", name: "Retail warehouse" });
      expect((await store.listConnections("team_ops")).map((c) => c.id)).toEqual(["conn_retail"]);
    });

    it("pages rows in stored order with offset and limit pushed down", async () => {
      const store = await seeded();
      const page = await store.readDatasetRows("ds_orders", { ...all, offset: 1, limit: 2 });
      expect(page.totalRows).toBe(5);
      expect(await collect(page.rows)).toEqual([
        { order_id: "A-2", amount: 30, region: "AMER" },
        { order_id: "A-3", amount: 7.25, region: "EMEA" },
      ]);
      expect(await collect((await store.readDatasetRows("ds_orders", { ...all, offset: 5 })).rows)).toEqual([]);
      expect(await collect((await store.readDatasetRows("ds_orders", { ...all, limit: 0 })).rows)).toEqual([]);
      expect((await collect((await store.readDatasetRows("ds_orders", all)).rows)).map((r) => r.order_id)).toEqual(["A-1", "A-2", "A-3", "A-4", "A-5"]);
    });

    it("filters by JSON equality and selects columns in the asked order", async () => {
      const store = await seeded();
      const page = await store.readDatasetRows("ds_orders", { offset: 1, limit: 5, columns: ["amount", "order_id"], filters: { region: "EMEA" } });
      expect(page.totalRows).toBe(3);
      expect(await collect(page.rows)).toEqual([
        { amount: 7.25, order_id: "A-3" },
        { amount: 1, order_id: "A-5" },
      ]);
      const typed = await store.readDatasetRows("ds_orders", { ...all, filters: { amount: "30" } });
      expect(typed.totalRows).toBe(0);
      const number = await store.readDatasetRows("ds_orders", { ...all, filters: { amount: 30 } });
      expect((await collect(number.rows)).map((r) => r.order_id)).toEqual(["A-2"]);
    });

    it("gives rowsJson, when it offers it, as exactly the JSON of the rows it would yield", async () => {
      const store = await seeded();
      for (const query of [all, { ...all, offset: 1, limit: 2 }, { ...all, filters: { region: "EMEA" } }]) {
        const json = (await store.readDatasetRows("ds_orders", query)).rowsJson;
        if (!json) continue; // optional capability
        const texts: string[] = [];
        for await (const text of json) texts.push(text);
        const rows = await collect((await store.readDatasetRows("ds_orders", query)).rows);
        expect(texts.map((t) => JSON.parse(t))).toEqual(rows);
        expect(texts).toEqual(rows.map((r) => JSON.stringify(r)));
      }
    });

    it("replaces a connection dataset's rows in one step", async () => {
      const store = await seeded();
      await store.replaceDatasetRows("ds_stores", {
        rows: [
          { store_id: "S2", city: "Oslo", open: true },
          { store_id: "S3", city: "Rome", open: false },
        ],
        columns: [
          { name: "store_id", type: "string" },
          { name: "city", type: "string" },
          { name: "open", type: "boolean" },
        ],
        refreshedAt: "2026-11-01T00:00:00.000Z",
      });
      const dataset = await store.getDataset("ds_stores");
      expect(dataset).toMatchObject({ rowCount: 2, lastRefreshedAt: "2026-11-01T00:00:00.000Z", updatedAt: "2026-11-01T00:00:00.000Z" });
      expect(dataset?.columns.map((c) => c.name)).toEqual(["store_id", "city", "open"]);
      expect(await collect((await store.readDatasetRows("ds_stores", all)).rows)).toEqual([
        { store_id: "S2", city: "Oslo", open: true },
        { store_id: "S3", city: "Rome", open: false },
      ]);
    });
  });
}
