import { describe, expect, it } from "vitest";
import type { Column, ConnectionRecord, DatasetRecord, Row } from "../../domain/model.js";
import type { Storage } from "../../ports/storage.js";
import type { DatasetRowsWrite, RowQuery } from "../../ports/storage/rows.js";
import { type ConformanceOptions, readAllPages, seededStore, type StorageFactory, tick } from "./harness.js";
import { webhookFixture } from "./webhooks.js";

async function collect(rows: AsyncIterable<Row>): Promise<Row[]> {
  const out: Row[] = [];
  for await (const row of rows) out.push({ ...row });
  return out;
}

const all: RowQuery = { offset: 0, limit: null, columns: null, filters: null };
const rowsOf = async (store: Storage, datasetId: string) =>
  collect((await store.rows.readDatasetRows(datasetId, all)).rows);

const ORDERS: Row[] = [
  { order_id: "A-1", amount: 12.5, region: "EMEA" },
  { order_id: "A-2", amount: 30, region: "AMER" },
  { order_id: "A-3", amount: 7.25, region: "EMEA" },
  { order_id: "A-4", amount: 99, region: "APAC" },
  { order_id: "A-5", amount: 1, region: "EMEA" },
];
const NEW_COLUMNS: Column[] = [
  { name: "order_id", type: "string" },
  { name: "amount", type: "number" },
  { name: "note", type: "string" },
];
const UPDATED_AT = "2026-11-01T12:00:00.000Z";

/** A one-shot gate: `open()` lets everything awaiting `opened` continue. */
function gate() {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  return { opened, open };
}

/**
 * Rows as a stream, each after a pause (so concurrent work interleaves). With
 * `hold`, the stream stops before row `hold.before` until the gate opens,
 * after telling `hold.reached`; with `failAfter`, it throws after that many rows.
 */
async function* stream(
  rows: readonly Row[],
  options: { hold?: { before: number; reached: () => void; until: Promise<void> }; failAfter?: number } = {},
) {
  for (let i = 0; i < rows.length; i++) {
    if (options.failAfter === i) throw new Error("the upload broke off");
    if (options.hold?.before === i) {
      options.hold.reached();
      await options.hold.until;
    }
    await tick();
    yield { ...rows[i]! };
  }
  if (options.failAfter === rows.length) throw new Error("the upload broke off");
}

/**
 * A bulk write of `rows`; `columnsCalls` records, for each call of `columns()`, whether the rows had all been read by
 * then.
 */
function bulk(
  store: Storage,
  datasetId: string,
  mode: DatasetRowsWrite["mode"],
  rows: AsyncIterable<Row>,
  columns: Column[] = NEW_COLUMNS,
) {
  const columnsCalls: boolean[] = [];
  let finished = false;
  async function* watched() {
    yield* rows;
    finished = true;
  }
  const done = store.rows.writeDatasetRows({
    datasetId,
    mode,
    rows: watched(),
    columns: () => {
      columnsCalls.push(finished);
      return columns;
    },
    updatedAt: UPDATED_AT,
  });
  return { done, columnsCalls };
}

export function describeCatalogConformance(
  name: string,
  factory: StorageFactory,
  options: ConformanceOptions = {},
): void {
  describe.skipIf(!!options.skip)(`${name}: catalog`, () => {
    const seeded = seededStore(factory, options);
    const withWebhooks = seededStore(factory, options, webhookFixture);

    it("lists a team's datasets and input tables by name, optionally only some ids", async () => {
      const store = await seeded();
      expect((await store.catalog.listDatasets({ teamId: "team_ops" })).map((d) => [d.id, d.type])).toEqual([
        ["ds_orders", "upload"],
        ["ds_secret", "upload"],
        ["tbl_targets", "input_table"],
        ["ds_stores", "connection"],
      ]);
      expect(
        (
          await store.catalog.listDatasets({ teamId: "team_ops", ids: ["ds_stores", "tbl_targets", "ds_campaigns"] })
        ).map((d) => d.id),
      ).toEqual(["tbl_targets", "ds_stores"]);
      expect(await store.catalog.listDatasets({ teamId: "team_ops", ids: [] })).toEqual([]);
    });

    it("gets datasets and tables with their metadata", async () => {
      const store = await seeded();
      expect(await store.catalog.getDataset("ds_stores")).toEqual({
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
      expect(await store.catalog.getDataset("tbl_targets")).toMatchObject({
        type: "input_table",
        rowCount: 1,
        connectionId: null,
      });
      expect(await store.catalog.getDataset("nope")).toBeNull();
      expect(await store.catalog.getConnection("conn_retail")).toMatchObject({
        id: "conn_retail",
        type: "memory",
        name: "Retail warehouse",
      });
      expect((await store.catalog.listConnections("team_ops")).map((c) => c.id)).toEqual(["conn_retail"]);
    });

    it("lists every connection by id (binary order), a page at a time", async () => {
      const store = await seeded();
      const conn = (id: string): ConnectionRecord => ({
        id,
        teamId: "team_mkt",
        name: `Connection ${id}`,
        type: "memory",
        config: { tables: {} },
        createdAt: "2026-11-01T00:00:00Z",
      });
      for (const id of ["conn_z", "conn_A", "conn_b"])
        expect(await store.catalog.putConnection(conn(id))).toBe("created");
      expect(await store.catalog.listAllConnections({ after: null, limit: 2 })).toEqual([
        conn("conn_A"),
        conn("conn_b"),
      ]);
      expect((await store.catalog.listAllConnections({ after: "conn_b", limit: 2 })).map((c) => c.id)).toEqual([
        "conn_retail",
        "conn_z",
      ]);
      expect(await store.catalog.listAllConnections({ after: "conn_z", limit: 2 })).toEqual([]);
      expect((await readAllPages((page) => store.catalog.listAllConnections(page), 1)).map((c) => c.id)).toEqual([
        "conn_A",
        "conn_b",
        "conn_retail",
        "conn_z",
      ]);
    });

    it("lists every upload and connection dataset of every team by id, never an input table", async () => {
      const store = await seeded();
      expect((await store.catalog.listAllDatasets({ after: null, limit: 3 })).map((d) => d.id)).toEqual([
        "ds_campaigns",
        "ds_orders",
        "ds_secret",
      ]);
      expect(await store.catalog.listAllDatasets({ after: "ds_secret", limit: 3 })).toEqual([
        await store.catalog.getDataset("ds_stores"),
      ]);
      expect(await store.catalog.listAllDatasets({ after: "ds_stores", limit: 3 })).toEqual([]);
      expect((await readAllPages((page) => store.catalog.listAllDatasets(page), 2)).map((d) => d.id)).toEqual([
        "ds_campaigns",
        "ds_orders",
        "ds_secret",
        "ds_stores",
      ]);
    });

    it("puts a connection: created, then updated with its config replaced, not merged", async () => {
      const store = await seeded();
      const pg: ConnectionRecord = {
        id: "conn_pg",
        teamId: "team_ops",
        name: "Warehouse",
        type: "postgres",
        config: { url: "postgres://db.example.test/w", options: { ssl: true, schemas: ["a", "b"] } },
        createdAt: "2026-11-01T00:00:00Z",
      };
      expect(await store.catalog.putConnection(pg)).toBe("created");
      expect(await store.catalog.getConnection("conn_pg")).toEqual(pg);
      expect((await store.catalog.listConnections("team_ops")).map((c) => c.id)).toEqual(["conn_pg", "conn_retail"]);
      expect(
        await store.catalog.putConnection({
          ...pg,
          name: "Warehouse 2",
          config: { url: "postgres://db2.example.test/w" },
        }),
      ).toBe("updated");
      expect(await store.catalog.getConnection("conn_pg")).toEqual({
        ...pg,
        name: "Warehouse 2",
        config: { url: "postgres://db2.example.test/w" },
      });
      expect((await store.catalog.listAllConnections({ after: null, limit: 10 })).map((c) => c.id)).toEqual([
        "conn_pg",
        "conn_retail",
      ]);
    });

    it("a webhook connection's put is what the receiver sees next; another connection's endpoint id is refused", async () => {
      const store = await withWebhooks();
      const gh = (await store.catalog.getConnection("conn_hook_gh"))!;
      expect(await store.catalog.putConnection({ ...gh, config: { ...gh.config, signingSecret: "rotated" } })).toBe(
        "updated",
      );
      expect(await store.webhooks.getWebhookEndpoint("hook-gh")).toMatchObject({
        connectionId: "conn_hook_gh",
        datasetId: "ds_conn_hook_gh",
        signingSecret: "rotated",
      });

      await expect(
        store.catalog.putConnection({ ...gh, config: { ...gh.config, endpointId: "hook-open" } }),
      ).rejects.toThrow();
      expect((await store.catalog.getConnection("conn_hook_gh"))!.config).toEqual({
        ...gh.config,
        signingSecret: "rotated",
      });
      expect((await store.webhooks.getWebhookEndpoint("hook-open"))?.connectionId).toBe("conn_hook_open");
      expect((await store.webhooks.getWebhookEndpoint("hook-gh"))?.connectionId).toBe("conn_hook_gh");

      expect(
        await store.catalog.putConnection({ ...gh, name: "Moved", config: { ...gh.config, endpointId: "hook-moved" } }),
      ).toBe("updated");
      expect(await store.webhooks.getWebhookEndpoint("hook-gh")).toBeNull();
      expect(await store.webhooks.getWebhookEndpoint("hook-moved")).toEqual({
        connectionId: "conn_hook_gh",
        teamId: "team_ops",
        name: "Moved",
        datasetId: "ds_conn_hook_gh",
        endpointId: "hook-moved",
        signingSecret: gh.config.signingSecret,
        retainRows: null,
        signature: { scheme: "auto" },
        previousSecret: null,
      });
      // The config is where the receiver reads the signature scheme and a rotation's previous secret.
      const config = {
        ...gh.config,
        endpointId: "hook-moved",
        signature: { scheme: "hmac-sha256-hex", header: "X-Signature" },
      };
      await store.catalog.putConnection({
        ...gh,
        config: { ...config, previousSigningSecret: "old", previousSecretValidUntil: UPDATED_AT },
      });
      expect(await store.webhooks.getWebhookEndpoint("hook-moved")).toMatchObject({
        signature: { scheme: "hmac-sha256-hex", header: "X-Signature" },
        previousSecret: { secret: "old", validUntilMs: Date.parse(UPDATED_AT) },
      });
    });

    it("deletes a connection with its datasets and their rows, and nothing else", async () => {
      const store = await seeded();
      expect(await store.catalog.deleteConnection("conn_retail")).toBe(true);
      expect(await store.catalog.getConnection("conn_retail")).toBeNull();
      expect(await store.catalog.getDataset("ds_stores")).toBeNull();
      expect((await store.catalog.listDatasets({ teamId: "team_ops" })).map((d) => d.id)).toEqual([
        "ds_orders",
        "ds_secret",
        "tbl_targets",
      ]);
      expect(await store.catalog.listConnections("team_ops")).toEqual([]);
      expect(await store.catalog.listAllConnections({ after: null, limit: 10 })).toEqual([]);
      expect((await store.catalog.listAllDatasets({ after: null, limit: 10 })).map((d) => d.id)).toEqual([
        "ds_campaigns",
        "ds_orders",
        "ds_secret",
      ]);
      expect(await rowsOf(store, "ds_orders")).toEqual(ORDERS);
      expect(await store.catalog.deleteConnection("conn_retail")).toBe(false);
      expect(await store.catalog.deleteConnection("conn_nope")).toBe(false);
      // The dataset id is free again, with no rows left behind.
      const stores = {
        id: "ds_stores",
        teamId: "team_ops",
        name: "Stores",
        type: "upload",
        connectionId: null,
        source: null,
        columns: [],
        rowCount: 0,
        lastRefreshedAt: null,
        updatedAt: UPDATED_AT,
      } as const;
      expect(await store.catalog.putDataset({ ...stores, columns: [] })).toBe("created");
      expect((await store.rows.readDatasetRows("ds_stores", all)).totalRows).toBe(0);
    });

    it("deletes a webhook connection with its endpoint, dataset, rows and dedup keys", async () => {
      const store = await withWebhooks();
      const delivery = (id: string) => {
        const row: Row = Object.create(null);
        Object.assign(row, { _id: id, n: 1 });
        return store.webhooks.ingestWebhookRow({
          datasetId: "ds_conn_hook_gh",
          dedupKey: "h:1",
          row,
          columns: [
            { name: "_id", type: "string" },
            { name: "n", type: "number" },
          ],
          retainRows: 100,
          receivedAt: UPDATED_AT,
        });
      };
      expect(await delivery("r1")).toEqual({ id: "r1", duplicate: false });
      expect(await store.catalog.deleteConnection("conn_hook_gh")).toBe(true);
      expect(await store.webhooks.getWebhookEndpoint("hook-gh")).toBeNull();
      expect(await store.catalog.getDataset("ds_conn_hook_gh")).toBeNull();
      expect(await store.webhooks.getWebhookEndpoint("hook-open")).toMatchObject({ connectionId: "conn_hook_open" });
      // Ids and the endpoint id can be taken again; the old dedup key went with its row.
      await store.webhooks.createWebhookConnection({
        connection: { id: "conn_hook_gh", teamId: "team_ops", name: "Again", createdAt: UPDATED_AT },
        endpoint: { endpointId: "hook-gh", signingSecret: null, retainRows: null },
        dataset: { id: "ds_conn_hook_gh", name: "Again" },
      });
      expect(await store.catalog.getDataset("ds_conn_hook_gh")).toMatchObject({ rowCount: 0, columns: [] });
      expect(await delivery("r2")).toEqual({ id: "r2", duplicate: false });
      expect((await rowsOf(store, "ds_conn_hook_gh")).map((r) => r._id)).toEqual(["r2"]);
    });

    it("puts a dataset: created without rows, replaced keeping its rows; rowCount is always the store's", async () => {
      const store = await seeded();
      const created: DatasetRecord = {
        id: "ds_new",
        teamId: "team_ops",
        name: "New",
        type: "connection",
        connectionId: "conn_retail",
        source: "stores",
        columns: [{ name: "a", type: "number" }],
        rowCount: 42,
        lastRefreshedAt: null,
        updatedAt: "2026-11-01T00:00:00Z",
      };
      expect(await store.catalog.putDataset(created)).toBe("created");
      expect(await store.catalog.getDataset("ds_new")).toEqual({ ...created, rowCount: 0 });
      expect((await store.rows.readDatasetRows("ds_new", all)).totalRows).toBe(0);
      expect((await store.catalog.listDatasets({ teamId: "team_ops" })).map((d) => d.id)).toEqual([
        "ds_new",
        "ds_orders",
        "ds_secret",
        "tbl_targets",
        "ds_stores",
      ]);

      const orders = (await store.catalog.getDataset("ds_orders"))!;
      const replaced = {
        ...orders,
        name: "Orders",
        columns: [{ name: "order_id", type: "string" as const }],
        rowCount: 999,
        lastRefreshedAt: "2026-11-01T01:00:00Z",
        updatedAt: UPDATED_AT,
      };
      expect(await store.catalog.putDataset(replaced)).toBe("updated");
      expect(await store.catalog.getDataset("ds_orders")).toEqual({ ...replaced, rowCount: 5 });
      expect(await rowsOf(store, "ds_orders")).toEqual(ORDERS);
    });

    it("deletes an upload or connection dataset and its rows; never an input table", async () => {
      const store = await seeded();
      const orders = (await store.catalog.getDataset("ds_orders"))!;
      expect(await store.catalog.deleteDataset("ds_orders")).toBe(true);
      expect(await store.catalog.getDataset("ds_orders")).toBeNull();
      expect((await store.catalog.listDatasets({ teamId: "team_ops" })).map((d) => d.id)).toEqual([
        "ds_secret",
        "tbl_targets",
        "ds_stores",
      ]);
      expect(await store.catalog.deleteDataset("ds_orders")).toBe(false);
      expect(await store.catalog.putDataset(orders)).toBe("created");
      expect(await store.catalog.getDataset("ds_orders")).toEqual({ ...orders, rowCount: 0 });
      expect(await rowsOf(store, "ds_orders")).toEqual([]);
      expect(await store.catalog.deleteDataset("tbl_targets")).toBe(false);
      expect(await store.catalog.getDataset("tbl_targets")).toMatchObject({ type: "input_table", rowCount: 1 });
      expect(await store.catalog.deleteDataset("ds_nope")).toBe(false);
      expect(await store.catalog.getConnection("conn_retail")).not.toBeNull();
    });
  });
}
