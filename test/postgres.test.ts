import pg from "pg";
import { describe, expect, it } from "vitest";
import { parseFixture } from "../src/fixture/load.js";
import { sha256Hex } from "../src/domain/crypto.js";
import type { AuditEvent, Column, Row } from "../src/domain/model.js";
import { createPostgresStorage, MIGRATIONS, type PostgresStorage } from "../src/postgres/index.js";
import { conformanceFixture, TOKENS } from "../src/testing/conformance/fixture.js";
import { postgresStores } from "./support/postgres-stores.js";
import { POSTGRES_URL, postgresSkipReason, testSchema } from "./support/services.js";

// PostgreSQL-specific guarantees: atomic claims across connections, xid
// gating of the audit feed, positions for deep pages, concurrent start-up.
// (The area conformance suites run in test/conformance/postgres.test.ts.)
const skip = await postgresSkipReason();

const NOW = Date.parse("2026-11-01T12:00:00.000Z");
const actor = { type: "api-key", id: "key_sync", name: "Warehouse sync" } as const;
const DAY = 86_400_000;

const { store, schema: useSchema, closeAfterTest } = postgresStores({ maxConnections: 25, fixture: spaceWithActivity });

function spaceWithActivity() {
  const fixture = conformanceFixture() as ReturnType<typeof conformanceFixture> & Record<string, unknown>;
  fixture.dashboards = [
    {
      id: "dash_sales",
      teamId: "team_ops",
      name: "Sales",
      description: null,
      versions: [
        {
          version: 1,
          published: true,
          createdAt: "2026-10-01T00:00:00Z",
          updatedAt: "2026-10-01T00:00:00Z",
          publishedAt: "2026-10-01T00:00:00Z",
        },
      ],
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
  return {
    id,
    teamId,
    time,
    category: "audit",
    action: "test.event",
    actor: null,
    target: null,
    outcome: "success",
    ip: null,
    userAgent: null,
  };
}

async function collect(rows: AsyncIterable<Row>): Promise<Row[]> {
  const out: Row[] = [];
  for await (const row of rows) out.push(row);
  return out;
}

describe.skipIf(!!skip)("postgres storage", () => {
  it("starts many instances on one new schema at once: migrations once, seed once", async () => {
    const schema = useSchema();
    const instances = await Promise.all(
      Array.from({ length: 4 }, () =>
        createPostgresStorage({ connectionString: POSTGRES_URL, schema, maxConnections: 2 }),
      ),
    );
    closeAfterTest(...instances);
    const outcomes = await Promise.all(instances.map((s) => s.seed(parseFixture(conformanceFixture()))));
    expect(outcomes.sort()).toEqual(["kept", "kept", "kept", "loaded"]);
    const versions = await instances[0]!.db.query<{ version: number }>(
      `select version from ${instances[0]!.db.t("schema_migrations")}`,
    );
    expect(versions.map((v) => v.version)).toEqual(MIGRATIONS.map((m) => m.version));
    expect((await instances[3]!.catalog.listDatasets({ teamId: "team_ops" })).length).toBe(4);
  });

  it("reopens an existing schema without re-applying migrations, keeping what was written", async () => {
    const schema = testSchema();
    const first = await store(schema);
    await first.audit.appendAuditEvent(event("evt_kept", "2026-10-01T00:00:00Z"), NOW - 10_000);
    await first.close();
    const again = await store(schema, false);
    expect(await again.seed(parseFixture(conformanceFixture()))).toBe("kept");
    const applied = await again.db.query<{ version: number }>(`select version from ${again.db.t("schema_migrations")}`);
    expect(applied.map((r) => r.version)).toEqual(MIGRATIONS.map((m) => m.version));
    const feed = await again.audit.readAuditEvents({
      teamIds: ["team_ops"],
      categories: ["audit"],
      after: null,
      since: null,
      storedBefore: NOW,
      limit: 10,
    });
    expect(feed.events.map((e) => e.event.id)).toEqual(["evt_fx_1", "evt_fx_2", "evt_fx_3", "evt_kept"]);
  });

  describe("input tables", () => {
    const base = { tableId: "tbl_targets", actor };
    const audit = (action: string) => event(`evt_${action}_${Math.random()}`, new Date(NOW).toISOString());

    it("inserts, updates and deletes with strictly increasing _updatedAt, an edit log and audit events", async () => {
      const s = await store();
      const created = await s.tables.insertTableRow({
        ...base,
        rowId: "row_2",
        values: { region: "APAC", target: 5 },
        now: NOW,
        auditEvent: audit("c"),
      });
      expect(created).toEqual({
        _id: "row_2",
        region: "APAC",
        target: 5,
        _createdAt: "2026-11-01T12:00:00.000Z",
        _updatedAt: "2026-11-01T12:00:00.000Z",
      });
      const first = await s.tables.updateTableRow({
        ...base,
        rowId: "row_2",
        patch: { target: 6 },
        expectedUpdatedAt: null,
        now: NOW,
        auditEvent: audit("u1"),
      });
      const second = await s.tables.updateTableRow({
        ...base,
        rowId: "row_2",
        patch: { target: 7 },
        expectedUpdatedAt: null,
        now: NOW,
        auditEvent: audit("u2"),
      });
      expect(first.status === "ok" && first.row._updatedAt).toBe("2026-11-01T12:00:00.001Z");
      expect(second.status === "ok" && second.row._updatedAt).toBe("2026-11-01T12:00:00.002Z");
      expect(second.status === "ok" && second.row.target).toBe(7);
      const stale = await s.tables.updateTableRow({
        ...base,
        rowId: "row_2",
        patch: { target: 8 },
        expectedUpdatedAt: "2026-11-01T12:00:00.001Z",
        now: NOW,
        auditEvent: audit("u3"),
      });
      expect(stale).toEqual({ status: "conflict", current: { ...(second.status === "ok" ? second.row : {}) } });
      expect(
        await s.tables.updateTableRow({
          ...base,
          rowId: "nope",
          patch: {},
          expectedUpdatedAt: null,
          now: NOW,
          auditEvent: audit("u4"),
        }),
      ).toEqual({ status: "not_found" });
      const deleted = await s.tables.deleteTableRow({ ...base, rowId: "row_2", now: NOW + 5, auditEvent: audit("d") });
      expect(deleted.status).toBe("ok");
      expect((await s.tables.getTable("tbl_targets"))?.rowCount).toBe(1);
      const log = await s.tables.listEditLog("tbl_targets");
      expect(log.map((e) => [e.op, e.rowId, e.actor.id])).toEqual([
        ["create", "row_2", "key_sync"],
        ["update", "row_2", "key_sync"],
        ["update", "row_2", "key_sync"],
        ["delete", "row_2", "key_sync"],
      ]);
      expect(log[1]?.before).toMatchObject({ target: 5 });
      expect(log[1]?.after).toMatchObject({ target: 6 });
      const feed = await s.audit.readAuditEvents({
        teamIds: ["team_ops"],
        categories: ["audit"],
        after: null,
        since: null,
        storedBefore: NOW + 5,
        limit: 100,
      });
      expect(feed.events.map((e) => e.event.id.split("_")[1])).toEqual(["fx", "fx", "fx", "c", "u1", "u2", "d"]);
    });

    it("lets exactly one of 20 concurrent compare-and-set updates win", async () => {
      const s = await store();
      const results = await Promise.all(
        Array.from({ length: 20 }, (_, i) =>
          s.tables.updateTableRow({
            ...base,
            rowId: "row_1",
            patch: { target: i },
            expectedUpdatedAt: "2026-10-01T00:00:00Z",
            now: NOW,
            auditEvent: audit(`p${i}`),
          }),
        ),
      );
      expect(results.filter((r) => r.status === "ok")).toHaveLength(1);
      expect(results.filter((r) => r.status === "conflict")).toHaveLength(19);
    });

    it("writes one row for 40 concurrent inserts with one Idempotency-Key on two instances", async () => {
      const s = await store();
      const other = await store(s.db.schema.slice(1, -1), false);
      const idempotency = { scope: "key_sync:tbl_targets", key: "k1", fingerprint: "fp", status: 201, ttlMs: DAY };
      const outcomes = await Promise.all(
        Array.from({ length: 40 }, (_, i) =>
          (i % 2 ? other : s).tables.insertTableRowOnce({
            ...base,
            rowId: `row_k${i}`,
            values: { n: i },
            now: NOW,
            auditEvent: audit(`k${i}`),
            idempotency,
          }),
        ),
      );
      const written = outcomes.filter((o) => o.state === "written");
      expect(written).toHaveLength(1);
      const row = (written[0] as { result: Row }).result;
      expect(outcomes.filter((o) => o.state === "completed")).toEqual(
        Array(39).fill({ state: "completed", fingerprint: "fp", response: { status: 201, body: row } }),
      );
      const rows = await s.tables.listTableRows("tbl_targets", { offset: 0, limit: 100 });
      expect(rows.rows.map((r) => r._id)).toEqual(["row_1", row._id]);
      // Expired by the clock: written afresh.
      const late = { ...base, rowId: "row_late", values: {}, now: NOW + DAY + 1, auditEvent: audit("late") };
      const later = await s.tables.insertTableRowOnce({ ...late, idempotency });
      expect(later).toMatchObject({ state: "written", result: { _id: "row_late" } });
    });
  });

  describe("webhooks", () => {
    const create = (s: PostgresStorage, retainRows = 10_000) =>
      s.webhooks.createWebhookConnection({
        connection: { id: "conn_hook", teamId: "team_ops", name: "Hook", createdAt: "2026-11-01T00:00:00.000Z" },
        endpoint: { endpointId: "ep_123", signingSecret: null, retainRows },
        dataset: { id: "ds_hook", name: "Hook events" },
      });
    const ingest = (s: PostgresStorage, n: number, dedupKey: string | null, retainRows = 10_000) =>
      s.webhooks.ingestWebhookRow({
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
      expect(await create(s)).toMatchObject({
        connectionId: "conn_hook",
        datasetId: "ds_hook",
        endpointId: "ep_123",
        retainRows: 10_000,
      });
      const results = await Promise.all(Array.from({ length: 20 }, (_, i) => ingest(s, i, "delivery-1")));
      const stored = results.filter((r) => !r.duplicate);
      expect(stored).toHaveLength(1);
      expect(results.every((r) => r.id === stored[0]!.id)).toBe(true);
      const page = await s.rows.readDatasetRows("ds_hook", { offset: 0, limit: null, columns: null, filters: null });
      expect(page.totalRows).toBe(1);
      expect(await s.catalog.getDataset("ds_hook")).toMatchObject({
        rowCount: 1,
        columns: [
          { name: "_id", type: "string" },
          { name: "n", type: "number" },
        ],
      });
    });

    it("trims the oldest rows beyond retention, forgets their dedup keys, and pages by position", async () => {
      const s = await store();
      await create(s, 3);
      for (let n = 1; n <= 6; n++) await ingest(s, n, `d${n}`, 3);
      const page = await s.rows.readDatasetRows("ds_hook", {
        offset: 1,
        limit: 5,
        columns: ["n", "__proto__"],
        filters: null,
      });
      expect(page.totalRows).toBe(3);
      const rows = await collect(page.rows);
      expect(rows.map((r) => ({ ...r }))).toEqual([
        { n: 5, ["__proto__"]: null },
        { n: 6, ["__proto__"]: null },
      ]);
      expect((await s.catalog.getDataset("ds_hook"))?.rowCount).toBe(3);
      expect((await ingest(s, 1, "d1", 3)).duplicate).toBe(false);
      expect((await ingest(s, 6, "d6", 3)).duplicate).toBe(true);
      expect(await s.webhooks.getWebhookEndpoint("ep_123")).toMatchObject({ connectionId: "conn_hook", retainRows: 3 });
      expect(
        await s.webhooks.updateWebhookSettings("conn_hook", { signingSecret: "s3cret", retainRows: 2 }),
      ).toMatchObject({ signingSecret: "s3cret", retainRows: 2 });
      expect((await s.catalog.getConnection("conn_hook"))?.config).toEqual({
        endpointId: "ep_123",
        signingSecret: "s3cret",
        retainRows: 2,
      });
      expect(await s.webhooks.updateWebhookSettings("nope", { retainRows: 2 })).toBeNull();
    });
  });

  describe("dataset rows", () => {
    it("keeps row key order, streams in batches and releases the connection when a reader stops early", async () => {
      const s = await store();
      const rows = Array.from({ length: 2500 }, (_, i) => ({ z: i, a: `r${i}`, m: { y: 1, b: 2 } }));
      await s.rows.replaceDatasetRows("ds_stores", { rows, columns: [], refreshedAt: "2026-11-01T00:00:00.000Z" });
      const page = await s.rows.readDatasetRows("ds_stores", {
        offset: 2400,
        limit: null,
        columns: null,
        filters: null,
      });
      expect(page.totalRows).toBe(2500);
      const read = await collect(page.rows);
      expect(read).toHaveLength(100);
      expect(Object.keys(read[0]!)).toEqual(["z", "a", "m"]);
      expect(Object.keys(read[0]!.m as object)).toEqual(["y", "b"]);
      const filtered = await s.rows.readDatasetRows("ds_stores", {
        offset: 0,
        limit: 2,
        columns: null,
        filters: { m: { b: 2, y: 1 }, z: 7 },
      });
      expect(filtered.totalRows).toBe(1);
      expect(await collect(filtered.rows)).toEqual([rows[7]]);
      for await (const row of (
        await s.rows.readDatasetRows("ds_stores", { offset: 0, limit: null, columns: null, filters: null })
      ).rows) {
        expect(row.z).toBe(0);
        break;
      }
      expect(s.db.pool.totalCount - s.db.pool.idleCount).toBe(0);
    });
  });

  describe("audit feed", () => {
    const read = (s: PostgresStorage, after: string | null, limit = 100, storedBefore = NOW) =>
      s.audit.readAuditEvents({
        teamIds: ["team_ops"],
        categories: ["audit"],
        after,
        since: null,
        storedBefore,
        limit,
      });

    it("pages every event exactly once and validates positions", async () => {
      const s = await store();
      for (let i = 0; i < 5; i++)
        await s.audit.appendAuditEvent(event(`evt_${i}`, "2026-10-01T00:00:00Z"), NOW - 10_000);
      const seen: string[] = [];
      let after: string | null = null;
      for (;;) {
        const page = await read(s, after, 2);
        seen.push(...page.events.map((e) => e.event.id));
        if (page.events.length > 0) after = page.events.at(-1)!.position;
        if (!page.hasMore) break;
      }
      expect(seen).toEqual(["evt_fx_1", "evt_fx_2", "evt_fx_3", "evt_0", "evt_1", "evt_2", "evt_3", "evt_4"]);
      expect(s.audit.isAuditPosition(after!)).toBe(true);
      // A position, or the <xid>.<seq> of an event stored before migration 9.
      for (const good of ["1", "9223372036854775807", "0.1", "123.45"])
        expect(s.audit.isAuditPosition(good)).toBe(true);
      for (const bad of [
        "",
        "0",
        "01",
        "9223372036854775808",
        "abc.1",
        "1.0",
        "01.1",
        "1.-1",
        "99999999999999999999999.1",
        "1.1 ",
      ]) {
        expect(s.audit.isAuditPosition(bad)).toBe(false);
      }
    });

    it("orders positions as numbers, across a change in their digit count (9 before 10, 99 before 100)", async () => {
      const s = await store(testSchema(), false);
      await s.db.query(`select setval('${s.db.t("audit_positions")}'::regclass, 7)`);
      for (let i = 8; i <= 11; i++) await s.audit.appendAuditEvent(event(`evt_x${i}`, "2026-10-01T00:00:00Z"), 0);
      await s.db.query(`select setval('${s.db.t("audit_positions")}'::regclass, 97)`);
      for (let i = 98; i <= 101; i++) await s.audit.appendAuditEvent(event(`evt_x${i}`, "2026-10-01T00:00:00Z"), 0);
      const order = ["evt_x8", "evt_x9", "evt_x10", "evt_x11", "evt_x98", "evt_x99", "evt_x100", "evt_x101"];
      const all = await read(s, null);
      expect(all.events.map((e) => [e.event.id, e.position])).toEqual(order.map((id) => [id, id.slice(5)]));
      const seen: string[] = [];
      let after: string | null = null;
      for (;;) {
        const page = await read(s, after, 1);
        seen.push(...page.events.map((e) => e.event.id));
        if (page.events.length > 0) after = page.events.at(-1)!.position;
        if (!page.hasMore) break;
      }
      expect(seen).toEqual(order);
    });

    it("holds back events stored after the horizon, as a prefix", async () => {
      const s = await store();
      await s.audit.appendAuditEvent(event("evt_old", "2026-10-01T00:00:00Z"), NOW - 10_000);
      await s.audit.appendAuditEvent(event("evt_new", "2026-10-01T00:00:00Z"), NOW);
      await s.audit.appendAuditEvent(event("evt_older_clock", "2026-10-01T00:00:00Z"), NOW - 20_000);
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
      // T1 takes its position first but commits last.
      const slow = new pg.Client({ connectionString: POSTGRES_URL });
      await slow.connect();
      try {
        await slow.query("BEGIN");
        await slow.query(
          `insert into ${s.db.t("audit_events")} (team_id, category, time_ms, stored_at, event) values ('team_ops', 'audit', 0, $1, $2)`,
          [NOW - 1000, JSON.stringify(event("evt_slow", "2026-10-01T00:00:00Z"))],
        );
        await s.audit.appendAuditEvent(event("evt_fast", "2026-10-01T00:00:00Z"), NOW - 1000);
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
            await client.query(
              `insert into ${s.db.t("audit_events")} (team_id, category, time_ms, stored_at, event) values ('team_ops', 'audit', 0, 0, $1)`,
              [JSON.stringify(event(id, "2026-10-01T00:00:00Z"))],
            );
            // Hold the transaction open a while so later positions commit first.
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
          const page = await s.audit.readAuditEvents({
            teamIds: ["team_ops"],
            categories: ["audit"],
            after,
            since: null,
            storedBefore: NOW,
            limit: 7,
          });
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
      expect(await s.dashboards.viewsByDay("dash_sales", window)).toEqual([
        { day: "2026-10-20", views: 3, uniqueVisitors: 2 },
        { day: "2026-10-22", views: 1, uniqueVisitors: 1 },
      ]);
      expect(await s.dashboards.viewsByViewer("dash_sales", window)).toEqual([
        { day: "2026-10-20", viewerId: null, viewer: "Anonymous", views: 2 },
        { day: "2026-10-20", viewerId: "usr_ada", viewer: "ada@northwind.test", views: 1 },
        { day: "2026-10-22", viewerId: "usr_ada", viewer: "ada@northwind.test", views: 1 },
      ]);
      expect(await s.usage.spaceRefreshHistory({ teamId: "team_ops", ...window })).toEqual([
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
      await s.usage.recordApiCall({
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
      expect(await s.usage.spaceApiUsage({ teamId: "team_ops", ...window })).toMatchObject([
        { day: "2026-10-30", route: "/api/v1/datasets", credential: "Warehouse sync", calls: 1, errors: 1 },
      ]);
      expect((await s.dashboards.listDashboards(["team_ops"])).map((d) => d.id)).toEqual(["dash_sales"]);
    });
  });
  describe("admin writes across instances", () => {
    it("shows each admin write made through one instance to another on the same schema at once", async () => {
      const schema = testSchema();
      const one = await store(schema);
      const two = await store(schema, false);
      const keyHash = sha256Hex(TOKENS.sync);

      // Team plan change: authentication on the other instance reads the new plan.
      expect((await two.credentials.findApiKeyWithTeam!(keyHash))?.team?.plan).toBe("business");
      const ops = (await one.identity.getTeam("team_ops"))!;
      expect(await one.identity.putTeam({ ...ops, plan: "free" })).toBe("updated");
      expect((await two.credentials.findApiKeyWithTeam!(keyHash))?.team?.plan).toBe("free");
      expect(await two.identity.getTeam("team_ops")).toEqual({ ...ops, plan: "free" });

      // Membership removal.
      expect((await two.identity.listMemberships("usr_ada")).map((m) => m.teamId)).toEqual(["team_free", "team_ops"]);
      expect(await one.identity.deleteMembership("usr_ada", "team_ops")).toBe(true);
      expect((await two.identity.listMemberships("usr_ada")).map((m) => m.teamId)).toEqual(["team_free"]);
      expect(await one.identity.deleteMembership("usr_ada", "team_ops")).toBe(false);

      // Session deleted (fixture sessions carry sess_ + 24 hex digits of their hash).
      const sessionHash = sha256Hex(TOKENS.sessionAda);
      expect(await two.credentials.findSessionUser(sessionHash, NOW)).toBe("usr_ada");
      expect(await one.credentials.deleteSession(`sess_${sessionHash.slice(0, 24)}`)).toBe(true);
      expect(await two.credentials.findSessionUser(sessionHash, NOW)).toBeNull();
      expect(await two.credentials.getSession(`sess_${sessionHash.slice(0, 24)}`)).toBeNull();

      // A session with an expiry, written by one, expires on the other by its clock reading.
      const expiring = {
        id: "sess_exp",
        tokenHash: sha256Hex("expiring-token"),
        userId: "usr_bob",
        expiresAt: new Date(NOW + 1000).toISOString(),
      };
      await one.credentials.insertSession(expiring);
      expect(await two.credentials.getSession("sess_exp")).toEqual(expiring);
      expect(await two.credentials.findSessionUser(expiring.tokenHash, NOW + 999)).toBe("usr_bob");
      expect(await two.credentials.findSessionUser(expiring.tokenHash, NOW + 1000)).toBeNull();
      await expect(one.credentials.insertSession({ ...expiring, tokenHash: sha256Hex("other") })).rejects.toThrow();
      await expect(one.credentials.insertSession({ ...expiring, id: "sess_other" })).rejects.toThrow();

      // Webhook signing secret changed through putConnection, then through updateWebhookSettings.
      await one.webhooks.createWebhookConnection({
        connection: { id: "conn_hook", teamId: "team_ops", name: "Hook", createdAt: "2026-11-01T00:00:00.000Z" },
        endpoint: { endpointId: "ep_multi", signingSecret: "first-secret", retainRows: null },
        dataset: { id: "ds_hook", name: "Hook events" },
      });
      expect(await two.webhooks.getWebhookEndpoint("ep_multi")).toMatchObject({
        connectionId: "conn_hook",
        datasetId: "ds_hook",
        signingSecret: "first-secret",
      });
      const hook = (await one.catalog.getConnection("conn_hook"))!;
      expect(
        await one.catalog.putConnection({ ...hook, config: { ...hook.config, signingSecret: "second-secret" } }),
      ).toBe("updated");
      expect((await two.webhooks.getWebhookEndpoint("ep_multi"))?.signingSecret).toBe("second-secret");
      await one.webhooks.updateWebhookSettings("conn_hook", { signingSecret: null });
      expect((await two.webhooks.getWebhookEndpoint("ep_multi"))?.signingSecret).toBeNull();
      // Moving the endpoint id frees the old one; taking another connection's is refused on either instance.
      expect(await two.catalog.putConnection({ ...hook, config: { ...hook.config, endpointId: "ep_moved" } })).toBe(
        "updated",
      );
      expect(await one.webhooks.getWebhookEndpoint("ep_multi")).toBeNull();
      expect((await one.webhooks.getWebhookEndpoint("ep_moved"))?.connectionId).toBe("conn_hook");
      await expect(
        one.catalog.putConnection({ ...hook, id: "conn_thief", config: { endpointId: "ep_moved" } }),
      ).rejects.toThrow(/ep_moved/);
      expect(await two.catalog.getConnection("conn_thief")).toBeNull();
    });

    it("stores each audit event id once when two instances append overlapping batches at once", async () => {
      const schema = testSchema();
      const one = await store(schema);
      const two = await store(schema, false);
      const ids = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => `evt_b${from + i}`);
      const batch = (list: string[]) => list.map((id) => event(id, "2026-10-02T00:00:00Z"));
      for (let round = 0; round < 5; round++) {
        const [x, y] = await Promise.all([
          one.audit.appendAuditEvents(batch(ids(round * 100 + 1, round * 100 + 60)), NOW - 10_000),
          two.audit.appendAuditEvents(batch(ids(round * 100 + 41, round * 100 + 100)), NOW - 10_000),
        ]);
        expect(x + y).toBe(100);
      }
      // Already stored, or repeated within the call: stored once.
      expect(await one.audit.appendAuditEvents(batch(["evt_b1", "evt_fx_1", "evt_new", "evt_new"]), NOW - 10_000)).toBe(
        1,
      );
      await expect(
        two.audit.appendAuditEvent(event("evt_new", "2026-10-02T00:00:00Z"), NOW - 10_000),
      ).rejects.toThrow();
      const seen: string[] = [];
      let after: string | null = null;
      for (;;) {
        const page = await two.audit.readAuditEvents({
          teamIds: ["team_ops"],
          categories: ["audit"],
          after,
          since: null,
          storedBefore: NOW,
          limit: 97,
        });
        seen.push(...page.events.map((e) => e.event.id));
        if (page.events.length > 0) after = page.events.at(-1)!.position;
        if (!page.hasMore) break;
      }
      expect(new Set(seen).size).toBe(seen.length);
      expect([...seen].sort()).toEqual(["evt_fx_1", "evt_fx_2", "evt_fx_3", ...ids(1, 500), "evt_new"].sort());
      expect(seen.at(-1)).toBe("evt_new");
    });

    it("migrates a version-1 schema: sessions get ids, the first of a repeated audit event id keeps it", async () => {
      const schema = useSchema();
      const client = new pg.Client({ connectionString: POSTGRES_URL });
      await client.connect();
      const s = `"${schema}"`;
      const hash = sha256Hex("old-session");
      try {
        await client.query(`create schema ${s}`);
        await client.query(
          `create table ${s}.schema_migrations (version integer primary key, name text not null, applied_at timestamptz not null default now())`,
        );
        await client.query(MIGRATIONS[0]!.sql.replaceAll("{s}", s));
        await client.query(`insert into ${s}.schema_migrations (version, name) values (1, 'initial')`);
        await client.query(`insert into ${s}.sessions (token_hash, user_id) values ($1, 'usr_ada')`, [hash]);
        for (const [id, action] of [
          ["evt_dup", "first"],
          ["evt_one", "only"],
          ["evt_dup", "second"],
        ]) {
          await client.query(
            `insert into ${s}.audit_events (team_id, category, time_ms, stored_at, event) values ('team_ops', 'audit', 0, 0, $1)`,
            [JSON.stringify({ ...event(id!, "2026-10-01T00:00:00Z"), action })],
          );
        }
      } finally {
        await client.end();
      }
      const migrated = await store(schema, false);
      const applied = await migrated.db.query<{ version: number }>(
        `select version from ${migrated.db.t("schema_migrations")} order by version`,
      );
      expect(applied.map((r) => r.version)).toEqual(MIGRATIONS.map((m) => m.version));
      expect(await migrated.credentials.getSession(`sess_${hash.slice(0, 24)}`)).toEqual({
        id: `sess_${hash.slice(0, 24)}`,
        tokenHash: hash,
        userId: "usr_ada",
        expiresAt: null,
      });
      expect(await migrated.credentials.findSessionUser(hash, NOW)).toBe("usr_ada");
      const ids = await migrated.db.query<{ event_id: string | null; action: string }>(
        `select event_id, event ->> 'action' as action from ${migrated.db.t("audit_events")} order by xid, seq`,
      );
      expect(ids).toEqual([
        { event_id: "evt_dup", action: "first" },
        { event_id: "evt_one", action: "only" },
        { event_id: null, action: "second" },
      ]);
      expect(
        await migrated.audit.appendAuditEvents(
          [event("evt_dup", "2026-10-01T00:00:00Z"), event("evt_three", "2026-10-01T00:00:00Z")],
          NOW - 10_000,
        ),
      ).toBe(1);
      const feed = await migrated.audit.readAuditEvents({
        teamIds: ["team_ops"],
        categories: ["audit"],
        after: null,
        since: null,
        storedBefore: NOW,
        limit: 10,
      });
      expect(feed.events.map((e) => e.event.id)).toEqual(["evt_dup", "evt_one", "evt_dup", "evt_three"]);
    });
  });

  describe("streamed bulk rows", () => {
    const COLUMNS: Column[] = [
      { name: "g", type: "string" },
      { name: "i", type: "number" },
    ];
    /** `n` rows of generation `g`; with `hold`, the stream waits before row `hold.at` until `hold.until` settles. */
    async function* generation(
      g: string,
      n: number,
      hold?: { at: number; reached: () => void; until: Promise<void> },
      failAt?: number,
    ) {
      for (let i = 0; i < n; i++) {
        if (i === failAt) throw new Error(`upload broke off at row ${i}`);
        if (hold && i === hold.at) {
          hold.reached();
          await hold.until;
        }
        yield { g, i };
      }
    }
    const write = (s: PostgresStorage, mode: "replace" | "append", rows: AsyncIterable<Row>, datasetId = "ds_orders") =>
      s.rows.writeDatasetRows({ datasetId, mode, rows, columns: () => COLUMNS, updatedAt: "2026-11-01T12:00:00.000Z" });
    const gate = () => {
      let open!: () => void;
      const opened = new Promise<void>((resolve) => (open = resolve));
      return { opened, open };
    };
    const busy = (s: PostgresStorage) => s.db.pool.totalCount - s.db.pool.idleCount;

    /**
     * A page is whole when every row is of one generation, in order from the offset, and its totalRows is that
     * generation's.
     */
    function generationOf(
      page: { totalRows: number; rows: Row[] },
      offset: number,
      sizes: Record<string, number>,
    ): string {
      const g = String(page.rows[0]?.g);
      expect(page.totalRows).toBe(sizes[g]);
      expect(page.rows.map((r) => `${r.g}:${r.i}`)).toEqual(page.rows.map((_, k) => `${g}:${offset + k}`));
      return g;
    }

    it("replaces 200,000 rows from a stream while another instance pages: every page is the old rows or the new ones, whole", async () => {
      const schema = testSchema();
      const writer = await store(schema);
      const reader = await store(schema, false);
      const sizes = { old: 100_000, new: 200_000 };
      expect(await write(writer, "replace", generation("old", sizes.old))).toEqual({ rowCount: sizes.old });

      const reached = gate();
      const release = gate();
      const replacing = write(
        writer,
        "replace",
        generation("new", sizes.new, { at: 120_000, reached: reached.open, until: release.opened }),
      );
      await reached.opened;
      // Mid-write (120,000 new rows inserted, uncommitted): a long read opened now keeps its snapshot across the
      // commit.
      const long = (
        await reader.rows.readDatasetRows("ds_orders", { offset: 0, limit: null, columns: null, filters: null })
      ).rows[Symbol.asyncIterator]();
      const first = await long.next();
      expect(first.value).toEqual({ g: "old", i: 0 });
      const seen: Record<string, number> = { old: 0, new: 0 };
      const page = async () => {
        const offset = Math.floor(Math.random() * 99_900);
        const read = await reader.rows.readDatasetRows("ds_orders", {
          offset,
          limit: 100,
          columns: null,
          filters: null,
        });
        const rows = await collect(read.rows);
        expect(rows).toHaveLength(100);
        const g = generationOf({ totalRows: read.totalRows, rows }, offset, sizes);
        seen[g]!++;
        expect([sizes.old, sizes.new]).toContain((await reader.catalog.getDataset("ds_orders"))!.rowCount);
      };
      for (let n = 0; n < 20; n++) await page();
      expect(seen).toEqual({ old: 20, new: 0 });
      release.open();
      let done = false;
      const finished = replacing.then((result) => {
        done = true;
        return result;
      });
      while (!done) await page();
      expect(await finished).toEqual({ rowCount: sizes.new });
      await page();
      expect(seen.new).toBeGreaterThan(0);

      // The long read still sees the old rows, all of them, in order.
      let count = 1;
      for (let next = await long.next(); !next.done; next = await long.next()) {
        if (next.value.g !== "old" || next.value.i !== count)
          throw new Error(`row ${count} of the long read is ${JSON.stringify(next.value)}`);
        count++;
      }
      expect(count).toBe(sizes.old);
      expect(await reader.catalog.getDataset("ds_orders")).toMatchObject({
        rowCount: sizes.new,
        columns: COLUMNS,
        updatedAt: "2026-11-01T12:00:00.000Z",
      });
      const tail = await reader.rows.readDatasetRows("ds_orders", {
        offset: sizes.new - 2,
        limit: 5,
        columns: ["i"],
        filters: null,
      });
      expect({ totalRows: tail.totalRows, rows: (await collect(tail.rows)).map((r) => ({ ...r })) }).toEqual({
        totalRows: sizes.new,
        rows: [{ i: sizes.new - 2 }, { i: sizes.new - 1 }],
      });
      expect([busy(writer), busy(reader)]).toEqual([0, 0]);
    }, 120_000);

    it("leaves the old rows when the stream throws, and releases the dataset for the next write", async () => {
      const s = await store();
      await write(s, "replace", generation("old", 3000));
      const version = async () =>
        (
          await s.db.query<{ v: string }>(`select rows_version as v from ${s.db.t("datasets")} where id = 'ds_orders'`)
        )[0]!.v;
      const before = await version();
      for (const mode of ["replace", "append"] as const) {
        await expect(write(s, mode, generation("new", 50_000, undefined, 42_001))).rejects.toThrow(
          "upload broke off at row 42001",
        );
        expect(busy(s)).toBe(0);
        const page = await s.rows.readDatasetRows("ds_orders", {
          offset: 0,
          limit: null,
          columns: null,
          filters: null,
        });
        const rows = await collect(page.rows);
        expect(page.totalRows).toBe(3000);
        expect(rows.every((r, k) => r.g === "old" && r.i === k)).toBe(true);
        expect(rows).toHaveLength(3000);
        expect((await s.catalog.getDataset("ds_orders"))!.rowCount).toBe(3000);
        expect(await version()).toBe(before);
      }
      // The lock went with the rollback: the next write goes through, positions still contiguous.
      expect(await write(s, "append", generation("more", 2))).toEqual({ rowCount: 3002 });
      const tail = await s.rows.readDatasetRows("ds_orders", { offset: 2999, limit: 10, columns: null, filters: null });
      expect(await collect(tail.rows)).toEqual([
        { g: "old", i: 2999 },
        { g: "more", i: 0 },
        { g: "more", i: 1 },
      ]);
    });

    it("serves a long page the rows its count saw when they are rewritten between the count and the first read", async () => {
      const s = await store();
      await write(s, "replace", generation("old", 1500));
      const page = await s.rows.readDatasetRows("ds_orders", { offset: 0, limit: null, columns: null, filters: null });
      expect(page.totalRows).toBe(1500);
      await write(s, "replace", generation("new", 2));
      const rows = await collect(page.rows);
      expect(rows).toHaveLength(1500);
      expect(new Set(rows.map((r) => String(r.g)))).toEqual(new Set(["old"]));
      expect(busy(s)).toBe(0);
      const after = await s.rows.readDatasetRows("ds_orders", { offset: 0, limit: null, columns: null, filters: null });
      expect([after.totalRows, (await collect(after.rows)).map((r) => r.g)]).toEqual([2, ["new", "new"]]);
    });

    it("gives back the connection of a long page whose rows are never read when the store closes", async () => {
      const s = await store();
      await write(s, "replace", generation("old", 1500));
      const page = await s.rows.readDatasetRows("ds_orders", { offset: 0, limit: null, columns: null, filters: null });
      expect(page.totalRows).toBe(1500);
      expect(busy(s)).toBe(1);
      await s.close();
      expect(busy(s)).toBe(0);
      await expect(collect(page.rows)).rejects.toThrow(/given up unread; read the page again/);
    });

    it("stores webhook deliveries at once while their dataset is bulk-written: a replace takes them away as it publishes, an append follows them", async () => {
      const s = await store();
      await s.webhooks.createWebhookConnection({
        connection: { id: "conn_hook", teamId: "team_ops", name: "Hook", createdAt: "2026-11-01T00:00:00.000Z" },
        endpoint: { endpointId: "ep_bulk", signingSecret: null, retainRows: null },
        dataset: { id: "ds_hook", name: "Hook events" },
      });
      const deliver = (n: number) =>
        s.webhooks.ingestWebhookRow({
          datasetId: "ds_hook",
          dedupKey: `d${n}`,
          row: { _id: `row_${n}`, g: "hook", i: n },
          columns: [{ name: "_id", type: "string" }, ...COLUMNS],
          retainRows: 100_000,
          receivedAt: "2026-11-01T13:00:00.000Z",
        });
      const tail = async (offset: number) =>
        (
          await collect(
            (await s.rows.readDatasetRows("ds_hook", { offset, limit: 10, columns: ["g", "i"], filters: null })).rows,
          )
        ).map((r) => `${r.g}:${r.i}`);
      await deliver(1);

      // A replace staging 7,000 rows (6,000 staged so far): a delivery is stored at once, in the old rows.
      let reached = gate();
      let release = gate();
      const replacing = write(
        s,
        "replace",
        generation("bulk", 7000, { at: 6000, reached: reached.open, until: release.opened }),
        "ds_hook",
      );
      await reached.opened;
      expect(await deliver(2)).toEqual({ id: "row_2", duplicate: false });
      expect((await s.catalog.getDataset("ds_hook"))!.rowCount).toBe(2);
      expect(await tail(0)).toEqual(["hook:1", "hook:2"]);
      release.open();
      expect(await replacing).toEqual({ rowCount: 7000 });
      // Replaced: both deliveries and their dedup keys are gone.
      expect(await deliver(2)).toEqual({ id: "row_2", duplicate: false });
      expect(await deliver(2)).toEqual({ id: "row_2", duplicate: true });
      expect(await tail(6998)).toEqual(["bulk:6998", "bulk:6999", "hook:2"]);

      // An append staging right after the window: deliveries meanwhile move its rows out of their way, and it lands
      // after them.
      reached = gate();
      release = gate();
      const appending = write(
        s,
        "append",
        generation("more", 5000, { at: 4500, reached: reached.open, until: release.opened }),
        "ds_hook",
      );
      await reached.opened;
      expect(await Promise.all([deliver(3), deliver(4)])).toEqual([
        { id: "row_3", duplicate: false },
        { id: "row_4", duplicate: false },
      ]);
      expect(await deliver(5)).toEqual({ id: "row_5", duplicate: false });
      expect(await tail(6999)).toEqual(["bulk:6999", "hook:2", "hook:3", "hook:4", "hook:5"]);
      release.open();
      expect(await appending).toEqual({ rowCount: 12_004 });
      expect(await tail(7002)).toEqual([
        "hook:4",
        "hook:5",
        "more:0",
        "more:1",
        "more:2",
        "more:3",
        "more:4",
        "more:5",
        "more:6",
        "more:7",
      ]);
      expect(await tail(11_999)).toEqual(["more:4995", "more:4996", "more:4997", "more:4998", "more:4999"]);
      expect(await s.catalog.getDataset("ds_hook")).toMatchObject({
        rowCount: 12_004,
        updatedAt: "2026-11-01T12:00:00.000Z",
      });
      expect(await deliver(3)).toEqual({ id: "row_3", duplicate: true });
      const stagings = await s.db.query(`select * from ${s.db.t("dataset_stagings")}`);
      expect(stagings).toEqual([]);
    });

    it("keeps the audit feed moving while a bulk write is open: an event appended meanwhile is read before the write finishes", async () => {
      const s = await store();
      await write(s, "replace", generation("old", 10));
      const reached = gate();
      const release = gate();
      const replacing = write(
        s,
        "replace",
        generation("new", 9000, { at: 8000, reached: reached.open, until: release.opened }),
      );
      await reached.opened;
      await s.audit.appendAuditEvent(event("evt_during_bulk", "2026-11-01T11:59:00Z"), NOW - 1000);
      const feed = await s.audit.readAuditEvents({
        teamIds: ["team_ops"],
        categories: ["audit"],
        after: null,
        since: null,
        storedBefore: NOW,
        limit: 10,
      });
      expect(feed.events.map((e) => e.event.id)).toEqual(["evt_fx_1", "evt_fx_2", "evt_fx_3", "evt_during_bulk"]);
      // The write has not finished: its rows are not visible yet.
      expect((await s.catalog.getDataset("ds_orders"))!.rowCount).toBe(10);
      release.open();
      expect(await replacing).toEqual({ rowCount: 9000 });
    });
  });
});
