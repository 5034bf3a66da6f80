import pg from "pg";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { parseFixture } from "../src/fixture/load.js";
import type { AuditEvent, Row } from "../src/domain/model.js";
import { createPostgresStorage, type PostgresStorage } from "../src/postgres/index.js";
import { conformanceFixture } from "../src/testing/conformance/fixture.js";
import { dropSchemas, POSTGRES_URL, postgresSkipReason, testSchema } from "./support/services.js";

// PostgreSQL-specific guarantees: atomic claims across connections, xid
// gating of the audit feed, positions for deep pages, concurrent start-up.
// (The area conformance suites run in test/conformance/postgres.test.ts.)
const skip = await postgresSkipReason();
const schemas: string[] = [];
const open: PostgresStorage[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((s) => s.close()));
});
afterAll(() => dropSchemas(schemas));

const NOW = Date.parse("2026-11-01T12:00:00.000Z");
const actor = { type: "api-key", id: "key_sync", name: "Warehouse sync" } as const;

async function store(schema = testSchema(), seed = true): Promise<PostgresStorage> {
  if (!schemas.includes(schema)) schemas.push(schema);
  const made = await createPostgresStorage({ connectionString: POSTGRES_URL, schema, maxConnections: 25 });
  open.push(made);
  if (seed) await made.seed(parseFixture(spaceWithActivity()));
  return made;
}

function spaceWithActivity() {
  const fixture = conformanceFixture() as ReturnType<typeof conformanceFixture> & Record<string, unknown>;
  fixture.dashboards = [
    {
      id: "dash_sales",
      teamId: "team_ops",
      name: "Sales",
      description: null,
      versions: [{ version: 1, published: true, createdAt: "2026-10-01T00:00:00Z", updatedAt: "2026-10-01T00:00:00Z", publishedAt: "2026-10-01T00:00:00Z" }],
      datasetIds: ["ds_orders"],
    },
  ];
  fixture.dashboardViews = [
    { dashboardId: "dash_sales", at: "2026-10-20T08:00:00Z", visitorId: "vis_1", userId: null },
    { dashboardId: "dash_sales", at: "2026-10-20T09:00:00Z", visitorId: "vis_1", userId: null },
    { dashboardId: "dash_sales", at: "2026-10-20T10:00:00Z", visitorId: "vis_2", userId: "usr_ada" },
    { dashboardId: "dash_sales", at: "2026-10-20T11:00:00Z", visitorId: "vis_3", userId: "usr_bob", editor: true },
    { dashboardId: "dash_sales", at: "2026-10-22T10:00:00Z", visitorId: "vis_2", userId: "usr_ada" },
  ];
  fixture.refreshRuns = [
    { datasetId: "ds_stores", startedAt: "2026-10-21T01:00:00Z", durationMs: 1000, rowsProcessed: 10, error: null },
    { datasetId: "ds_stores", startedAt: "2026-10-21T02:00:00Z", durationMs: 2001, rowsProcessed: 0, error: "timeout" },
    { datasetId: "ds_stores", startedAt: "2026-10-21T03:00:00Z", durationMs: 1500, rowsProcessed: 0, error: "refused" },
  ];
  fixture.auditEvents = [1, 2, 3].map((n) => event(`evt_fx_${n}`, "2026-10-01T00:00:00Z"));
  return fixture;
}

function event(id: string, time: string, teamId = "team_ops"): AuditEvent {
  return { id, teamId, time, category: "audit", action: "test.event", actor: null, target: null, outcome: "success", ip: null, userAgent: null };
}

async function collect(rows: AsyncIterable<Row>): Promise<Row[]> {
  const out: Row[] = [];
  for await (const row of rows) out.push(row);
  return out;
}

describe.skipIf(!!skip)("postgres storage", () => {
  it("starts many instances on one new schema at once: migrations once, seed once", async () => {
    const schema = testSchema();
    schemas.push(schema);
    const instances = await Promise.all(
      Array.from({ length: 4 }, () => createPostgresStorage({ connectionString: POSTGRES_URL, schema, maxConnections: 2 })),
    );
    open.push(...instances);
    const outcomes = await Promise.all(instances.map((s) => s.seed(parseFixture(conformanceFixture()))));
    expect(outcomes.sort()).toEqual(["kept", "kept", "kept", "loaded"]);
    const versions = await instances[0]!.db.query<{ version: number }>(`select version from ${instances[0]!.db.t("schema_migrations")}`);
    expect(versions.map((v) => v.version)).toEqual([1, 2]);
    expect((await instances[3]!.listDatasets({ teamId: "team_ops" })).length).toBe(4);
  });

  it("reopens an existing schema without re-applying migrations, keeping what was written", async () => {
    const schema = testSchema();
    const first = await store(schema);
    await first.appendAuditEvent(event("evt_kept", "2026-10-01T00:00:00Z"), NOW - 10_000);
    await first.close();
    const again = await store(schema, false);
    expect(await again.seed(parseFixture(conformanceFixture()))).toBe("kept");
    const applied = await again.db.query<{ version: number }>(`select version from ${again.db.t("schema_migrations")}`);
    expect(applied.map((r) => r.version)).toEqual([1, 2]);
    const feed = await again.readAuditEvents({ teamIds: ["team_ops"], categories: ["audit"], after: null, since: null, storedBefore: NOW, limit: 10 });
    expect(feed.events.map((e) => e.event.id)).toEqual(["evt_fx_1", "evt_fx_2", "evt_fx_3", "evt_kept"]);
  });

  describe("input tables", () => {
    const base = { tableId: "tbl_targets", actor };
    const audit = (action: string) => event(`evt_${action}_${Math.random()}`, new Date(NOW).toISOString());

    it("inserts, updates and deletes with strictly increasing _updatedAt, an edit log and audit events", async () => {
      const s = await store();
      const created = await s.insertTableRow({ ...base, rowId: "row_2", values: { region: "APAC", target: 5 }, now: NOW, auditEvent: audit("c") });
      expect(created).toEqual({ _id: "row_2", region: "APAC", target: 5, _createdAt: "2026-11-01T12:00:00.000Z", _updatedAt: "2026-11-01T12:00:00.000Z" });
      const first = await s.updateTableRow({ ...base, rowId: "row_2", patch: { target: 6 }, expectedUpdatedAt: null, now: NOW, auditEvent: audit("u1") });
      const second = await s.updateTableRow({ ...base, rowId: "row_2", patch: { target: 7 }, expectedUpdatedAt: null, now: NOW, auditEvent: audit("u2") });
      expect(first.status === "ok" && first.row._updatedAt).toBe("2026-11-01T12:00:00.001Z");
      expect(second.status === "ok" && second.row._updatedAt).toBe("2026-11-01T12:00:00.002Z");
      expect(second.status === "ok" && second.row.target).toBe(7);
      const stale = await s.updateTableRow({ ...base, rowId: "row_2", patch: { target: 8 }, expectedUpdatedAt: "2026-11-01T12:00:00.001Z", now: NOW, auditEvent: audit("u3") });
      expect(stale).toEqual({ status: "conflict", current: { ...(second.status === "ok" ? second.row : {}) } });
      expect(await s.updateTableRow({ ...base, rowId: "nope", patch: {}, expectedUpdatedAt: null, now: NOW, auditEvent: audit("u4") })).toEqual({ status: "not_found" });
      const deleted = await s.deleteTableRow({ ...base, rowId: "row_2", now: NOW + 5, auditEvent: audit("d") });
      expect(deleted.status).toBe("ok");
      expect((await s.getTable("tbl_targets"))?.rowCount).toBe(1);
      const log = await s.listEditLog("tbl_targets");
      expect(log.map((e) => [e.op, e.rowId, e.actor.id])).toEqual([
        ["create", "row_2", "key_sync"],
        ["update", "row_2", "key_sync"],
        ["update", "row_2", "key_sync"],
        ["delete", "row_2", "key_sync"],
      ]);
      expect(log[1]?.before).toMatchObject({ target: 5 });
      expect(log[1]?.after).toMatchObject({ target: 6 });
      const feed = await s.readAuditEvents({ teamIds: ["team_ops"], categories: ["audit"], after: null, since: null, storedBefore: NOW + 5, limit: 100 });
      expect(feed.events.map((e) => e.event.id.split("_")[1])).toEqual(["fx", "fx", "fx", "c", "u1", "u2", "d"]);
    });

    it("lets exactly one of 20 concurrent compare-and-set updates win", async () => {
      const s = await store();
      const results = await Promise.all(
        Array.from({ length: 20 }, (_, i) =>
          s.updateTableRow({ ...base, rowId: "row_1", patch: { target: i }, expectedUpdatedAt: "2026-10-01T00:00:00Z", now: NOW, auditEvent: audit(`p${i}`) }),
        ),
      );
      expect(results.filter((r) => r.status === "ok")).toHaveLength(1);
      expect(results.filter((r) => r.status === "conflict")).toHaveLength(19);
    });

    it("claims an Idempotency-Key for exactly one of 50 concurrent requests, replays it, and expires it after the TTL", async () => {
      const s = await store();
      const claim = { scope: "key_sync:tbl_targets", key: "k1", fingerprint: "fp", now: NOW, ttlMs: 86_400_000, leaseMs: 60_000 };
      const claims = await Promise.all(Array.from({ length: 50 }, () => s.claimIdempotencyKey(claim)));
      expect(claims.filter((c) => c.state === "claimed")).toHaveLength(1);
      expect(claims.filter((c) => c.state === "in_progress")).toHaveLength(49);
      await s.completeIdempotencyKey({ scope: claim.scope, key: "k1", response: { status: 201, body: { _id: "row_9" } } });
      expect(await s.claimIdempotencyKey({ ...claim, fingerprint: "other" })).toEqual({
        state: "completed",
        fingerprint: "fp",
        response: { status: 201, body: { _id: "row_9" } },
      });
      expect(await s.claimIdempotencyKey({ ...claim, now: NOW + 86_400_001 })).toEqual({ state: "claimed" });
      await s.releaseIdempotencyKey({ scope: claim.scope, key: "k1" });
      expect(await s.claimIdempotencyKey(claim)).toEqual({ state: "claimed" });
    });
  });

  describe("webhooks", () => {
    const create = (s: PostgresStorage, retainRows = 10_000) =>
      s.createWebhookConnection({
        connection: { id: "conn_hook", teamId: "team_ops", name: "Hook", createdAt: "2026-11-01T00:00:00.000Z" },
        endpoint: { endpointId: "ep_123", signingSecret: null, retainRows },
        dataset: { id: "ds_hook", name: "Hook events" },
      });
    const ingest = (s: PostgresStorage, n: number, dedupKey: string | null, retainRows = 10_000) =>
      s.ingestWebhookRow({
        datasetId: "ds_hook",
        dedupKey,
        row: { _id: `row_${n}`, n, _receivedAt: "2026-11-01T00:00:01.000Z" },
        columns: [
          { name: "_id", type: "string" },
          { name: "n", type: "number" },
        ],
        retainRows,
        receivedAt: "2026-11-01T00:00:01.000Z",
      });

    it("stores exactly one row for 20 concurrent copies of one delivery", async () => {
      const s = await store();
      expect(await create(s)).toMatchObject({ connectionId: "conn_hook", datasetId: "ds_hook", endpointId: "ep_123", retainRows: 10_000 });
      const results = await Promise.all(Array.from({ length: 20 }, (_, i) => ingest(s, i, "delivery-1")));
      const stored = results.filter((r) => !r.duplicate);
      expect(stored).toHaveLength(1);
      expect(results.every((r) => r.id === stored[0]!.id)).toBe(true);
      const page = await s.readDatasetRows("ds_hook", { offset: 0, limit: null, columns: null, filters: null });
      expect(page.totalRows).toBe(1);
      expect(await s.getDataset("ds_hook")).toMatchObject({ rowCount: 1, columns: [{ name: "_id", type: "string" }, { name: "n", type: "number" }] });
    });

    it("trims the oldest rows beyond retention, forgets their dedup keys, and pages by position", async () => {
      const s = await store();
      await create(s, 3);
      for (let n = 1; n <= 6; n++) await ingest(s, n, `d${n}`, 3);
      const page = await s.readDatasetRows("ds_hook", { offset: 1, limit: 5, columns: ["n", "__proto__"], filters: null });
      expect(page.totalRows).toBe(3);
      const rows = await collect(page.rows);
      expect(rows.map((r) => ({ ...r }))).toEqual([
        { n: 5, ["__proto__"]: null },
        { n: 6, ["__proto__"]: null },
      ]);
      expect((await s.getDataset("ds_hook"))?.rowCount).toBe(3);
      expect((await ingest(s, 1, "d1", 3)).duplicate).toBe(false);
      expect((await ingest(s, 6, "d6", 3)).duplicate).toBe(true);
      expect(await s.getWebhookEndpoint("ep_123")).toMatchObject({ connectionId: "conn_hook", retainRows: 3 });
      expect(await s.updateWebhookSettings("conn_hook", { signingSecret: "s3cret", retainRows: 2 })).toMatchObject({ signingSecret: "s3cret", retainRows: 2 });
      expect((await s.getConnection("conn_hook"))?.config).toEqual({ endpointId: "ep_123", signingSecret: "s3cret", retainRows: 2 });
      expect(await s.updateWebhookSettings("nope", { retainRows: 2 })).toBeNull();
    });
  });

  describe("dataset rows", () => {
    it("keeps row key order, streams in batches and releases the connection when a reader stops early", async () => {
      const s = await store();
      const rows = Array.from({ length: 2500 }, (_, i) => ({ z: i, a: `r${i}`, m: { y: 1, b: 2 } }));
      await s.replaceDatasetRows("ds_stores", { rows, columns: [], refreshedAt: "2026-11-01T00:00:00.000Z" });
      const page = await s.readDatasetRows("ds_stores", { offset: 2400, limit: null, columns: null, filters: null });
      expect(page.totalRows).toBe(2500);
      const read = await collect(page.rows);
      expect(read).toHaveLength(100);
      expect(Object.keys(read[0]!)).toEqual(["z", "a", "m"]);
      expect(Object.keys(read[0]!.m as object)).toEqual(["y", "b"]);
      const filtered = await s.readDatasetRows("ds_stores", { offset: 0, limit: 2, columns: null, filters: { m: { b: 2, y: 1 }, z: 7 } });
      expect(filtered.totalRows).toBe(1);
      expect(await collect(filtered.rows)).toEqual([rows[7]]);
      for await (const row of (await s.readDatasetRows("ds_stores", { offset: 0, limit: null, columns: null, filters: null })).rows) {
        expect(row.z).toBe(0);
        break;
      }
      expect(s.db.pool.totalCount - s.db.pool.idleCount).toBe(0);
    });
  });

  describe("audit feed", () => {
    const read = (s: PostgresStorage, after: string | null, limit = 100, storedBefore = NOW) =>
      s.readAuditEvents({ teamIds: ["team_ops"], categories: ["audit"], after, since: null, storedBefore, limit });

    it("pages every event exactly once and validates positions", async () => {
      const s = await store();
      for (let i = 0; i < 5; i++) await s.appendAuditEvent(event(`evt_${i}`, "2026-10-01T00:00:00Z"), NOW - 10_000);
      const seen: string[] = [];
      let after: string | null = null;
      for (;;) {
        const page = await read(s, after, 2);
        seen.push(...page.events.map((e) => e.event.id));
        if (page.events.length > 0) after = page.events.at(-1)!.position;
        if (!page.hasMore) break;
      }
      expect(seen).toEqual(["evt_fx_1", "evt_fx_2", "evt_fx_3", "evt_0", "evt_1", "evt_2", "evt_3", "evt_4"]);
      expect(s.isAuditPosition(after!)).toBe(true);
      for (const bad of ["", "1", "abc.1", "1.0", "01.1", "1.-1", "99999999999999999999999.1", "1.1 "]) expect(s.isAuditPosition(bad)).toBe(false);
    });

    it("orders positions by transaction id as a number, across a change in its digit count (9 before 10, 99 before 100)", async () => {
      const s = await store(testSchema(), false);
      // Transaction ids set by hand, inserted out of order. All below any live one, so all visible: initdb alone
      // uses several hundred, and a fresh cluster's counter may still be below 1000 when this runs.
      for (const xid of ["100", "10", "99", "9"]) {
        await s.db.query(`insert into ${s.db.t("audit_events")} (xid, team_id, category, time_ms, stored_at, event) values ($1::xid8, 'team_ops', 'audit', 0, 0, $2)`, [
          xid,
          JSON.stringify(event(`evt_x${xid}`, "2026-10-01T00:00:00Z")),
        ]);
      }
      const all = await read(s, null);
      expect(all.events.map((e) => e.event.id)).toEqual(["evt_x9", "evt_x10", "evt_x99", "evt_x100"]);
      const seen: string[] = [];
      let after: string | null = null;
      for (;;) {
        const page = await read(s, after, 1);
        seen.push(...page.events.map((e) => e.event.id));
        if (page.events.length > 0) after = page.events.at(-1)!.position;
        if (!page.hasMore) break;
      }
      expect(seen).toEqual(["evt_x9", "evt_x10", "evt_x99", "evt_x100"]);
    });

    it("holds back events stored after the horizon, as a prefix", async () => {
      const s = await store();
      await s.appendAuditEvent(event("evt_old", "2026-10-01T00:00:00Z"), NOW - 10_000);
      await s.appendAuditEvent(event("evt_new", "2026-10-01T00:00:00Z"), NOW);
      await s.appendAuditEvent(event("evt_older_clock", "2026-10-01T00:00:00Z"), NOW - 20_000);
      const page = await read(s, null, 100, NOW - 5_000);
      expect(page.events.map((e) => e.event.id)).toEqual(["evt_fx_1", "evt_fx_2", "evt_fx_3", "evt_old"]);
      expect(page.hasMore).toBe(false);
      const later = await read(s, page.events.at(-1)!.position, 100, NOW);
      expect(later.events.map((e) => e.event.id)).toEqual(["evt_new", "evt_older_clock"]);
    });

    it("never lets a late-committing transaction's event appear behind a returned position", async () => {
      const s = await store();
      const start = await read(s, null);
      const cursor = start.events.at(-1)!.position;
      // T1 takes its xid first but commits last.
      const slow = new pg.Client({ connectionString: POSTGRES_URL });
      await slow.connect();
      try {
        await slow.query("BEGIN");
        await slow.query(`insert into ${s.db.t("audit_events")} (team_id, category, time_ms, stored_at, event) values ('team_ops', 'audit', 0, $1, $2)`, [
          NOW - 1000,
          JSON.stringify(event("evt_slow", "2026-10-01T00:00:00Z")),
        ]);
        await s.appendAuditEvent(event("evt_fast", "2026-10-01T00:00:00Z"), NOW - 1000);
        // evt_fast is committed but sits behind the open T1: not readable yet.
        expect((await read(s, cursor)).events).toEqual([]);
        await slow.query("COMMIT");
      } finally {
        await slow.end();
      }
      const page = await read(s, cursor);
      expect(page.events.map((e) => e.event.id)).toEqual(["evt_slow", "evt_fast"]);
      expect((await read(s, page.events.at(-1)!.position)).events).toEqual([]);
    });
  });

  describe("audit feed under concurrent writers", () => {
    it("delivers every event exactly once to a poller while transactions commit out of order", async () => {
      const s = await store();
      const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
      const written: string[] = [];
      const writer = async (w: number) => {
        const client = new pg.Client({ connectionString: POSTGRES_URL });
        await client.connect();
        try {
          for (let i = 0; i < 15; i++) {
            const id = `evt_w${w}_${i}`;
            await client.query("BEGIN");
            await client.query(`insert into ${s.db.t("audit_events")} (team_id, category, time_ms, stored_at, event) values ('team_ops', 'audit', 0, 0, $1)`, [
              JSON.stringify(event(id, "2026-10-01T00:00:00Z")),
            ]);
            // Hold the transaction open a while so later xids commit first.
            await sleep((w * 7 + i * 3) % 11);
            await client.query("COMMIT");
            written.push(id);
          }
        } finally {
          await client.end();
        }
      };
      const seen: string[] = [];
      let after: string | null = null;
      let writing = true;
      const poller = (async () => {
        while (writing || seen.length < written.length + 3) {
          const page = await s.readAuditEvents({ teamIds: ["team_ops"], categories: ["audit"], after, since: null, storedBefore: NOW, limit: 7 });
          seen.push(...page.events.map((e) => e.event.id));
          if (page.events.length > 0) after = page.events.at(-1)!.position;
          else await sleep(2);
        }
      })();
      await Promise.all([0, 1, 2, 3, 4].map(writer));
      writing = false;
      await poller;
      expect(new Set(seen).size).toBe(seen.length);
      expect([...seen].sort()).toEqual([...written, "evt_fx_1", "evt_fx_2", "evt_fx_3"].sort());
    });
  });

  describe("analytics", () => {
    it("aggregates views, refresh runs and the API usage log in SQL", async () => {
      const s = await store();
      const window = { fromDay: "2026-10-01", toDay: "2026-10-31" };
      expect(await s.viewsByDay("dash_sales", window)).toEqual([
        { day: "2026-10-20", views: 3, uniqueVisitors: 2 },
        { day: "2026-10-22", views: 1, uniqueVisitors: 1 },
      ]);
      expect(await s.viewsByViewer("dash_sales", window)).toEqual([
        { day: "2026-10-20", viewerId: null, viewer: "Anonymous", views: 2 },
        { day: "2026-10-20", viewerId: "usr_ada", viewer: "ada@northwind.test", views: 1 },
        { day: "2026-10-22", viewerId: "usr_ada", viewer: "ada@northwind.test", views: 1 },
      ]);
      expect(await s.spaceRefreshHistory({ teamId: "team_ops", ...window })).toEqual([
        {
          dataset_id: "ds_stores",
          dataset: "Stores",
          connection: "Retail warehouse",
          day: "2026-10-21",
          runs: 3,
          failures: 2,
          rows_processed: 10,
          avg_duration_ms: 1500,
          last_error: "refused",
        },
      ]);
      await s.recordApiCall({
        at: "2026-10-30T10:00:00.000Z",
        teamId: "team_ops",
        credentialKind: "api-key",
        credentialId: "key_sync",
        credentialName: "Warehouse sync",
        method: "GET",
        route: "/api/v1/datasets",
        status: 500,
        latencyMs: 12,
      });
      expect(await s.spaceApiUsage({ teamId: "team_ops", ...window })).toMatchObject([
        { day: "2026-10-30", route: "/api/v1/datasets", credential: "Warehouse sync", calls: 1, errors: 1 },
      ]);
      expect((await s.listDashboards(["team_ops"])).map((d) => d.id)).toEqual(["dash_sales"]);
    });
  });
});
