import { describe, expect, it, vi } from "vitest";
import { createClient } from "../src/client/index.js";
import type { AuditEvent } from "../src/domain/model.js";
import { createMemoryStorage } from "../src/memory/memory-storage.js";
import { setup } from "./support/api.js";
import { TOKENS } from "./support/fixture.js";

const rowsUrl = (params: Record<string, string>) => `/api/v1/datasets/ds_orders/rows?${new URLSearchParams(params)}`;
const ids = (res: { json: { data: Array<{ order_id?: unknown; _id?: unknown }> } }) =>
  res.json.data.map((r) => r.order_id ?? r._id);

describe("GET /datasets/{id}/rows with where, sort and cursor", () => {
  it("filters by operators, combined with filters, and counts the matches", async () => {
    const { call } = await setup();
    const res = await call("GET", rowsUrl({ where: JSON.stringify({ amount: { gt: 10 } }) }), { token: TOKENS.sync });
    expect(res.status).toBe(200);
    expect(ids(res)).toEqual(["A-1", "A-2", "A-4"]);
    expect(res.json.metadata).toMatchObject({
      totalRows: 3,
      returnedRows: 3,
      offset: 0,
      hasMore: false,
      nextCursor: null,
    });
    const both = await call(
      "GET",
      rowsUrl({
        where: JSON.stringify({ or: [{ amount: { lt: 5 } }, { order_id: { in: ["A-2", "A-9"] } }] }),
        filters: '{"region":"EMEA"}',
      }),
      {
        token: TOKENS.sync,
      },
    );
    expect(ids(both)).toEqual(["A-5"]);
  });

  it("refuses a bad where with 400 invalid_parameter naming the JSON path, reading nothing", async () => {
    const { call } = await setup();
    const cases: Array<[unknown, string, Record<string, unknown>]> = [
      [{ amount: { gt: {} } }, "where.amount.gt", {}],
      [{ amount: 5 }, "where.amount", {}],
      [{ amount: { between: [1, 2] } }, "where.amount.between", {}],
      [{ amount: { in: [] } }, "where.amount.in", {}],
      [{ or: [] }, "where.or", {}],
      [{ nope: { eq: 1 }, amount: { eq: 1 } }, "where.nope", { unknownColumns: ["nope"] }],
      [
        { and: [{ and: [{ and: [{ and: [{ and: [{ amount: { eq: 1 } }] }] }] }] }] },
        "where.and[0].and[0].and[0].and[0].and",
        {},
      ],
    ];
    for (const [where, path, extra] of cases) {
      const res = await call("GET", rowsUrl({ where: JSON.stringify(where) }), { token: TOKENS.sync });
      expect([res.status, res.json.error.code, res.json.error.details]).toEqual([
        400,
        "invalid_parameter",
        { parameter: "where", path, ...extra },
      ]);
      expect(res.json.error.message).toContain(path);
    }
    const fourDeep = { and: [{ and: [{ and: [{ and: [{ amount: { eq: 1 } }] }] }] }] };
    expect((await call("GET", rowsUrl({ where: JSON.stringify(fourDeep) }), { token: TOKENS.sync })).json.data).toEqual(
      [{ order_id: "A-5", amount: 1, region: "EMEA" }],
    );
    const malformed = await call("GET", rowsUrl({ where: "{amount" }), { token: TOKENS.sync });
    expect([malformed.status, malformed.json.error.details.parameter]).toEqual([400, "where"]);
    const tooMany = { and: Array.from({ length: 101 }, () => ({ amount: { ne: 0 } })) };
    expect((await call("GET", rowsUrl({ where: JSON.stringify(tooMany) }), { token: TOKENS.sync })).status).toBe(400);
  });

  it("sorts by several columns, descending, and refuses unknown sort columns", async () => {
    const { call } = await setup();
    const res = await call("GET", rowsUrl({ sort: "region,-amount" }), { token: TOKENS.sync });
    expect(ids(res)).toEqual(["A-2", "A-4", "A-1", "A-3", "A-5"]);
    const bad = await call("GET", rowsUrl({ sort: "-nope" }), { token: TOKENS.sync });
    expect([bad.status, bad.json.error.details]).toEqual([400, { parameter: "sort", unknownColumns: ["nope"] }]);
  });

  it("pages with cursors: every matching row once, offset counting the rows before, maxRows free to change", async () => {
    const { call } = await setup();
    const base = { where: JSON.stringify({ amount: { gte: 1 } }), sort: "-amount" };
    const first = await call("GET", rowsUrl({ ...base, maxRows: "2" }), { token: TOKENS.sync });
    expect(ids(first)).toEqual(["A-4", "A-2"]);
    expect(first.json.metadata).toMatchObject({
      totalRows: 5,
      offset: 0,
      hasMore: true,
      nextCursor: expect.any(String),
    });
    const second = await call("GET", rowsUrl({ ...base, maxRows: "1", cursor: first.json.metadata.nextCursor }), {
      token: TOKENS.sync,
    });
    expect(ids(second)).toEqual(["A-1"]);
    expect(second.json.metadata).toMatchObject({ totalRows: 5, offset: 2, returnedRows: 1, hasMore: true });
    // A cursor may be sent again: the same page.
    expect(
      ids(
        await call("GET", rowsUrl({ ...base, maxRows: "1", cursor: first.json.metadata.nextCursor }), {
          token: TOKENS.sync,
        }),
      ),
    ).toEqual(["A-1"]);
    const last = await call(
      "GET",
      rowsUrl({ ...base, maxRows: "5", columns: "order_id", cursor: second.json.metadata.nextCursor }),
      { token: TOKENS.sync },
    );
    expect(last.json.data).toEqual([{ order_id: "A-3" }, { order_id: "A-5" }]);
    expect(last.json.metadata).toMatchObject({ offset: 3, returnedRows: 2, hasMore: false, nextCursor: null });
  });

  it("refuses a cursor that is malformed, made for another query or dataset, or sent with an offset", async () => {
    const { call } = await setup();
    const first = await call("GET", rowsUrl({ sort: "amount", maxRows: "1" }), { token: TOKENS.sync });
    const cursor = first.json.metadata.nextCursor as string;
    const refusals = [
      rowsUrl({ sort: "amount", cursor: "not-a-cursor!" }),
      rowsUrl({ sort: "amount", cursor: cursor.slice(0, -4) }),
      rowsUrl({ sort: "-amount", cursor }),
      rowsUrl({ sort: "amount", filters: '{"region":"EMEA"}', cursor }),
      rowsUrl({ sort: "amount", cursor, offset: "1" }),
      `/api/v1/datasets/ds_stores/rows?${new URLSearchParams({ cursor })}`,
    ];
    for (const url of refusals) {
      const res = await call("GET", url, { token: TOKENS.sync });
      expect([url, res.status, res.json.error.code, res.json.error.details.parameter]).toEqual([
        url,
        400,
        "invalid_parameter",
        "cursor",
      ]);
    }
  });

  it("a request with none of the new parameters answers as before, plus nextCursor", async () => {
    const { call } = await setup();
    const res = await call("GET", rowsUrl({ maxRows: "2", offset: "1" }), { token: TOKENS.sync });
    const { nextCursor, changesCursor, ...metadata } = res.json.metadata;
    expect(changesCursor).toEqual(expect.any(String));
    expect(Object.keys(metadata)).toEqual([
      "datasetId",
      "datasetName",
      "totalRows",
      "returnedRows",
      "offset",
      "hasMore",
      "columns",
      "columnTypes",
      "lastUpdated",
    ]);
    const next = await call("GET", rowsUrl({ maxRows: "10", cursor: nextCursor }), { token: TOKENS.sync });
    expect(ids(next)).toEqual(["A-4", "A-5"]);
    expect(next.json.metadata.offset).toBe(3);
  });
});

describe("exports", () => {
  it("streams CSV with a header of the returned columns, CRLF, empty fields for null, JSON text for structures", async () => {
    const { call, storage } = await setup();
    await storage.rows.writeDatasetRows({
      datasetId: "ds_orders",
      mode: "append",
      rows: (async function* () {
        yield { order_id: 'A-6, "quoted"', amount: null, region: "line\nbreak" };
        yield { order_id: "A-7", amount: 3, region: { nested: [1, true] } };
      })(),
      columns: () => [
        { name: "order_id", type: "string" },
        { name: "amount", type: "number" },
        { name: "region", type: "string" },
      ],
      updatedAt: "2026-11-01T00:00:00.000Z",
    });
    const res = await call(
      "GET",
      rowsUrl({
        format: "csv",
        where: JSON.stringify({ amount: { nin: [30, 99, 7.25] } }),
        columns: "region,order_id,amount",
      }),
      {
        token: TOKENS.sync,
      },
    );
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("text/csv; charset=utf-8");
    expect(res.headers.get("content-disposition")).toBe('attachment; filename="ds_orders.csv"');
    expect(res.text).toBe(
      ["region,order_id,amount", "EMEA,A-1,12.5", "EMEA,A-5,1", '"{""nested"":[1,true]}",A-7,3', ""].join("\r\n"),
    );
    const all = await call("GET", rowsUrl({ format: "csv", sort: "-order_id", maxRows: "2" }), { token: TOKENS.sync });
    expect(all.text).toBe(
      ["order_id,amount,region", 'A-7,3,"{""nested"":[1,true]}"', '"A-6, ""quoted""",,"line\nbreak"', ""].join("\r\n"),
    );
  });

  it("chooses NDJSON by Accept, one row per line, and audits the read like any other", async () => {
    const storage = createMemoryStorage();
    const audited: AuditEvent[] = [];
    const append = storage.audit.appendAuditEvents.bind(storage);
    storage.audit.appendAuditEvents = async (events, storedAt) => {
      audited.push(...events);
      return append(events, storedAt);
    };
    const appendOne = storage.audit.appendAuditEvent.bind(storage);
    storage.audit.appendAuditEvent = async (event, storedAt) => {
      audited.push(event);
      return appendOne(event, storedAt);
    };
    const { call } = await setup({ storage });
    const res = await call("GET", rowsUrl({ sort: "amount", maxRows: "3" }), {
      token: TOKENS.sync,
      headers: { accept: "application/x-ndjson" },
    });
    await vi.waitFor(() => expect(audited.filter((e) => e.category === "data_access")).toHaveLength(1));
    expect(audited.find((e) => e.category === "data_access")).toMatchObject({
      action: "dataset.rows.read",
      target: { type: "dataset", id: "ds_orders" },
      details: { offset: 0, returnedRows: 3, format: "ndjson" },
    });
    expect(res.headers.get("content-type")).toBe("application/x-ndjson");
    expect(res.headers.get("content-disposition")).toBe('attachment; filename="ds_orders.ndjson"');
    expect(res.text.split("\n").map((line) => (line === "" ? null : JSON.parse(line).order_id))).toEqual([
      "A-5",
      "A-3",
      "A-1",
      null,
    ]);
    const json = await call("GET", rowsUrl({ maxRows: "1" }), {
      token: TOKENS.sync,
      headers: { accept: "application/json, text/csv" },
    });
    expect(json.headers.get("content-type")).toContain("application/json");
    const bad = await call("GET", rowsUrl({ format: "xlsx" }), { token: TOKENS.sync });
    expect([bad.status, bad.json.error.details.parameter]).toEqual([400, "format"]);
  });
});

describe("GET /tables/{id}/rows with where, sort, cursor and export", () => {
  it("filters and sorts on declared columns and the stamps, pages with cursors, exports every row", async () => {
    const { call } = await setup();
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
    const url = (params: Record<string, string>) => `/api/v1/tables/tbl_targets/rows?${new URLSearchParams(params)}`;
    const big = await call("GET", url({ where: JSON.stringify({ target: { gte: 50 } }), sort: "-target" }), {
      token: TOKENS.sync,
    });
    expect(big.json.data.map((r: { region: string }) => r.region)).toEqual(["EMEA", "LATAM", "APAC"]);
    const byId = await call("GET", url({ where: JSON.stringify({ _id: { eq: "row_1" } }) }), { token: TOKENS.sync });
    expect(byId.json.data.map((r: { region: string }) => r.region)).toEqual(["EMEA"]);
    const first = await call("GET", url({ sort: "region", limit: "2" }), { token: TOKENS.sync });
    expect(first.json.data.map((r: { region: string }) => r.region)).toEqual(["AMER", "APAC"]);
    const next = await call("GET", url({ sort: "region", limit: "2", cursor: first.json.metadata.nextCursor }), {
      token: TOKENS.sync,
    });
    expect(next.json.data.map((r: { region: string }) => r.region)).toEqual(["EMEA", "LATAM"]);
    expect(next.json.metadata).toMatchObject({ offset: 2, totalRows: 4, hasMore: false, nextCursor: null });
    const unknown = await call("GET", url({ sort: "nope" }), { token: TOKENS.sync });
    expect([unknown.status, unknown.json.error.details.parameter]).toEqual([400, "sort"]);
    const csv = await call("GET", url({ format: "csv", sort: "target" }), { token: TOKENS.sync });
    const lines = csv.text.split("\r\n");
    expect(lines[0]).toBe("_id,region,target,_createdAt,_updatedAt");
    expect(lines.slice(1, -1).map((line) => line.split(",")[1])).toEqual(["AMER", "APAC", "LATAM", "EMEA"]);
    expect(lines.at(-1)).toBe("");
  });
});

describe("the client", () => {
  it("types where by operator, sorts, pages with cursors and streams an export", async () => {
    const { api } = await setup();
    const dp = createClient({
      baseUrl: "http://dataport.test/api/v1",
      token: TOKENS.sync,
      fetch: (request) => api.fetch(request, { clientAddress: "198.51.100.7" }),
    });
    type Order = { order_id: string; amount: number; region: string };
    const rows = await dp.datasets
      .iterateRows<Order>("ds_orders", {
        where: { amount: { gte: 7.25 }, or: [{ region: { eq: "EMEA" } }, { region: { eq: "APAC" } }] },
        sort: ["-amount"],
        pageSize: 1,
      })
      .collect({ max: 10 });
    expect(rows.map((r) => r.order_id)).toEqual(["A-4", "A-1", "A-3"]);
    const body = await dp.datasets.export("ds_orders", { format: "ndjson", sort: ["order_id"], columns: ["order_id"] });
    const text = await new Response(body).text();
    expect(text).toBe(["A-1", "A-2", "A-3", "A-4", "A-5"].map((id) => `{"order_id":"${id}"}\n`).join(""));
    const tableRows = await dp.tables
      .iterateRows("tbl_targets", { where: { target: { gt: 1 } }, pageSize: 1 })
      .collect({ max: 5 });
    expect(tableRows.map((r) => r._id)).toEqual(["row_1"]);
    await expect(
      dp.datasets.export("ds_orders", { format: "csv", sort: ["nope" as "order_id"] }),
    ).rejects.toMatchObject({ status: 400, code: "invalid_parameter" });
  });
});
