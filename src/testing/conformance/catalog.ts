import { describe, expect, it } from "vitest";
import type { Column, ConnectionRecord, DatasetRecord, Row } from "../../domain/model.js";
import type { Storage } from "../../ports/storage.js";
import type { DatasetRowsWrite, RowQuery } from "../../ports/storage/catalog.js";
import type { RowCondition } from "../../domain/row-query-model.js";
import { compareKeys, keyOf } from "../../domain/row-query-order.js";
import { type ConformanceOptions, readAllPages, seededStore, type StorageFactory, tick } from "./harness.js";
import { webhookFixture } from "./webhooks.js";

async function collect(rows: AsyncIterable<Row>): Promise<Row[]> {
  const out: Row[] = [];
  for await (const row of rows) out.push({ ...row });
  return out;
}

const all: RowQuery = { offset: 0, limit: null, columns: null, filters: null };
const rowsOf = async (store: Storage, datasetId: string) => collect((await store.catalog.readDatasetRows(datasetId, all)).rows);

const ORDERS: Row[] = [
  { order_id: "A-1", amount: 12.5, region: "EMEA" },
  { order_id: "A-2", amount: 30, region: "AMER" },
  { order_id: "A-3", amount: 7.25, region: "EMEA" },
  { order_id: "A-4", amount: 99, region: "APAC" },
  { order_id: "A-5", amount: 1, region: "EMEA" },
];
const ORDER_COLUMNS: Column[] = [
  { name: "order_id", type: "string" },
  { name: "amount", type: "number" },
  { name: "region", type: "string" },
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
async function* stream(rows: readonly Row[], options: { hold?: { before: number; reached: () => void; until: Promise<void> }; failAfter?: number } = {}) {
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

/** A bulk write of `rows`; `columnsCalls` records, for each call of `columns()`, whether the rows had all been read by then. */
function bulk(store: Storage, datasetId: string, mode: DatasetRowsWrite["mode"], rows: AsyncIterable<Row>, columns: Column[] = NEW_COLUMNS) {
  const columnsCalls: boolean[] = [];
  let finished = false;
  async function* watched() {
    yield* rows;
    finished = true;
  }
  const done = store.catalog.writeDatasetRows({
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

const nb = (prefix: string, n: number): Row[] => Array.from({ length: n }, (_, i) => ({ order_id: `${prefix}-${i + 1}`, amount: i + 1, note: prefix }));


/** Rows of several JSON kinds per column, for `where` and `sort` (positions 0–7). */
const MIXED: Row[] = [
  { id: "r0", amount: 10, name: "apple", flag: true, tags: ["a"] },
  { id: "r1", amount: 2.5, name: "Banana", flag: false },
  { id: "r2", amount: null, name: "cherry", flag: true },
  { id: "r3", name: "apricot" },
  { id: "r4", amount: "10", name: "", flag: null },
  { id: "r5", amount: 10, name: "éclair", flag: false, tags: { k: 1 } },
  { id: "r6", amount: -1, name: "😀 smile", flag: true },
  { id: "r7", amount: true, name: "\uffff end" },
];
const MIXED_COLUMNS: Column[] = ["id", "amount", "name", "flag", "tags"].map((name) => ({ name, type: "string" }));

/** A new upload dataset holding `rows`. */
async function datasetWith(store: Storage, id: string, rows: readonly Row[], columns: Column[] = MIXED_COLUMNS): Promise<void> {
  await store.catalog.putDataset({
    id,
    teamId: "team_ops",
    name: id,
    type: "upload",
    connectionId: null,
    source: null,
    columns,
    rowCount: 0,
    lastRefreshedAt: null,
    updatedAt: UPDATED_AT,
  });
  await store.catalog.writeDatasetRows({ datasetId: id, mode: "replace", rows: stream(rows), columns: () => columns, updatedAt: UPDATED_AT });
}

/** The ids of a query's page on `ds_mixed`, with its total. */
async function idsOf(store: Storage, query: Partial<RowQuery>): Promise<{ total: number; ids: unknown[] }> {
  const page = await store.catalog.readDatasetRows("ds_mixed", { ...all, ...query });
  return { total: page.totalRows, ids: (await collect(page.rows)).map((r) => r.id) };
}

/** Every row of a query, page by page through `lastKey` / `after`. */
async function pageThrough(store: Storage, datasetId: string, query: Partial<RowQuery>, size: number): Promise<Row[]> {
  const out: Row[] = [];
  let after: RowQuery["after"] = null;
  for (let pages = 0; pages < 10_000; pages++) {
    const page = await store.catalog.readDatasetRows(datasetId, { ...all, ...query, limit: size, after });
    const rows = await collect(page.rows);
    out.push(...rows);
    if (rows.length < size) return out;
    after = page.lastKey();
  }
  throw new Error("paging did not end");
}

export function describeCatalogConformance(name: string, factory: StorageFactory, options: ConformanceOptions = {}): void {
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
      expect((await store.catalog.listDatasets({ teamId: "team_ops", ids: ["ds_stores", "tbl_targets", "ds_campaigns"] })).map((d) => d.id)).toEqual([
        "tbl_targets",
        "ds_stores",
      ]);
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
      expect(await store.catalog.getDataset("tbl_targets")).toMatchObject({ type: "input_table", rowCount: 1, connectionId: null });
      expect(await store.catalog.getDataset("nope")).toBeNull();
      expect(await store.catalog.getConnection("conn_retail")).toMatchObject({ id: "conn_retail", type: "memory", name: "Retail warehouse" });
      expect((await store.catalog.listConnections("team_ops")).map((c) => c.id)).toEqual(["conn_retail"]);
    });

    it("pages rows in stored order with offset and limit pushed down", async () => {
      const store = await seeded();
      const page = await store.catalog.readDatasetRows("ds_orders", { ...all, offset: 1, limit: 2 });
      expect(page.totalRows).toBe(5);
      expect(await collect(page.rows)).toEqual([
        { order_id: "A-2", amount: 30, region: "AMER" },
        { order_id: "A-3", amount: 7.25, region: "EMEA" },
      ]);
      expect(await collect((await store.catalog.readDatasetRows("ds_orders", { ...all, offset: 5 })).rows)).toEqual([]);
      expect(await collect((await store.catalog.readDatasetRows("ds_orders", { ...all, limit: 0 })).rows)).toEqual([]);
      expect((await collect((await store.catalog.readDatasetRows("ds_orders", all)).rows)).map((r) => r.order_id)).toEqual(["A-1", "A-2", "A-3", "A-4", "A-5"]);
    });

    it("filters by JSON equality and selects columns in the asked order", async () => {
      const store = await seeded();
      const page = await store.catalog.readDatasetRows("ds_orders", { offset: 1, limit: 5, columns: ["amount", "order_id"], filters: { region: "EMEA" } });
      expect(page.totalRows).toBe(3);
      expect(await collect(page.rows)).toEqual([
        { amount: 7.25, order_id: "A-3" },
        { amount: 1, order_id: "A-5" },
      ]);
      const typed = await store.catalog.readDatasetRows("ds_orders", { ...all, filters: { amount: "30" } });
      expect(typed.totalRows).toBe(0);
      const number = await store.catalog.readDatasetRows("ds_orders", { ...all, filters: { amount: 30 } });
      expect((await collect(number.rows)).map((r) => r.order_id)).toEqual(["A-2"]);
    });

    it("gives rowsJson, when it offers it, as exactly the JSON of the rows it would yield", async () => {
      const store = await seeded();
      for (const query of [all, { ...all, offset: 1, limit: 2 }, { ...all, filters: { region: "EMEA" } }]) {
        const json = (await store.catalog.readDatasetRows("ds_orders", query)).rowsJson;
        if (!json) continue; // optional capability
        const texts: string[] = [];
        for await (const batch of json) texts.push(...batch);
        const rows = await collect((await store.catalog.readDatasetRows("ds_orders", query)).rows);
        expect(texts.map((t) => JSON.parse(t))).toEqual(rows);
        expect(texts).toEqual(rows.map((r) => JSON.stringify(r)));
      }
    });

    it("replaces a connection dataset's rows in one step", async () => {
      const store = await seeded();
      await store.catalog.replaceDatasetRows("ds_stores", {
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
      const dataset = await store.catalog.getDataset("ds_stores");
      expect(dataset).toMatchObject({ rowCount: 2, lastRefreshedAt: "2026-11-01T00:00:00.000Z", updatedAt: "2026-11-01T00:00:00.000Z" });
      expect(dataset?.columns.map((c) => c.name)).toEqual(["store_id", "city", "open"]);
      expect(await collect((await store.catalog.readDatasetRows("ds_stores", all)).rows)).toEqual([
        { store_id: "S2", city: "Oslo", open: true },
        { store_id: "S3", city: "Rome", open: false },
      ]);
    });

    it("lists every connection by id (binary order), a page at a time", async () => {
      const store = await seeded();
      const conn = (id: string): ConnectionRecord => ({ id, teamId: "team_mkt", name: `Connection ${id}`, type: "memory", config: { tables: {} }, createdAt: "2026-11-01T00:00:00Z" });
      for (const id of ["conn_z", "conn_A", "conn_b"]) expect(await store.catalog.putConnection(conn(id))).toBe("created");
      expect(await store.catalog.listAllConnections({ after: null, limit: 2 })).toEqual([conn("conn_A"), conn("conn_b")]);
      expect((await store.catalog.listAllConnections({ after: "conn_b", limit: 2 })).map((c) => c.id)).toEqual(["conn_retail", "conn_z"]);
      expect(await store.catalog.listAllConnections({ after: "conn_z", limit: 2 })).toEqual([]);
      expect((await readAllPages((page) => store.catalog.listAllConnections(page), 1)).map((c) => c.id)).toEqual(["conn_A", "conn_b", "conn_retail", "conn_z"]);
    });

    it("lists every upload and connection dataset of every team by id, never an input table", async () => {
      const store = await seeded();
      expect((await store.catalog.listAllDatasets({ after: null, limit: 3 })).map((d) => d.id)).toEqual(["ds_campaigns", "ds_orders", "ds_secret"]);
      expect(await store.catalog.listAllDatasets({ after: "ds_secret", limit: 3 })).toEqual([await store.catalog.getDataset("ds_stores")]);
      expect(await store.catalog.listAllDatasets({ after: "ds_stores", limit: 3 })).toEqual([]);
      expect((await readAllPages((page) => store.catalog.listAllDatasets(page), 2)).map((d) => d.id)).toEqual(["ds_campaigns", "ds_orders", "ds_secret", "ds_stores"]);
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
      expect(await store.catalog.putConnection({ ...pg, name: "Warehouse 2", config: { url: "postgres://db2.example.test/w" } })).toBe("updated");
      expect(await store.catalog.getConnection("conn_pg")).toEqual({ ...pg, name: "Warehouse 2", config: { url: "postgres://db2.example.test/w" } });
      expect((await store.catalog.listAllConnections({ after: null, limit: 10 })).map((c) => c.id)).toEqual(["conn_pg", "conn_retail"]);
    });

    it("a webhook connection's put is what the receiver sees next; another connection's endpoint id is refused", async () => {
      const store = await withWebhooks();
      const gh = (await store.catalog.getConnection("conn_hook_gh"))!;
      expect(await store.catalog.putConnection({ ...gh, config: { ...gh.config, signingSecret: "rotated" } })).toBe("updated");
      expect(await store.webhooks.getWebhookEndpoint("hook-gh")).toMatchObject({ connectionId: "conn_hook_gh", datasetId: "ds_conn_hook_gh", signingSecret: "rotated" });

      await expect(store.catalog.putConnection({ ...gh, config: { ...gh.config, endpointId: "hook-open" } })).rejects.toThrow();
      expect((await store.catalog.getConnection("conn_hook_gh"))!.config).toEqual({ ...gh.config, signingSecret: "rotated" });
      expect((await store.webhooks.getWebhookEndpoint("hook-open"))?.connectionId).toBe("conn_hook_open");
      expect((await store.webhooks.getWebhookEndpoint("hook-gh"))?.connectionId).toBe("conn_hook_gh");

      expect(await store.catalog.putConnection({ ...gh, name: "Moved", config: { ...gh.config, endpointId: "hook-moved" } })).toBe("updated");
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
      const config = { ...gh.config, endpointId: "hook-moved", signature: { scheme: "hmac-sha256-hex", header: "X-Signature" } };
      await store.catalog.putConnection({ ...gh, config: { ...config, previousSigningSecret: "old", previousSecretValidUntil: UPDATED_AT } });
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
      expect((await store.catalog.listDatasets({ teamId: "team_ops" })).map((d) => d.id)).toEqual(["ds_orders", "ds_secret", "tbl_targets"]);
      expect(await store.catalog.listConnections("team_ops")).toEqual([]);
      expect(await store.catalog.listAllConnections({ after: null, limit: 10 })).toEqual([]);
      expect((await store.catalog.listAllDatasets({ after: null, limit: 10 })).map((d) => d.id)).toEqual(["ds_campaigns", "ds_orders", "ds_secret"]);
      expect(await rowsOf(store, "ds_orders")).toEqual(ORDERS);
      expect(await store.catalog.deleteConnection("conn_retail")).toBe(false);
      expect(await store.catalog.deleteConnection("conn_nope")).toBe(false);
      // The dataset id is free again, with no rows left behind.
      const stores = { id: "ds_stores", teamId: "team_ops", name: "Stores", type: "upload", connectionId: null, source: null, columns: [], rowCount: 0, lastRefreshedAt: null, updatedAt: UPDATED_AT } as const;
      expect(await store.catalog.putDataset({ ...stores, columns: [] })).toBe("created");
      expect((await store.catalog.readDatasetRows("ds_stores", all)).totalRows).toBe(0);
    });

    it("deletes a webhook connection with its endpoint, dataset, rows and dedup keys", async () => {
      const store = await withWebhooks();
      const delivery = (id: string) => {
        const row: Row = Object.create(null);
        Object.assign(row, { _id: id, n: 1 });
        return store.webhooks.ingestWebhookRow({ datasetId: "ds_conn_hook_gh", dedupKey: "h:1", row, columns: [{ name: "_id", type: "string" }, { name: "n", type: "number" }], retainRows: 100, receivedAt: UPDATED_AT });
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
      expect((await store.catalog.readDatasetRows("ds_new", all)).totalRows).toBe(0);
      expect((await store.catalog.listDatasets({ teamId: "team_ops" })).map((d) => d.id)).toEqual(["ds_new", "ds_orders", "ds_secret", "tbl_targets", "ds_stores"]);

      const orders = (await store.catalog.getDataset("ds_orders"))!;
      const replaced = { ...orders, name: "Orders", columns: [{ name: "order_id", type: "string" as const }], rowCount: 999, lastRefreshedAt: "2026-11-01T01:00:00Z", updatedAt: UPDATED_AT };
      expect(await store.catalog.putDataset(replaced)).toBe("updated");
      expect(await store.catalog.getDataset("ds_orders")).toEqual({ ...replaced, rowCount: 5 });
      expect(await rowsOf(store, "ds_orders")).toEqual(ORDERS);
    });

    it("deletes an upload or connection dataset and its rows; never an input table", async () => {
      const store = await seeded();
      const orders = (await store.catalog.getDataset("ds_orders"))!;
      expect(await store.catalog.deleteDataset("ds_orders")).toBe(true);
      expect(await store.catalog.getDataset("ds_orders")).toBeNull();
      expect((await store.catalog.listDatasets({ teamId: "team_ops" })).map((d) => d.id)).toEqual(["ds_secret", "tbl_targets", "ds_stores"]);
      expect(await store.catalog.deleteDataset("ds_orders")).toBe(false);
      expect(await store.catalog.putDataset(orders)).toBe("created");
      expect(await store.catalog.getDataset("ds_orders")).toEqual({ ...orders, rowCount: 0 });
      expect(await rowsOf(store, "ds_orders")).toEqual([]);
      expect(await store.catalog.deleteDataset("tbl_targets")).toBe(false);
      expect(await store.catalog.getDataset("tbl_targets")).toMatchObject({ type: "input_table", rowCount: 1 });
      expect(await store.catalog.deleteDataset("ds_nope")).toBe(false);
      expect(await store.catalog.getConnection("conn_retail")).not.toBeNull();
    });

    it("replaces a dataset's rows from a stream: rows, columns, rowCount and updatedAt, lastRefreshedAt kept", async () => {
      const store = await seeded();
      const rows = [{ order_id: "B-1", amount: 2, note: null }, { order_id: "B-2", amount: 3.5, note: "x" }];
      const write = bulk(store, "ds_stores", "replace", stream(rows));
      expect(await write.done).toEqual({ rowCount: 2 });
      expect(write.columnsCalls).toEqual([true]);
      expect(await rowsOf(store, "ds_stores")).toEqual(rows);
      expect(await store.catalog.getDataset("ds_stores")).toMatchObject({ columns: NEW_COLUMNS, rowCount: 2, updatedAt: UPDATED_AT, lastRefreshedAt: "2026-10-03T00:00:00Z" });
      const none = bulk(store, "ds_stores", "replace", stream([]), []);
      expect(await none.done).toEqual({ rowCount: 0 });
      expect(await rowsOf(store, "ds_stores")).toEqual([]);
      expect(await store.catalog.getDataset("ds_stores")).toMatchObject({ columns: [], rowCount: 0 });
    });

    it("appends a stream after the stored rows", async () => {
      const store = await seeded();
      const write = bulk(store, "ds_orders", "append", stream(nb("N", 2)));
      expect(await write.done).toEqual({ rowCount: 7 });
      expect(write.columnsCalls).toEqual([true]);
      expect(await rowsOf(store, "ds_orders")).toEqual([...ORDERS, ...nb("N", 2)]);
      expect(await store.catalog.getDataset("ds_orders")).toMatchObject({ columns: NEW_COLUMNS, rowCount: 7, updatedAt: UPDATED_AT, lastRefreshedAt: null });
      const page = await store.catalog.readDatasetRows("ds_orders", { offset: 4, limit: 2, columns: ["order_id"], filters: null });
      expect([page.totalRows, await collect(page.rows)]).toEqual([7, [{ order_id: "A-5" }, { order_id: "N-1" }]]);
    });

    it("writes nothing when the stream throws, and rethrows its error", async () => {
      const store = await seeded();
      const before = await store.catalog.getDataset("ds_orders");
      for (const mode of ["replace", "append"] as const) {
        for (const failAfter of [0, 2]) {
          await expect(bulk(store, "ds_orders", mode, stream(nb("F", 3), { failAfter })).done).rejects.toThrow("the upload broke off");
          expect(await rowsOf(store, "ds_orders")).toEqual(ORDERS);
          expect(await store.catalog.getDataset("ds_orders")).toEqual(before);
        }
      }
    });

    it("refuses an unknown dataset and an input table, writing nothing", async () => {
      const store = await seeded();
      await expect(bulk(store, "ds_nope", "replace", stream(nb("X", 1))).done).rejects.toThrow();
      expect(await store.catalog.getDataset("ds_nope")).toBeNull();
      await expect(bulk(store, "tbl_targets", "append", stream(nb("X", 1))).done).rejects.toThrow();
      await expect(bulk(store, "tbl_targets", "replace", stream(nb("X", 1))).done).rejects.toThrow();
      expect(await store.catalog.getDataset("tbl_targets")).toMatchObject({ type: "input_table", rowCount: 1, columns: [{ name: "region", type: "string" }, { name: "target", type: "number" }] });
    });

    it("keeps __proto__ and constructor as ordinary column names in streamed rows", async () => {
      const store = await seeded();
      const row: Row = JSON.parse('{"__proto__":{"polluted":"yes"},"constructor":"c","order_id":"P-1"}');
      await bulk(store, "ds_orders", "replace", stream([row])).done;
      const [stored] = await rowsOf(store, "ds_orders");
      expect(Object.hasOwn(stored!, "__proto__")).toBe(true);
      expect(Object.getOwnPropertyDescriptor(stored, "__proto__")?.value).toEqual({ polluted: "yes" });
      expect(stored!.constructor).toBe("c");
      expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    });

    it("readers see the rows before a write or after it, never a part, even a page read across it", async () => {
      const store = await seeded();
      // A page opened before the write, two rows read.
      const early = (await store.catalog.readDatasetRows("ds_orders", all)).rows[Symbol.asyncIterator]();
      const earlyRows = [(await early.next()).value, (await early.next()).value];
      const reached = gate();
      const release = gate();
      const write = bulk(store, "ds_orders", "replace", stream(nb("R", 3), { hold: { before: 2, reached: reached.open, until: release.opened } }));
      await reached.opened;
      // Mid-write: the old rows, whole.
      const during = await store.catalog.readDatasetRows("ds_orders", { ...all, offset: 1, limit: 2 });
      expect(during.totalRows).toBe(5);
      expect(await collect(during.rows)).toEqual(ORDERS.slice(1, 3));
      expect((await store.catalog.getDataset("ds_orders"))!.rowCount).toBe(5);
      release.open();
      expect(await write.done).toEqual({ rowCount: 3 });
      for (let next = await early.next(); !next.done; next = await early.next()) earlyRows.push(next.value);
      expect(earlyRows.map((r) => ({ ...r }))).toEqual(ORDERS);
      const after = await store.catalog.readDatasetRows("ds_orders", all);
      expect(after.totalRows).toBe(3);
      expect(await collect(after.rows)).toEqual(nb("R", 3));
      expect((await store.catalog.getDataset("ds_orders"))!.rowCount).toBe(3);
    });

    it("serialises concurrent bulk writes to one dataset: the outcome of one after the other", async () => {
      const store = await seeded();
      const x = bulk(store, "ds_orders", "append", stream(nb("X", 3)));
      const y = bulk(store, "ds_orders", "append", stream(nb("Y", 3)));
      const counts = [(await x.done).rowCount, (await y.done).rowCount];
      const rows = await rowsOf(store, "ds_orders");
      const xFirst = counts[0] === 8;
      expect(counts).toEqual(xFirst ? [8, 11] : [11, 8]);
      expect(rows).toEqual(xFirst ? [...ORDERS, ...nb("X", 3), ...nb("Y", 3)] : [...ORDERS, ...nb("Y", 3), ...nb("X", 3)]);
      expect((await store.catalog.getDataset("ds_orders"))!.rowCount).toBe(11);

      const replace = bulk(store, "ds_secret", "replace", stream(nb("R", 2)));
      const append = bulk(store, "ds_secret", "append", stream(nb("A", 2)));
      const [replaced, appended] = [(await replace.done).rowCount, (await append.done).rowCount];
      expect(replaced).toBe(2);
      const final = await rowsOf(store, "ds_secret");
      // Append last: the new rows then the appended ones. Replace last: only the new rows.
      if (appended === 4) expect(final).toEqual([...nb("R", 2), ...nb("A", 2)]);
      else expect([appended, final]).toEqual([3, nb("R", 2)]);
      expect((await store.catalog.getDataset("ds_secret"))!.rowCount).toBe(final.length);
    });

    describe("row queries (where, sort, after)", () => {
      const mixed = async () => {
        const store = await seeded();
        await datasetWith(store, "ds_mixed", MIXED);
        return store;
      };
      const test = (column: string, op: string, operand: unknown) => ({ kind: "test", column, op, operand }) as RowCondition;

      it("compares by JSON kind: numbers never equal strings, nulls and absent values never match ne, nin or a comparison", async () => {
        const store = await mixed();
        const cases: Array<[RowCondition, string[]]> = [
          [test("amount", "eq", 10), ["r0", "r5"]],
          [test("amount", "eq", "10"), ["r4"]],
          [test("amount", "eq", null), ["r2", "r3"]],
          [test("amount", "ne", 10), ["r1", "r4", "r6", "r7"]],
          [test("amount", "ne", null), ["r0", "r1", "r4", "r5", "r6", "r7"]],
          [test("amount", "gt", 2.5), ["r0", "r5"]],
          [test("amount", "gte", 2.5), ["r0", "r1", "r5"]],
          [test("amount", "lt", 0), ["r6"]],
          [test("amount", "lte", 10), ["r0", "r1", "r5", "r6"]],
          [test("amount", "gt", "1"), ["r4"]],
          [test("name", "gt", "b"), ["r2", "r5", "r6", "r7"]],
          [test("name", "lt", "B"), ["r4"]],
          [test("amount", "in", [10, "10"]), ["r0", "r4", "r5"]],
          [test("amount", "in", [null, 2.5]), ["r1", "r2", "r3"]],
          [test("amount", "nin", [10, null]), ["r1", "r4", "r6", "r7"]],
          [test("amount", "in", [true]), ["r7"]],
          [test("tags", "in", [["a"]]), ["r0"]],
          [test("tags", "eq", { k: 1 }), ["r5"]],
          [test("tags", "ne", ["a"]), ["r5"]],
          [test("flag", "eq", true), ["r0", "r2", "r6"]],
          [test("flag", "eq", false), ["r1", "r5"]],
          [test("flag", "isNull", true), ["r3", "r4", "r7"]],
          [test("flag", "isNull", false), ["r0", "r1", "r2", "r5", "r6"]],
          [test("name", "contains", "an"), ["r1"]],
          [test("name", "contains", "AN"), []],
          [test("name", "startsWith", "ap"), ["r0", "r3"]],
          [test("name", "startsWith", "😀"), ["r6"]],
          [test("amount", "contains", "1"), ["r4"]],
        ];
        for (const [where, ids] of cases) {
          expect({ where, ...(await idsOf(store, { where })) }).toEqual({ where, total: ids.length, ids });
        }
      });

      it("combines and/or with each other, with several operators of one column and with filters", async () => {
        const store = await mixed();
        const where: RowCondition = {
          kind: "all",
          of: [{ kind: "any", of: [test("amount", "gt", 5), test("name", "startsWith", "ch")] }, test("flag", "eq", true)],
        };
        expect(await idsOf(store, { where })).toEqual({ total: 2, ids: ["r0", "r2"] });
        expect(await idsOf(store, { where: { kind: "all", of: [test("amount", "gte", 0), test("amount", "lt", 10)] } })).toEqual({ total: 1, ids: ["r1"] });
        expect(await idsOf(store, { where: { kind: "all", of: [] } })).toEqual({ total: 8, ids: MIXED.map((r) => r.id) });
        expect(await idsOf(store, { where: test("amount", "eq", 10), filters: { flag: false } })).toEqual({ total: 1, ids: ["r5"] });
        expect(await idsOf(store, { where: test("flag", "isNull", false), offset: 1, limit: 2 })).toEqual({ total: 5, ids: ["r1", "r2"] });
      });

      it("sorts numbers before strings before booleans before objects and arrays, nulls last both ways, ties by stored order", async () => {
        const store = await mixed();
        const sorted = async (...sort: Array<[string, boolean]>) =>
          (await idsOf(store, { sort: sort.map(([column, descending]) => ({ column, descending })) })).ids;
        expect(await sorted(["amount", false])).toEqual(["r6", "r1", "r0", "r5", "r4", "r7", "r2", "r3"]);
        expect(await sorted(["amount", true])).toEqual(["r7", "r4", "r0", "r5", "r1", "r6", "r2", "r3"]);
        // Code point order: "B" < "a", and U+FFFF before U+1F600 (UTF-16 order would say otherwise).
        expect(await sorted(["name", false])).toEqual(["r4", "r1", "r0", "r3", "r2", "r5", "r7", "r6"]);
        expect(await sorted(["flag", false], ["name", true])).toEqual(["r5", "r1", "r6", "r2", "r0", "r7", "r3", "r4"]);
        expect(await sorted(["tags", false])).toEqual(["r0", "r5", "r1", "r2", "r3", "r4", "r6", "r7"]);
        const page = await store.catalog.readDatasetRows("ds_mixed", {
          ...all,
          where: test("amount", "ne", null),
          sort: [{ column: "amount", descending: true }],
          columns: ["name"],
          offset: 1,
          limit: 3,
        });
        expect(page.totalRows).toBe(6);
        expect(await collect(page.rows)).toEqual([{ name: "" }, { name: "apple" }, { name: "éclair" }]);
        // The key of the last row: its sort value (a column not selected) and its stored position.
        expect(page.lastKey()).toEqual({ values: [10], position: expect.any(Number) });
      });

      it("continues after a key: cursor pages visit every matching row once, in order, sorted or not", async () => {
        const store = await mixed();
        const queries: Array<Partial<RowQuery>> = [
          {},
          { sort: [{ column: "amount", descending: false }] },
          { sort: [{ column: "flag", descending: true }, { column: "amount", descending: false }] },
          { where: test("amount", "ne", null), sort: [{ column: "amount", descending: true }] },
          { where: test("name", "gt", "a"), filters: { flag: true } },
        ];
        for (const query of queries) {
          const whole = (await idsOf(store, query)).ids;
          for (const size of [1, 3]) {
            expect({ query, size, ids: (await pageThrough(store, "ds_mixed", query, size)).map((r) => r.id) }).toEqual({ query, size, ids: whole });
          }
        }
        const first = await store.catalog.readDatasetRows("ds_mixed", { ...all, limit: 2, sort: [{ column: "name", descending: false }] });
        await collect(first.rows);
        const after = first.lastKey();
        expect(after?.values).toEqual(["Banana"]);
        const next = await store.catalog.readDatasetRows("ds_mixed", { ...all, limit: 2, offset: 1, sort: [{ column: "name", descending: false }], after });
        expect(next.totalRows).toBe(8);
        expect((await collect(next.rows)).map((r) => r.id)).toEqual(["r3", "r2"]);
        expect((await store.catalog.readDatasetRows("ds_mixed", { ...all, limit: 0 })).lastKey()).toBeNull();
      });

      it("pages in stored order past rows appended meanwhile: no row twice, none missed", async () => {
        const store = await mixed();
        const first = await store.catalog.readDatasetRows("ds_mixed", { ...all, limit: 5 });
        expect((await collect(first.rows)).map((r) => r.id)).toEqual(["r0", "r1", "r2", "r3", "r4"]);
        await bulk(store, "ds_mixed", "append", stream([{ id: "r8", amount: 3 }]), MIXED_COLUMNS).done;
        const rest = await store.catalog.readDatasetRows("ds_mixed", { ...all, limit: 10, after: first.lastKey() });
        expect((await collect(rest.rows)).map((r) => r.id)).toEqual(["r5", "r6", "r7", "r8"]);
      });

      it("streams long sorted and filtered reads in the same order as short pages", async () => {
        const store = await seeded();
        const rows: Row[] = Array.from({ length: 2600 }, (_, i) => ({ id: i, g: i % 7 === 3 ? null : i % 7, s: `v${(i * 7919) % 1000}` }));
        const columns: Column[] = ["id", "g", "s"].map((name) => ({ name, type: "string" }));
        await datasetWith(store, "ds_long", rows, columns);
        const sort = [{ column: "g", descending: true }, { column: "s", descending: false }];
        const where = test("id", "gte", 100);
        const expected = rows
          .map((row, i) => ({ row, key: keyOf(row, i, sort) }))
          .filter(({ row }) => (row.id as number) >= 100)
          .sort((a, b) => compareKeys(a.key, b.key, sort))
          .map(({ row }) => row.id);
        const page = await store.catalog.readDatasetRows("ds_long", { ...all, where, sort, offset: 5 });
        expect(page.totalRows).toBe(2500);
        const read = (await collect(page.rows)).map((r) => r.id);
        expect(read).toEqual(expected.slice(5));
        expect(page.lastKey()).toMatchObject({ values: [null, expect.any(String)] });
        const paged = (await pageThrough(store, "ds_long", { where, sort }, 1100)).map((r) => r.id);
        expect(paged).toEqual(expected);
        // Unsorted, past a cursor, longer than a batch.
        const half = await store.catalog.readDatasetRows("ds_long", { ...all, limit: 1300 });
        await collect(half.rows);
        const rest = await store.catalog.readDatasetRows("ds_long", { ...all, after: half.lastKey() });
        expect((await collect(rest.rows)).map((r) => r.id)).toEqual(rows.slice(1300).map((r) => r.id));
      });
    });
  });
}
