import { describe, expect, it, vi } from "vitest";
import { createAdmin } from "../src/admin/index.js";
import type { AuditEvent, Row } from "../src/domain/model.js";
import { SETTLE_MS } from "../src/handlers/entity-tags.js";
import { createMemoryStorage } from "../src/memory/memory-storage.js";
import { NOW, setup } from "./support/api.js";
import { TOKENS } from "./support/fixture.js";

/** The test API on a memory store whose reads of rows and audit writes are counted. */
async function counted() {
  const storage = createMemoryStorage();
  const events: AuditEvent[] = [];
  const append = storage.audit.appendAuditEvent.bind(storage.audit);
  storage.audit.appendAuditEvent = async (event, at) => {
    events.push(event);
    return append(event, at);
  };
  let rowReads = 0;
  const readDatasetRows = storage.rows.readDatasetRows.bind(storage.catalog);
  storage.rows.readDatasetRows = async (id, query) => {
    rowReads++;
    return readDatasetRows(id, query);
  };
  const listTableRows = storage.tables.listTableRows.bind(storage.tables);
  storage.tables.listTableRows = async (id, query) => {
    rowReads++;
    return listTableRows(id, query);
  };
  const env = await setup({ storage });
  const get = (path: string, headers: Record<string, string> = {}) =>
    env.call("GET", path, { token: TOKENS.sync, headers });
  return { ...env, get, rowReads: () => rowReads, reads: () => events.filter((e) => e.category === "data_access") };
}

const PAGE = "/api/v1/datasets/ds_orders/rows?maxRows=2&sort=-amount";

describe("ETag and If-None-Match on rows pages", () => {
  it("tags a page; the same page asked with its tag is 304 without reading a row, and still a read in the audit feed and usage", async () => {
    const { get, rowReads, reads, call } = await counted();
    const first = await get(PAGE);
    expect(first.status).toBe(200);
    const tag = first.headers.get("etag")!;
    expect(tag).toMatch(/^"[A-Za-z0-9_-]{22}"$/);
    expect(first.headers.get("access-control-expose-headers")).toBe("X-Request-Id, ETag");
    expect(rowReads()).toBe(1);

    const again = await get(PAGE, { "if-none-match": tag });
    expect([again.status, again.text, again.headers.get("etag"), again.headers.get("content-type")]).toEqual([
      304,
      "",
      tag,
      null,
    ]);
    expect(again.headers.get("vary")).toBe("Accept-Encoding");
    expect(rowReads()).toBe(1);
    await vi.waitFor(() => expect(reads()).toHaveLength(2));
    expect(reads()[1]).toMatchObject({
      action: "dataset.rows.read",
      target: { type: "dataset", id: "ds_orders" },
      details: { requestId: again.headers.get("x-request-id"), offset: 0, notModified: true },
    });
    await vi.waitFor(async () => {
      const usage = await call("GET", "/api/v1/space/dataset-usage?teamId=team_ops", { token: TOKENS.sessionAda });
      expect(usage.json.rows.find((r: { dataset_id: string }) => r.dataset_id === "ds_orders")).toMatchObject({
        api_reads: 2,
        last_api_read_at: NOW,
      });
    });
  });

  it("gives each request its own tag: other parameters, another format, Accept choosing the same format as format=", async () => {
    const { get } = await counted();
    const tagOf = async (path: string, headers: Record<string, string> = {}) =>
      (await get(path, headers)).headers.get("etag");
    const base = await tagOf(PAGE);
    const tags = [
      base,
      await tagOf(`${PAGE}&offset=1`),
      await tagOf("/api/v1/datasets/ds_orders/rows?maxRows=2&sort=amount"),
      await tagOf(`${PAGE}&columns=order_id`),
      await tagOf(`${PAGE}&format=csv`),
      await tagOf(`${PAGE}&format=ndjson`),
    ];
    expect(new Set(tags).size).toBe(6);
    expect(await tagOf(PAGE, { accept: "text/csv" })).toBe(tags[4]);
    // The same where written with its keys in another order is the same request.
    const a = await tagOf(
      `/api/v1/datasets/ds_orders/rows?where=${encodeURIComponent('{"region":{"eq":"EMEA"},"amount":{"gt":1}}')}`,
    );
    const b = await tagOf(
      `/api/v1/datasets/ds_orders/rows?where=${encodeURIComponent('{"amount":{"gt":1},"region":{"eq":"EMEA"}}')}`,
    );
    expect(a).toBe(b);
    // A page asked with another page's tag is answered in full.
    const other = await get(`${PAGE}&offset=1`, { "if-none-match": base! });
    expect(other.status).toBe(200);
  });

  it("matches weakly and in lists, as RFC 9110 says for If-None-Match; a tag with a coding suffix names the same content", async () => {
    const { get } = await counted();
    const tag = (await get(PAGE)).headers.get("etag")!;
    const bare = tag.slice(1, -1);
    expect((await get(PAGE, { "if-none-match": `W/${tag}` })).status).toBe(304);
    expect((await get(PAGE, { "if-none-match": `"nope", ${tag}` })).status).toBe(304);
    const gz = await get(PAGE, { "if-none-match": `"${bare}-gzip"` });
    expect([gz.status, gz.headers.get("etag")]).toEqual([304, `"${bare}-gzip"`]);
    expect((await get(PAGE, { "if-none-match": "*" })).status).toBe(304);
    expect((await get(PAGE, { "if-none-match": `"${bare}x"` })).status).toBe(200);
    expect((await get(PAGE, { "if-none-match": "garbage" })).status).toBe(200);
  });

  it("changes the tag when the rows change, and tags nothing written in the last SETTLE_MS (two writes may share a millisecond)", async () => {
    const { get, api, clock } = await counted();
    const before = (await get(PAGE)).headers.get("etag")!;
    await createAdmin(api).writeDatasetRows(
      "ds_orders",
      "append",
      (async function* () {
        yield { order_id: "Z-1", amount: 999, region: "EMEA" } as Row;
      })(),
    );
    const fresh = await get(PAGE, { "if-none-match": before });
    expect([fresh.status, fresh.headers.get("etag")]).toEqual([200, null]);
    expect(fresh.json.data[0]).toEqual({ order_id: "Z-1", amount: 999, region: "EMEA" });
    clock.advance(SETTLE_MS);
    const settled = await get(PAGE, { "if-none-match": before });
    expect(settled.status).toBe(200);
    const after = settled.headers.get("etag")!;
    expect(after).toMatch(/^"[A-Za-z0-9_-]{22}"$/);
    expect(after).not.toBe(before);
    expect((await get(PAGE, { "if-none-match": after })).status).toBe(304);
  });

  it("refuses a bad query before it considers the tag", async () => {
    const { get } = await counted();
    const tag = (await get(PAGE)).headers.get("etag")!;
    const bad = await get("/api/v1/datasets/ds_orders/rows?maxRows=2&sort=-nope", { "if-none-match": tag });
    expect([bad.status, bad.json.error.code]).toEqual([400, "invalid_parameter"]);
  });

  it("tags an input table's pages the same way, and a row written changes the tag", async () => {
    const { get, call, clock, rowReads } = await counted();
    const page = "/api/v1/tables/tbl_targets/rows?limit=5";
    const first = await get(page);
    const tag = first.headers.get("etag")!;
    expect(tag).toMatch(/^"[A-Za-z0-9_-]{22}"$/);
    const reads = rowReads();
    expect((await get(page, { "if-none-match": tag })).status).toBe(304);
    expect(rowReads()).toBe(reads);
    await call("POST", "/api/v1/tables/tbl_targets/rows", { token: TOKENS.sync, body: { region: "LATAM", target: 1 } });
    clock.advance(SETTLE_MS);
    const changed = await get(page, { "if-none-match": tag });
    expect(changed.status).toBe(200);
    expect(changed.headers.get("etag")).not.toBe(tag);
  });

  it("tags a dataset's own read by its content", async () => {
    const { get } = await counted();
    const first = await get("/api/v1/datasets/ds_orders");
    const tag = first.headers.get("etag")!;
    expect(first.json.id).toBe("ds_orders");
    expect(tag).toMatch(/^"[A-Za-z0-9_-]{22}"$/);
    expect((await get("/api/v1/datasets/ds_orders", { "if-none-match": tag })).status).toBe(304);
    expect((await get("/api/v1/datasets/ds_stores", { "if-none-match": tag })).status).toBe(200);
  });

  it("lets a browser send If-None-Match and If-Match, and read ETag", async () => {
    const { call } = await counted();
    const preflight = await call("OPTIONS", "/api/v1/datasets/ds_orders/rows");
    expect(preflight.headers.get("access-control-allow-headers")).toContain("If-None-Match, If-Match");
  });
});

describe("ETag and If-Match on table rows", () => {
  const ROW = "/api/v1/tables/tbl_targets/rows/row_1";

  it("tags a created or changed row by its _updatedAt; If-Match with that tag applies the change", async () => {
    const { call } = await counted();
    const created = await call("POST", "/api/v1/tables/tbl_targets/rows", {
      token: TOKENS.sync,
      body: { region: "LATAM", target: 5 },
    });
    expect(created.status).toBe(201);
    expect(created.headers.get("etag")).toBe(`"${created.json._updatedAt}"`);
    const changed = await call("PATCH", `/api/v1/tables/tbl_targets/rows/${created.json._id}`, {
      token: TOKENS.sync,
      headers: { "if-match": created.headers.get("etag")! },
      body: { target: 6 },
    });
    expect([changed.status, changed.json.target]).toEqual([200, 6]);
    expect(changed.headers.get("etag")).toBe(`"${changed.json._updatedAt}"`);
    expect(changed.headers.get("etag")).not.toBe(created.headers.get("etag"));
  });

  it("refuses a PATCH whose If-Match names another version: 412 precondition_failed with the current row and its tag, nothing written", async () => {
    const { call, storage } = await counted();
    const stale = '"2026-09-01T00:00:00Z"';
    for (const ifMatch of [stale, 'W/"2026-10-01T00:00:00Z"', '"x", "y"']) {
      const refused = await call("PATCH", ROW, {
        token: TOKENS.sync,
        headers: { "if-match": ifMatch },
        body: { target: 1 },
      });
      expect(refused.status).toBe(412);
      expect(refused.json.error).toMatchObject({
        code: "precondition_failed",
        details: { current: { _id: "row_1", target: 120000 } },
      });
      expect(refused.headers.get("etag")).toBe('"2026-10-01T00:00:00Z"');
    }
    expect((await storage.tables.getTableRow("tbl_targets", "row_1"))!.target).toBe(120000);
    // The row's tag, or any among several, or *, applies it.
    const listed = await call("PATCH", ROW, {
      token: TOKENS.sync,
      headers: { "if-match": `${stale}, "2026-10-01T00:00:00Z"` },
      body: { target: 2 },
    });
    expect([listed.status, listed.json.target]).toEqual([200, 2]);
    const any = await call("PATCH", ROW, { token: TOKENS.sync, headers: { "if-match": "*" }, body: { target: 3 } });
    expect([any.status, any.json.target]).toEqual([200, 3]);
  });

  it("deletes with If-Match only the version it names; an unknown row stays 404", async () => {
    const { call, storage } = await counted();
    const refused = await call("DELETE", ROW, {
      token: TOKENS.sync,
      headers: { "if-match": '"2026-09-01T00:00:00Z"' },
    });
    expect([refused.status, refused.json.error.code]).toEqual([412, "precondition_failed"]);
    expect(await storage.tables.getTableRow("tbl_targets", "row_1")).not.toBeNull();
    const deleted = await call("DELETE", ROW, {
      token: TOKENS.sync,
      headers: { "if-match": '"2026-10-01T00:00:00Z"' },
    });
    expect([deleted.status, deleted.json]).toEqual([200, { deleted: true }]);
    const missing = await call("DELETE", ROW, {
      token: TOKENS.sync,
      headers: { "if-match": '"2026-10-01T00:00:00Z"' },
    });
    expect([missing.status, missing.json.error.code]).toEqual([404, "not_found"]);
  });

  it("refuses a DELETE whose named version changed after it was compared (a write landing in between): 412, the row kept", async () => {
    const { call, storage } = await counted();
    const read = storage.tables.getTableRow.bind(storage.tables);
    // Another client's write lands right after the DELETE's read of the row, before its delete.
    storage.tables.getTableRow = async (tableId, rowId) => {
      const row = await read(tableId, rowId);
      storage.tables.getTableRow = read;
      await call("PATCH", ROW, { token: TOKENS.sync, body: { target: 99 } });
      return row;
    };
    const refused = await call("DELETE", ROW, {
      token: TOKENS.sync,
      headers: { "if-match": '"2026-10-01T00:00:00Z"' },
    });
    expect([refused.status, refused.json.error.code, refused.json.error.details.current.target]).toEqual([
      412,
      "precondition_failed",
      99,
    ]);
    expect((await storage.tables.getTableRow("tbl_targets", "row_1"))!.target).toBe(99);
  });

  it("replays an idempotent PATCH with the tag of what it wrote", async () => {
    const { call } = await counted();
    const send = () =>
      call("PATCH", ROW, {
        token: TOKENS.sync,
        headers: { "if-match": '"2026-10-01T00:00:00Z"', "idempotency-key": "k-1" },
        body: { target: 7 },
      });
    const first = await send();
    const replay = await send();
    expect([first.status, replay.status, replay.headers.get("idempotent-replayed")]).toEqual([200, 200, "true"]);
    expect(replay.headers.get("etag")).toBe(first.headers.get("etag"));
  });
});
