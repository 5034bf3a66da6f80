import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it, vi } from "vitest";
import type { AuditEvent } from "../src/domain/model.js";
import { createMemoryStorage } from "../src/memory/memory-storage.js";
import type { Storage } from "../src/ports/storage.js";
import { isDatasetRead } from "../src/ports/storage/usage.js";
import { createSqliteStorage } from "../src/sqlite/index.js";
import { parseFixture } from "../src/fixture/load.js";
import { createDataApi } from "../src/server/api.js";
import { setup } from "./support/api.js";
import { writeRows } from "./support/datasets.js";
import { TOKENS, testFixture } from "./support/fixture.js";
import { postgresStores } from "./support/postgres-stores.js";
import { postgresSkipReason } from "./support/services.js";

/**
 * GET /datasets/{id}/aggregate and /tables/{id}/aggregate over HTTP on every
 * store: the same answers (../shared/aggregates.md), refusals as 400 naming
 * the part, answers remembered by the dataset's version.
 */
const SALES = [
  { ordered_on: "2026-01-15", region: "EMEA", amount: 100 },
  { ordered_on: "2026-01-20", region: "EMEA", amount: 50.5 },
  { ordered_on: "2026-01-03", region: "APAC", amount: 20 },
  { ordered_on: "2026-02-01T10:00:00Z", region: "EMEA", amount: 10 },
  { ordered_on: "2026-02-28", region: "AMER", amount: 5 },
  { ordered_on: "2026-02-10", region: "APAC", amount: "12" },
  { ordered_on: "not a date", region: "EMEA", amount: 1 },
  // 23:30 at -02:00 is 01:30 UTC the next day: April.
  { ordered_on: "2026-03-31T23:30:00-02:00", region: "APAC", amount: 7 },
  { ordered_on: "2026-05-05", region: '=HYPERLINK("x")', amount: 2 },
];

function fixture() {
  const base = testFixture() as any;
  base.datasets.push({
    id: "ds_sales",
    teamId: "team_ops",
    name: "Sales",
    type: "upload",
    connectionId: null,
    source: null,
    columns: [
      { name: "ordered_on", type: "string" },
      { name: "region", type: "string" },
      { name: "amount", type: "number" },
    ],
    rows: SALES,
    lastRefreshedAt: null,
    updatedAt: "2026-10-02T10:00:00Z",
  });
  base.apiKeys.find((k: { id: string }) => k.id === "key_sync").allowlist.datasets.push("ds_sales");
  return base;
}

const url = (target: string, params: Record<string, string>) =>
  `/api/v1/${target}/aggregate?${new URLSearchParams(params)}`;
const BI_QUESTION = {
  groupBy: "region, month(ordered_on)",
  metrics: "count,sum(amount),avg(amount)",
  where: JSON.stringify({ region: { in: ["EMEA", "APAC"] } }),
  sort: "-sum(amount)",
};

const dir = mkdtempSync(join(tmpdir(), "dataport-aggregates-http-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const skip = await postgresSkipReason();
const pg = postgresStores({ prefix: "agg_http", maxConnections: 4, fixture });
let files = 0;

const stores: Array<[string, (() => Promise<Storage>) | null]> = [
  ["memory", async () => createMemoryStorage()],
  ["sqlite", async () => createSqliteStorage({ path: join(dir, `s${files++}.db`) })],
  ["postgres", skip ? null : async () => pg.store(undefined, false)],
];

describe.each(stores)("aggregates over HTTP on %s", (_name, make) => {
  const start = async () => {
    const storage = await make!();
    const api = await setup({ storage, fixture: fixture() });
    return api;
  };
  const run = make ? it : it.skip;

  run("answers the BI question: per region per month, EMEA and APAC only, biggest first, with totals", async () => {
    const { call, storage } = await start();
    const res = await call("GET", url("datasets/ds_sales", BI_QUESTION), { token: TOKENS.sync });
    expect(res.status).toBe(200);
    expect(res.json.data).toEqual([
      { region: "EMEA", "month(ordered_on)": "2026-01", count: 2, "sum(amount)": 150.5, "avg(amount)": 75.25 },
      { region: "APAC", "month(ordered_on)": "2026-01", count: 1, "sum(amount)": 20, "avg(amount)": 20 },
      { region: "EMEA", "month(ordered_on)": "2026-02", count: 1, "sum(amount)": 10, "avg(amount)": 10 },
      { region: "APAC", "month(ordered_on)": "2026-04", count: 1, "sum(amount)": 7, "avg(amount)": 7 },
      { region: "EMEA", "month(ordered_on)": null, count: 1, "sum(amount)": 1, "avg(amount)": 1 },
      // "12" is a string: no number to add; nulls sort last.
      { region: "APAC", "month(ordered_on)": "2026-02", count: 1, "sum(amount)": null, "avg(amount)": null },
    ]);
    expect(res.json.metadata).toEqual({
      datasetId: "ds_sales",
      datasetName: "Sales",
      groupBy: ["region", "month(ordered_on)"],
      metrics: ["count", "sum(amount)", "avg(amount)"],
      matchedRows: 7,
      totalGroups: 6,
      returnedGroups: 6,
      offset: 0,
      hasMore: false,
      totals: { count: 7, "sum(amount)": 188.5, "avg(amount)": 188.5 / 6 },
      lastUpdated: "2026-10-02T10:00:00Z",
    });
    // having, and a page of the groups (totals still over every matching row).
    const having = await call("GET", url("datasets/ds_sales", { ...BI_QUESTION, having: '{"count":{"gte":2}}' }), {
      token: TOKENS.sync,
    });
    expect(having.json.data).toEqual([
      { region: "EMEA", "month(ordered_on)": "2026-01", count: 2, "sum(amount)": 150.5, "avg(amount)": 75.25 },
    ]);
    expect(having.json.metadata).toMatchObject({ matchedRows: 7, totalGroups: 1, totals: { count: 7 } });
    const page = await call("GET", url("datasets/ds_sales", { ...BI_QUESTION, maxRows: "2", offset: "1" }), {
      token: TOKENS.sync,
    });
    expect(page.json.data.map((g: Record<string, unknown>) => g["sum(amount)"])).toEqual([20, 10]);
    expect(page.json.metadata).toMatchObject({ totalGroups: 6, returnedGroups: 2, offset: 1, hasMore: true });
    // Without groupBy: one group, there even when no row matches.
    const none = await call(
      "GET",
      url("datasets/ds_sales", { metrics: "count,max(amount)", filters: '{"region":"nowhere"}' }),
      { token: TOKENS.sync },
    );
    expect([none.json.data, none.json.metadata.totals]).toEqual([
      [{ count: 0, "max(amount)": null }],
      { count: 0, "max(amount)": null },
    ]);
    void storage;
  });

  run("writes CSV (formulas defused) and NDJSON, without totals", async () => {
    const { call } = await start();
    const params = { groupBy: "region", metrics: "count,sum(amount)" };
    const csv = await call("GET", url("datasets/ds_sales", { ...params, format: "csv" }), { token: TOKENS.sync });
    expect(csv.headers.get("content-type")).toBe("text/csv; charset=utf-8");
    expect(csv.text).toBe(
      `region,count,sum(amount)\r\n"'=HYPERLINK(""x"")",1,2\r\nAMER,1,5\r\nAPAC,3,27\r\nEMEA,4,161.5\r\n`,
    );
    const ndjson = await call("GET", url("datasets/ds_sales", params), {
      token: TOKENS.sync,
      headers: { accept: "application/x-ndjson" },
    });
    expect(
      ndjson.text
        .trim()
        .split("\n")
        .map((line) => JSON.parse(line)),
    ).toEqual([
      { region: '=HYPERLINK("x")', count: 1, "sum(amount)": 2 },
      { region: "AMER", count: 1, "sum(amount)": 5 },
      { region: "APAC", count: 3, "sum(amount)": 27 },
      { region: "EMEA", count: 4, "sum(amount)": 161.5 },
    ]);
  });

  run("aggregates an input table, its stamps too", async () => {
    const { call } = await start();
    const res = await call(
      "GET",
      url("tables/tbl_targets", { groupBy: "region,month(_createdAt)", metrics: "count,sum(target)" }),
      {
        token: TOKENS.sync,
      },
    );
    expect(res.status).toBe(200);
    expect(res.json.data).toEqual([
      { region: "EMEA", "month(_createdAt)": "2026-10", count: 1, "sum(target)": 120000 },
    ]);
    expect(res.json.metadata).toMatchObject({
      datasetId: "tbl_targets",
      datasetName: "Quarterly targets",
      matchedRows: 1,
    });
  });

  run("refuses bad input with 400 naming the part, and unreachable ids as unknown", async () => {
    const { call } = await start();
    const cases: Array<[Record<string, string>, string, string]> = [
      [{ metrics: "count,sum(amount),median(amount)" }, "metrics", 'metrics[2]: unknown function "median"'],
      [{ groupBy: "nope" }, "groupBy", 'groupBy[0]: unknown column "nope"'],
      [{ groupBy: "fortnight(ordered_on)" }, "groupBy", 'groupBy[0]: unknown bucket "fortnight"'],
      [
        { groupBy: "region", metrics: "count", sort: "-sum(amount)" },
        "sort",
        "sort[0]: the answer has no field sum(amount)",
      ],
      [{ groupBy: "region", having: '{"total":{"gt":1}}' }, "having", "the answer has no field total"],
      [{ groupBy: "region,region" }, "groupBy", 'groupBy[1]: "region" is named twice'],
      [{ groupBy: "a,b,c,d,e" }, "groupBy", "at most 4 keys"],
      [{ maxRows: "10001" }, "maxRows", "maxRows"],
      [{ where: '{"amount":{"between":[1,2]}}' }, "where", "where.amount.between"],
      [{ having: "[1]" }, "having", ""],
    ];
    for (const [params, parameter, message] of cases) {
      const res = await call("GET", url("datasets/ds_sales", params), { token: TOKENS.sync });
      expect([res.status, res.json.error.code, res.json.error.details.parameter]).toEqual([
        400,
        "invalid_parameter",
        parameter,
      ]);
      expect(res.json.error.message).toContain(message);
    }
    const unknown = await call("GET", url("datasets/ds_sales", { groupBy: "nope" }), { token: TOKENS.sync });
    expect(unknown.json.error.details.unknownColumns).toEqual(["nope"]);
    // Outside the allowlist, another team's, an input table under /datasets: as for rows.
    const secret = await call("GET", url("datasets/ds_secret", {}), { token: TOKENS.sync });
    const missing = await call("GET", url("datasets/ds_nope", {}), { token: TOKENS.sync });
    expect([secret.status, secret.json.error.code]).toEqual([missing.status, missing.json.error.code]);
    expect(secret.status).toBe(404);
    const otherTeam = await call("GET", url("datasets/ds_sales", {}), { token: TOKENS.freeTeam });
    const otherTeamRows = await call("GET", "/api/v1/datasets/ds_sales/rows", { token: TOKENS.freeTeam });
    expect([otherTeam.status, otherTeam.json.error.code]).toEqual([
      otherTeamRows.status,
      otherTeamRows.json.error.code,
    ]);
    expect((await call("GET", url("datasets/tbl_targets", {}), { token: TOKENS.sync })).status).toBe(400);
    expect((await call("GET", url("datasets/ds_sales", {}), { token: TOKENS.readOnly })).status).toBe(403);
  });

  run("remembers an answer by the dataset's version: no second scan, a write recomputes", async () => {
    const { call, storage, clock } = await start();
    const datasets = vi.spyOn(storage.rows, "aggregateDatasetRows");
    const tables = vi.spyOn(storage.tables, "aggregateTableRows");
    const first = await call("GET", url("datasets/ds_sales", BI_QUESTION), { token: TOKENS.sync });
    const again = await call("GET", url("datasets/ds_sales", { ...BI_QUESTION, groupBy: "region,month(ordered_on)" }), {
      token: TOKENS.sync,
    });
    expect(again.json).toEqual(first.json);
    expect(datasets).toHaveBeenCalledTimes(1);
    await call("GET", url("datasets/ds_sales", { ...BI_QUESTION, sort: "region" }), { token: TOKENS.sync });
    expect(datasets).toHaveBeenCalledTimes(2);

    const params = { groupBy: "region", metrics: "count,sum(target)" };
    expect((await call("GET", url("tables/tbl_targets", params), { token: TOKENS.sync })).json.data).toEqual([
      { region: "EMEA", count: 1, "sum(target)": 120000 },
    ]);
    await call("GET", url("tables/tbl_targets", params), { token: TOKENS.sync });
    expect(tables).toHaveBeenCalledTimes(1);
    const created = await call("POST", "/api/v1/tables/tbl_targets/rows", {
      token: TOKENS.sync,
      body: { region: "EMEA", target: 5 },
    });
    expect(created.status).toBe(201);
    // Just written: recomputed (and not remembered until no write can share its stamp).
    expect((await call("GET", url("tables/tbl_targets", params), { token: TOKENS.sync })).json.data).toEqual([
      { region: "EMEA", count: 2, "sum(target)": 120005 },
    ]);
    expect(tables).toHaveBeenCalledTimes(2);
    clock.advance(5000);
    await call("GET", url("tables/tbl_targets", params), { token: TOKENS.sync });
    await call("GET", url("tables/tbl_targets", params), { token: TOKENS.sync });
    expect(tables).toHaveBeenCalledTimes(3);
  });

  run("audits each aggregate with its parameters, and counts it as a read", async () => {
    const { call, storage } = await start();
    const audited: AuditEvent[] = [];
    const append = storage.audit.appendAuditEvents.bind(storage.audit);
    storage.audit.appendAuditEvents = async (events, storedAt) => {
      audited.push(...events);
      return append(events, storedAt);
    };
    const appendOne = storage.audit.appendAuditEvent.bind(storage.audit);
    storage.audit.appendAuditEvent = async (event, storedAt) => {
      audited.push(event);
      return appendOne(event, storedAt);
    };
    await call("GET", url("datasets/ds_sales", { ...BI_QUESTION, format: "csv" }), { token: TOKENS.sync });
    await call("GET", url("tables/tbl_targets", { groupBy: "region" }), { token: TOKENS.sync });
    await vi.waitFor(() => expect(audited.filter((e) => e.category === "data_access")).toHaveLength(2));
    const [dataset, table] = audited.filter((e) => e.category === "data_access");
    expect(dataset).toMatchObject({
      action: "dataset.rows.aggregated",
      target: { type: "dataset", id: "ds_sales" },
      details: { ...BI_QUESTION, where: { region: { in: ["EMEA", "APAC"] } }, returnedGroups: 6, format: "csv" },
    });
    expect(table).toMatchObject({
      action: "table.rows.aggregated",
      target: { type: "table", id: "tbl_targets" },
      details: { groupBy: "region", returnedGroups: 1 },
    });
  });
});

describe("aggregates in the usage log", () => {
  it("counts a successful aggregate as an API read of its dataset", () => {
    const call = {
      method: "GET",
      status: 200,
      objectId: "ds_sales",
      route: "/api/v1/datasets/:id/aggregate",
    } as Parameters<typeof isDatasetRead>[0];
    expect(isDatasetRead(call)).toBe(true);
    expect(isDatasetRead({ ...call, route: "/api/v1/tables/:id/aggregate" })).toBe(true);
    expect(isDatasetRead({ ...call, status: 400 })).toBe(false);
  });
});

describe.each([
  ["on a reader thread", {}],
  ["on the event loop (no reader threads)", { readerThreads: 0 }],
])("a SQLite aggregate past the call deadline, %s", (_name, threads) => {
  it("answers 503 storage_unavailable with Retry-After, never a part of an answer, and the store stays up", async () => {
    const path = join(dir, `deadline${files++}.db`);
    const writer = createSqliteStorage({ path });
    await writer.seed(parseFixture(fixture()));
    const columns = fixture().datasets.at(-1).columns;
    const many = Array.from({ length: 60_000 }, (_, i) => ({
      ordered_on: `2026-${String((i % 12) + 1).padStart(2, "0")}-01`,
      region: `r${i % 997}`,
      amount: i,
    }));
    await writeRows(writer, "ds_sales", "replace", many, columns);
    await writer.close();
    const storage = createSqliteStorage({ path, callTimeoutMs: 5, ...threads });
    const api = createDataApi({ storage });
    const call = async (method: string, target: string, init: { token: string }) => {
      const headers = { authorization: `Bearer ${init.token}` };
      const response = await api.fetch(new Request(`http://dataport.test${target}`, { method, headers }));
      return { status: response.status, headers: response.headers, json: await response.json() };
    };
    const slow = await call(
      "GET",
      url("datasets/ds_sales", {
        groupBy: "region,month(ordered_on)",
        metrics: "count,countDistinct(amount),sum(amount)",
      }),
      {
        token: TOKENS.sync,
      },
    );
    expect([slow.status, slow.json.error?.code]).toEqual([503, "storage_unavailable"]);
    expect(Number(slow.headers.get("retry-after"))).toBeGreaterThan(0);
    expect((await call("GET", "/api/v1/datasets/ds_sales", { token: TOKENS.sync })).status).toBe(200);
    await storage.close();
  });
});

describe("a PostgreSQL aggregate past the call deadline", () => {
  it.skipIf(!!skip)(
    "rejects with 503 storage_unavailable and leaves no statement running (statement_timeout at the same bound)",
    async () => {
      const { createPostgresStorage } = await import("../src/postgres/index.js");
      const { POSTGRES_URL } = await import("./support/services.js");
      const { parseAggregateQuery } = await import("../src/domain/aggregate-query.js");
      const schema = pg.schema();
      const writer = await pg.store(schema);
      const columns = fixture().datasets.at(-1).columns;
      const many = Array.from({ length: 100_000 }, (_, i) => ({
        ordered_on: "2026-01-01",
        region: `r${i % 997}`,
        amount: i,
      }));
      await writeRows(writer, "ds_sales", "replace", many, columns);
      const store = await createPostgresStorage({
        connectionString: POSTGRES_URL,
        schema,
        maxConnections: 2,
        callTimeoutMs: 20,
      });
      pg.closeAfterTest(store);
      const query = parseAggregateQuery(
        { groupBy: "region", metrics: "countDistinct(amount),sum(amount)" },
        new Set(["region", "amount"]),
      );
      const failed = await store.rows.aggregateDatasetRows("ds_sales", query).catch((error: unknown) => error);
      expect(failed).toMatchObject({ status: 503, code: "storage_unavailable" });
      // Nothing of it is left running on the server (PostgreSQL ends it at the same bound; it would end anyway, later).
      await vi.waitFor(
        async () => {
          const running = await writer.db.query<{ n: string }>(
            "select count(*) as n from pg_stat_activity where state = 'active' and pid <> pg_backend_pid() and query like $1",
            [`%${schema}%dataset_rows%GROUP BY%`],
          );
          expect(Number(running[0]!.n)).toBe(0);
        },
        { timeout: 5000, interval: 50 },
      );
      // Answered in full once the deadline allows it.
      expect((await writer.rows.aggregateDatasetRows("ds_sales", query)).totalGroups).toBe(997);
    },
  );
});
