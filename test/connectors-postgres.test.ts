import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createAdmin } from "../src/admin/index.js";
import { postgresConnector } from "../src/connectors/postgres.js";
import { createMemoryStorage } from "../src/memory/memory-storage.js";
import { InvalidQueryError } from "../src/ports/connector.js";
import { setup } from "./support/api.js";
import { TOKENS, testFixture } from "./support/fixture.js";

const URL = process.env.DATAPORT_TEST_PG_URL ?? "postgres://postgres@127.0.0.1:5432/test";
const SCHEMA = `dp_conn_${process.pid}_${Math.random().toString(36).slice(2, 8)}`;

async function available(): Promise<boolean> {
  const client = new pg.Client({ connectionString: URL, connectionTimeoutMillis: 2_000 });
  try {
    await client.connect();
    await client.end();
    return true;
  } catch {
    return false;
  }
}

const hasPg = await available();
if (!hasPg) {
  if (process.env.CI === "true") throw new Error(`PostgreSQL is required in CI but not reachable at ${URL}`);
  console.warn(`[connectors-postgres] SKIPPED: no PostgreSQL at ${URL}`);
}

let admin: pg.Client;
const connector = postgresConnector();

beforeAll(async () => {
  if (!hasPg) return;
  admin = new pg.Client({ connectionString: URL });
  await admin.connect();
  await admin.query(`CREATE SCHEMA "${SCHEMA}"`);
  await admin.query(`CREATE TABLE "${SCHEMA}".places (id integer, name text, city text, tags jsonb, "odd""col" text)`);
  await admin.query(`INSERT INTO "${SCHEMA}".places VALUES
    (1, 'Bakery', 'Lyon', '{"k":1}', 'x'),
    (2, 'Books', 'Paris', '["a"]', 'y'),
    (3, 'Cafe', 'Lyon', null, 'z'),
    (4, 'Deli', null, '{"k":2}', 'w')`);
  await admin.query(
    `CREATE TABLE "${SCHEMA}".events (at timestamptz, day date, local timestamp, raw bytea, big bigint)`,
  );
  await admin.query(
    `INSERT INTO "${SCHEMA}".events VALUES ('2026-10-31T23:30:00-02:00', '2026-11-01', '2026-11-01 08:15:00', '\\x6869', 9007199254740993)`,
  );
  await admin.query(`CREATE TABLE "${SCHEMA}".canary (alive boolean)`);
  await admin.query(`INSERT INTO "${SCHEMA}".canary VALUES (true)`);
  await admin.query(`CREATE VIEW "${SCHEMA}".slow AS SELECT pg_sleep(2)::text AS nap`);
  // A view whose read writes: only a read-only transaction stops it.
  await admin.query(`CREATE FUNCTION "${SCHEMA}".bump() RETURNS integer LANGUAGE sql VOLATILE AS
    'INSERT INTO "${SCHEMA}".canary VALUES (false) RETURNING 1'`);
  await admin.query(`CREATE VIEW "${SCHEMA}".sneaky AS SELECT "${SCHEMA}".bump() AS n`);
});

afterAll(async () => {
  await connector.close?.();
  if (!hasPg) return;
  await admin.query(`DROP SCHEMA IF EXISTS "${SCHEMA}" CASCADE`);
  await admin.end();
});

async function start() {
  const f = testFixture() as any;
  f.connections.push({
    id: "conn_pg",
    teamId: "team_ops",
    name: "Warehouse DB",
    type: "postgres",
    createdAt: "2026-09-01T00:00:00Z",
    config: { url: URL, statementTimeoutMs: 300, ratePerSecond: 1000, burst: 1000 },
  });
  const ds = (id: string, source: string, columns: unknown[] = []) => ({
    id,
    teamId: "team_ops",
    name: id,
    type: "connection",
    connectionId: "conn_pg",
    source,
    columns,
    rows: [],
    lastRefreshedAt: null,
    updatedAt: "2026-10-03T00:00:00Z",
  });
  // ds_places declares no columns, so the connector's own checks are what stands between a request and the SQL.
  f.datasets.push(
    ds("ds_places", `${SCHEMA}.places`),
    ds("ds_slow", `${SCHEMA}.slow`),
    ds("ds_absent", `${SCHEMA}.absent`),
    ds("ds_sneaky", `${SCHEMA}.sneaky`),
    ds("ds_events", `${SCHEMA}.events`),
  );
  f.apiKeys[0].allowlist.connections.push("conn_pg");
  const storage = createMemoryStorage();
  const env = await setup({ fixture: f, storage, connectors: { postgres: connector } });
  const q = (dataset: string, query: Record<string, unknown> = {}) => {
    const search = new URLSearchParams({ datasetId: dataset });
    for (const [k, v] of Object.entries(query)) search.set(k, typeof v === "string" ? v : JSON.stringify(v));
    return env.call("GET", `/api/v1/connections/conn_pg/query?${search}`, { token: TOKENS.sync });
  };
  return { ...env, storage, q };
}

async function canaryAlive(): Promise<boolean> {
  const result = await admin.query(`SELECT alive FROM "${SCHEMA}".canary`);
  return result.rows[0]?.alive === true;
}

describe.skipIf(!hasPg)("postgres connector", () => {
  it("pushes filters, ordering and paging down as parameterised SQL", async () => {
    const { q } = await start();
    const lyon = await q("ds_places", { filters: { city: "Lyon" }, orderBy: "id", orderDirection: "DESC" });
    expect(lyon.status).toBe(200);
    expect(lyon.json.data).toEqual([
      { id: 3, name: "Cafe", city: "Lyon", tags: null, 'odd"col': "z" },
      { id: 1, name: "Bakery", city: "Lyon", tags: { k: 1 }, 'odd"col': "x" },
    ]);
    expect(lyon.json.metadata).toMatchObject({
      sourceType: "postgres",
      returnedRows: 2,
      hasMore: false,
      columns: ["id", "name", "city", "tags", 'odd"col'],
    });

    const page = await q("ds_places", { orderBy: "city", limit: "2", offset: "1" });
    expect(page.json.data.map((r: any) => r.id)).toEqual([3, 2]);
    expect(page.json.metadata.hasMore).toBe(true);

    const nulls = await q("ds_places", { filters: { city: null } });
    expect(nulls.json.data.map((r: any) => r.id)).toEqual([4]);
    const json = await q("ds_places", { filters: { tags: { k: 2 } } });
    expect(json.json.data.map((r: any) => r.id)).toEqual([4]);
    const quoted = await q("ds_places", { orderBy: 'odd"col' });
    expect(quoted.json.data.map((r: any) => r.id)).toEqual([4, 1, 2, 3]);
  });

  it("turns SQL injection through filters and orderBy into 400 or plain data, never into SQL", async () => {
    const { q } = await start();
    const rejected: Array<[Record<string, unknown>, string]> = [
      [{ filters: { "city = city; DROP TABLE canary; --": 1 } }, "filters"],
      [{ filters: { 'city" = "city" OR "1': 1 } }, "filters"],
      [{ orderBy: `id; DROP TABLE "${SCHEMA}".canary; --` }, "orderBy"],
      [{ orderBy: "(SELECT 1)" }, "orderBy"],
      [{ orderBy: 'id" DESC, "name' }, "orderBy"],
      [{ filters: { id: "1 OR 1=1" } }, "filters"],
      [{ filters: { id: "1; DROP TABLE canary" } }, "filters"],
    ];
    for (const [query, parameter] of rejected) {
      const res = await q("ds_places", query);
      expect(res.status, JSON.stringify(query)).toBe(400);
      expect(res.json.error).toMatchObject({ code: "invalid_parameter", details: { parameter } });
    }
    const asData = [
      { filters: { name: "x' OR '1'='1" } },
      { filters: { name: "'; DROP TABLE canary; --" } },
      { filters: { city: "Lyon' --" } },
      { filters: { tags: "'; DROP TABLE canary; --" } },
    ];
    for (const query of asData) {
      const res = await q("ds_places", query);
      expect(res.status, JSON.stringify(query)).toBe(200);
      expect(res.json.data).toEqual([]);
    }
    expect(await canaryAlive()).toBe(true);
  });

  it("checks identifiers against the table's columns even when called directly", async () => {
    const connection = { id: "c", teamId: "t", name: "c", type: "postgres", config: { url: URL }, createdAt: "" };
    const base = {
      source: `${SCHEMA}.places`,
      limit: 10,
      offset: 0,
      filters: null,
      orderBy: null,
      orderDirection: "ASC" as const,
      format: "rows" as const,
      params: null,
    };
    await expect(connector.query(connection, { ...base, orderBy: "nope" })).rejects.toBeInstanceOf(InvalidQueryError);
    await expect(
      connector.query(connection, { ...base, source: `${SCHEMA}.places; DROP TABLE x` }),
    ).rejects.toMatchObject({
      name: "UpstreamUnavailableError",
      message: `source ${SCHEMA}.places; DROP TABLE x does not exist`,
    });
    expect(await canaryAlive()).toBe(true);
  });

  it("runs read-only with a statement timeout; a missing table is upstream_unavailable", async () => {
    const { q } = await start();
    const slow = await q("ds_slow");
    expect(slow.status).toBe(502);
    expect(slow.json.error.message).toMatch(/statement timeout/);
    const sneaky = await q("ds_sneaky");
    expect(sneaky.status).toBe(502);
    expect(sneaky.json.error.message).toMatch(/SQLSTATE 25006/);
    expect((await admin.query(`SELECT count(*)::int AS n FROM "${SCHEMA}".canary`)).rows[0].n).toBe(1);
    const absent = await q("ds_absent");
    expect(absent.status).toBe(502);
    expect(absent.json.error.message).toMatch(/does not exist/);
    const probe = await connector.query(
      { id: "c", teamId: "t", name: "c", type: "postgres", config: { url: URL }, createdAt: "" },
      {
        source: "information_schema.tables",
        limit: 1,
        offset: 0,
        filters: { table_name: "canary" },
        orderBy: null,
        orderDirection: "ASC",
        format: "rows",
        params: null,
      },
    );
    expect(probe.kind === "rows" && probe.rows.length).toBe(1);
  });

  it("reports an unreachable database as upstream_unavailable without leaking the url", async () => {
    const lonely = postgresConnector();
    const connection = {
      id: "c2",
      teamId: "t",
      name: "c",
      type: "postgres",
      config: { url: "postgres://secretuser:secretpw@127.0.0.1:1/none" },
      createdAt: "",
    };
    const error = await lonely
      .query(connection, {
        source: "x",
        limit: 1,
        offset: 0,
        filters: null,
        orderBy: null,
        orderDirection: "ASC",
        format: "rows",
        params: null,
      })
      .catch((e: Error) => e);
    expect(error).toMatchObject({ name: "UpstreamUnavailableError", message: "cannot reach the database" });
    await lonely.close?.();
  });

  it("answers dates, instants, bytes and big integers as JSON values whose types infer correctly", async () => {
    const { q, api, storage } = await start();
    const res = await q("ds_events", { filters: { day: "2026-11-01" } });
    expect(res.json.data).toEqual([
      {
        at: "2026-11-01T01:30:00.000Z",
        day: "2026-11-01",
        local: "2026-11-01T08:15:00",
        raw: "aGk=",
        big: "9007199254740993",
      },
    ]);
    await createAdmin(api).refreshDataset("ds_events");
    expect(storage.state.datasets.get("ds_events")!.columns).toEqual([
      { name: "at", type: "datetime" },
      { name: "day", type: "date" },
      { name: "local", type: "datetime" },
      { name: "raw", type: "string" },
      { name: "big", type: "string" },
    ]);
  });

  it("refreshes a dataset from the table", async () => {
    const { api, storage } = await start();
    const result = await createAdmin(api).refreshDataset("ds_places");
    expect(result).toMatchObject({ ok: true, rowsProcessed: 4, error: null });
    expect(storage.state.datasets.get("ds_places")!.columns).toEqual([
      { name: "id", type: "number" },
      { name: "name", type: "string" },
      { name: "city", type: "string" },
      { name: "tags", type: "json" },
      { name: 'odd"col', type: "string" },
    ]);
    const failed = await createAdmin(api).refreshDataset("ds_absent");
    expect(failed).toMatchObject({ ok: false, rowsProcessed: 0, error: `source ${SCHEMA}.absent does not exist` });
  });
});
