/**
 * A rows read on SQLite writes the metadata of a remembered dataset record
 * from text worked out once per record (handlers/datasets.ts): it must be the
 * text JSON.stringify gives, and follow the record when anyone changes it.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { createSqliteStorage } from "../../src/sqlite/index.js";
import { setup } from "../support/api.js";
import { TOKENS } from "../support/fixture.js";

const dir = mkdtempSync(join(tmpdir(), "dataport-rows-metadata-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("rows metadata on SQLite", () => {
  it("is JSON.stringify's text of the metadata, and follows a rename by another connection", async () => {
    const path = join(dir, "renamed.sqlite");
    const storage = createSqliteStorage({ path });
    const other = createSqliteStorage({ path });
    try {
      const { call } = await setup({ storage });
      const first = await call("GET", "/api/v1/datasets/ds_orders/rows?maxRows=2", { token: TOKENS.sync });
      expect(first.status).toBe(200);
      const suffix = (res: { text: string; json: { metadata: unknown } }) =>
        res.text.slice(res.text.indexOf(`"metadata":`));
      expect(suffix(first)).toBe(`"metadata":${JSON.stringify(first.json.metadata)}}`);
      expect(first.json.metadata).toMatchObject({
        datasetId: "ds_orders",
        totalRows: 5,
        returnedRows: 2,
        offset: 0,
        hasMore: true,
      });

      // Another connection (another process would do the same) renames it to a name JSON must escape.
      const record = (await other.catalog.getDataset("ds_orders"))!;
      const name = 'Orders "2027" \\ \u2028 \u00e9';
      await other.catalog.putDataset({ ...record, name });
      for (const url of [
        "/api/v1/datasets/ds_orders/rows?maxRows=2",
        "/api/v1/datasets/ds_orders/rows?maxRows=2&columns=amount,order_id",
      ]) {
        const res = await call("GET", url, { token: TOKENS.sync });
        expect(res.json.metadata.datasetName).toBe(name);
        expect(suffix(res)).toBe(`"metadata":${JSON.stringify(res.json.metadata)}}`);
      }
      const picked = await call("GET", "/api/v1/datasets/ds_orders/rows?maxRows=2&columns=amount,order_id", {
        token: TOKENS.sync,
      });
      expect(picked.json.metadata.columns).toEqual(["amount", "order_id"]);
      expect(picked.json.metadata.columnTypes).toEqual({ amount: "number", order_id: "string" });
      // The read of every column still answers with the record's columns after the picked one.
      const all = await call("GET", "/api/v1/datasets/ds_orders/rows?maxRows=2", { token: TOKENS.sync });
      expect(all.json.metadata.columns).toEqual(first.json.metadata.columns);
      expect(all.json.metadata.columns.length).toBeGreaterThan(2);
    } finally {
      await other.close();
      await storage.close();
    }
  });
});
