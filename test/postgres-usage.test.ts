import pg from "pg";
import { describe, expect, it, vi } from "vitest";
import { createDataApi } from "../src/server/api.js";
import type { ApiCallRecord } from "../src/domain/model.js";
import { parseFixture } from "../src/fixture/load.js";
import { MIGRATIONS } from "../src/postgres/index.js";
import { conformanceFixture, TOKENS } from "../src/testing/conformance/fixture.js";
import { postgresStores } from "./support/postgres-stores.js";
import { POSTGRES_URL, postgresSkipReason } from "./support/services.js";

// The usage log as per-day counters written in batches, and authentication
// in one round trip, on PostgreSQL (issue #18).
const skip = await postgresSkipReason();
const { store, schema: useSchema } = postgresStores({ prefix: "dp_usage", maxConnections: 4 });

const ROWS = "/api/v1/datasets/:id/rows";

function call(at: string, fields: Partial<ApiCallRecord> = {}): ApiCallRecord {
  return {
    at,
    teamId: "team_ops",
    credentialKind: "api-key",
    credentialId: "key_sync",
    credentialName: "Warehouse sync",
    method: "GET",
    route: ROWS,
    objectId: "ds_orders",
    status: 200,
    latencyMs: 10,
    ...fields,
  };
}

describe.skipIf(!!skip)("postgres usage log and authentication", () => {
  it("adds calls to per-day counters in memory and writes them in one statement, read back with this instance's pending ones", async () => {
    const s = await store();
    const queries = vi.spyOn(s.db, "query");
    const transactions = vi.spyOn(s.db, "transaction");
    const batches = () =>
      queries.mock.calls.filter(([sql]) => typeof sql !== "string" && sql.text.includes("api_usage")).length;
    for (let i = 0; i < 300; i++) {
      const day = i % 3 === 0 ? "2026-10-31" : "2026-11-01";
      // Counted at once: the promise is settled before any batch is written.
      await expect(
        s.usage.recordApiCall(
          call(`${day}T10:${String(i % 60).padStart(2, "0")}:00.000Z`, {
            status: i % 10 === 0 ? 500 : 200,
            latencyMs: i % 2 ? 10 : 11,
          }),
        ),
      ).resolves.toBeUndefined();
    }
    expect(batches()).toBe(0);
    const usage = await s.usage.spaceApiUsage({ teamId: "team_ops", fromDay: "2026-10-01", toDay: "2026-11-30" });
    // One statement for the 300 calls, outside any BEGIN/COMMIT of its own.
    expect(batches()).toBe(1);
    expect(transactions).not.toHaveBeenCalled();
    expect(usage).toEqual([
      {
        day: "2026-11-01",
        method: "GET",
        route: ROWS,
        credential_kind: "api-key",
        credential_id: "key_sync",
        credential: "Warehouse sync",
        calls: 200,
        errors: 20,
        server_errors: 20,
        avg_latency_ms: 11, // 10.5 rounded half up
      },
      {
        day: "2026-10-31",
        method: "GET",
        route: ROWS,
        credential_kind: "api-key",
        credential_id: "key_sync",
        credential: "Warehouse sync",
        calls: 100,
        errors: 10,
        server_errors: 10,
        avg_latency_ms: 11,
      },
    ]);
    const [counters] = await s.db.query<{ n: string }>(`select count(*) as n from ${s.db.t("api_usage")}`);
    expect(Number(counters!.n)).toBe(2);
    queries.mockRestore();
    transactions.mockRestore();
  });

  it("adds up the counters of two instances, and keeps the latest read of a dataset (the one recorded last on a tie)", async () => {
    const schema = useSchema();
    const a = await store(schema);
    const b = await store(schema, false);
    a.usage.recordApiCall(call("2026-11-01T10:00:00.000Z"));
    a.usage.recordApiCall(call("2026-11-01T10:05:00.000Z", { latencyMs: 30 }));
    b.usage.recordApiCall(
      call("2026-11-01T10:05:00.000Z", {
        credentialId: "usr_ada",
        credentialKind: "session-token",
        credentialName: "ada@northwind.test",
      }),
    );
    b.usage.recordApiCall(call("2026-11-01T09:00:00.000Z", { status: 404 }));
    b.usage.recordApiCall(call("2026-11-01T11:00:00.000Z", { method: "POST" }));
    // b's counters reach the database within its batch interval (or at once when it reads or closes).
    await b.close();
    const usage = await a.usage.spaceApiUsage({ teamId: "team_ops", fromDay: "2026-11-01", toDay: "2026-11-01" });
    expect(usage.map((u) => [u.method, u.credential_id, u.calls, u.errors, u.avg_latency_ms])).toEqual([
      ["GET", "key_sync", 3, 1, 17], // (10 + 30 + 10) / 3; api-key before session-token
      ["GET", "usr_ada", 1, 0, 10],
      ["POST", "key_sync", 1, 0, 10],
    ]);
    const orders = (await a.usage.spaceDatasetUsage({ teamId: "team_ops" })).find((d) => d.dataset_id === "ds_orders");
    // 2xx GETs of its rows: a's two and b's session one; the 404 and the POST are not reads.
    expect(orders).toMatchObject({ api_reads: 3, last_api_read_at: "2026-11-01T10:05:00.000Z" });
  });

  it("migrates a version-4 schema's call log into counters and dataset reads, then drops it", async () => {
    const schema = useSchema();
    const client = new pg.Client({ connectionString: POSTGRES_URL });
    await client.connect();
    const s = `"${schema}"`;
    try {
      await client.query(`create schema ${s}`);
      await client.query(
        `create table ${s}.schema_migrations (version integer primary key, name text not null, applied_at timestamptz not null default now())`,
      );
      for (const m of MIGRATIONS.filter((m) => m.version <= 4)) {
        await client.query(m.sql.replaceAll("{s}", s));
        await client.query(`insert into ${s}.schema_migrations (version, name) values ($1, $2)`, [m.version, m.name]);
      }
      const insert = `insert into ${s}.api_calls (at, at_ms, day, team_id, credential_kind, credential_id, credential_name, method, route, object_id, status, latency_ms)
                      values ($1, $2, $3, 'team_ops', 'api-key', 'key_sync', 'Warehouse sync', 'GET', $4, $5, $6, $7)`;
      await client.query(insert, [
        "2026-11-01T10:00:00.000Z",
        Date.parse("2026-11-01T10:00:00.000Z"),
        "2026-11-01",
        ROWS,
        "ds_orders",
        200,
        4,
      ]);
      await client.query(insert, [
        "2026-11-01T10:00:00.000Z",
        Date.parse("2026-11-01T10:00:00.000Z"),
        "2026-11-01",
        ROWS,
        "ds_orders",
        503,
        7,
      ]);
      await client.query(insert, [
        "2026-11-01T12:00:00.000Z",
        Date.parse("2026-11-01T12:00:00.000Z"),
        "2026-11-01",
        ROWS,
        "ds_orders",
        200,
        1,
      ]);
      await client.query(insert, [
        "2026-10-30T08:00:00.000Z",
        Date.parse("2026-10-30T08:00:00.000Z"),
        "2026-10-30",
        "/api/v1/datasets",
        null,
        200,
        2,
      ]);
    } finally {
      await client.end();
    }
    const migrated = await store(schema, false);
    await migrated.seed(parseFixture(conformanceFixture()));
    expect(
      await migrated.usage.spaceApiUsage({ teamId: "team_ops", fromDay: "2026-10-01", toDay: "2026-11-30" }),
    ).toMatchObject([
      { day: "2026-11-01", route: ROWS, calls: 3, errors: 1, server_errors: 1, avg_latency_ms: 4 },
      { day: "2026-10-30", route: "/api/v1/datasets", calls: 1, errors: 0, avg_latency_ms: 2 },
    ]);
    // A counter migrated and one written now are the same group.
    migrated.usage.recordApiCall(call("2026-11-01T13:00:00.000Z", { latencyMs: 8 }));
    expect(
      (await migrated.usage.spaceApiUsage({ teamId: "team_ops", fromDay: "2026-11-01", toDay: "2026-11-01" }))[0],
    ).toMatchObject({ calls: 4, avg_latency_ms: 5 });
    expect(
      (await migrated.usage.spaceDatasetUsage({ teamId: "team_ops" })).find((d) => d.dataset_id === "ds_orders"),
    ).toMatchObject({
      api_reads: 3,
      last_api_read_at: "2026-11-01T13:00:00.000Z",
    });
    expect(await migrated.db.query(`select to_regclass('${schema}.api_calls') as t`)).toEqual([{ t: null }]);
  });

  it("authenticates a key or a session in one round trip, and an identity write applies to the very next request", async () => {
    const s = await store();
    const api = createDataApi({ storage: s });
    const queries = vi.spyOn(s.db.pool, "query");
    const me = async (token: string) => {
      const before = queries.mock.calls.length;
      const reply = await api.fetch(
        new Request("http://dataport.test/api/v1/me", { headers: { authorization: `Bearer ${token}` } }),
      );
      return {
        status: reply.status,
        body: (await reply.json()) as Record<string, unknown>,
        roundTrips: queries.mock.calls.length - before,
      };
    };
    expect(await me(TOKENS.sync)).toMatchObject({
      status: 200,
      roundTrips: 1,
      body: { kind: "api-key", teams: [{ id: "team_ops" }] },
    });
    // The session, its user, the memberships and their teams: one statement.
    const ada = await me(TOKENS.sessionAda);
    expect(ada).toMatchObject({ status: 200, roundTrips: 1 });
    expect(ada.body.teams).toEqual([
      { id: "team_free", name: "Hobby", isPersonal: true, role: "owner" },
      { id: "team_ops", name: "Operations", isPersonal: false, role: "owner" },
    ]);
    await s.identity.deleteMembership("usr_ada", "team_free");
    await s.identity.putTeam({ ...(await s.identity.getTeam("team_ops"))!, name: "Ops" });
    expect((await me(TOKENS.sessionAda)).body.teams).toEqual([
      { id: "team_ops", name: "Ops", isPersonal: false, role: "owner" },
    ]);
    await s.identity.deleteUser("usr_ada");
    expect(await me(TOKENS.sessionAda)).toMatchObject({ status: 401, roundTrips: 1 });
    expect(await me("sess_nobody")).toMatchObject({ status: 401 });
    queries.mockRestore();
  });
});
