import pg from "pg";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import type { AuditEvent } from "../src/domain/model.js";
import { parseFixture } from "../src/fixture/load.js";
import { createPrometheusMetrics } from "../src/metrics/prometheus.js";
import { appendAudit } from "../src/postgres/audit.js";
import { feedPositions } from "../src/postgres/feed-horizon.js";
import { quoteIdent } from "../src/sql/literals.js";
import { createPostgresStorage, type PostgresStorage } from "../src/postgres/index.js";
import { MIGRATIONS } from "../src/postgres/migrations.js";
import type { StoredAuditEvent } from "../src/ports/storage/audit.js";
import { createDataApi } from "../src/server/api.js";
import { auditFixture, event } from "../src/testing/conformance/audit.js";
import { TOKENS } from "../src/testing/conformance/fixture.js";
import { dropSchemas, POSTGRES_URL, postgresSkipReason, testSchema } from "./support/services.js";

/**
 * Issue 40: the audit feed's horizon on PostgreSQL is held back only by
 * Dataport's own appends to that log still open, never by other work on the
 * server: a write transaction in another database, on another table of the
 * same database, or Dataport's appends to another schema's log. An append
 * still open holds it back (and says how long) until it commits or its
 * backend dies.
 */
const skip = await postgresSkipReason();
const OTHER_DATABASE = `dp_test_${process.pid}_other`;
const schemas: string[] = [];
const stores: PostgresStorage[] = [];
const clients: pg.Client[] = [];
let otherDatabase = false;

afterEach(async () => {
  await Promise.all(clients.splice(0).map((c) => c.end().catch(() => {})));
  await Promise.all(stores.splice(0).map((s) => s.close()));
});
afterAll(async () => {
  await dropSchemas(schemas);
  if (otherDatabase) await admin((c) => c.query(`drop database if exists ${OTHER_DATABASE}`));
});

async function admin<T>(work: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: POSTGRES_URL });
  await client.connect();
  try {
    return await work(client);
  } finally {
    await client.end();
  }
}

function newSchema(): string {
  const schema = testSchema("dp_horizon");
  schemas.push(schema);
  return schema;
}

async function store(schema = newSchema()): Promise<PostgresStorage> {
  const made = await createPostgresStorage({ connectionString: POSTGRES_URL, schema, maxConnections: 4 });
  stores.push(made);
  return made;
}

/** A connection of the test's own, in a transaction that ran `statements` and stays open. */
async function openTransaction(statements: string[], url = POSTGRES_URL): Promise<pg.Client & { pid: number }> {
  const client = new pg.Client({
    connectionString: url,
    application_name: `dp_horizon_${process.pid}`,
  }) as pg.Client & { pid: number };
  client.on("error", () => {});
  clients.push(client);
  await client.connect();
  client.pid = Number((await client.query<{ pid: number }>("select pg_backend_pid() as pid")).rows[0]!.pid);
  await client.query("begin");
  for (const sql of statements) await client.query(sql);
  return client;
}

/** An append of Dataport's own (the log's insert, its column default registering it), left open. */
function openAppend(schema: string, id: string, storedAt: number) {
  const body = JSON.stringify(event(id, "team_ops", "audit", "2026-11-01T11:00:00Z")).replaceAll("'", "''");
  return openTransaction([
    `insert into ${quoteIdent(schema)}.audit_events (team_id, category, time_ms, stored_at, event, event_id)
     values ('team_ops', 'audit', 0, ${storedAt}, '${body}', '${id}')`,
  ]);
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const ids = (events: StoredAuditEvent[]) => events.map((e) => e.event.id);

function read(s: PostgresStorage, after: string | null = null, limit = 100) {
  return s.audit.readAuditEvents({
    teamIds: ["team_ops", "team_mkt"],
    categories: ["audit"],
    after,
    since: null,
    storedBefore: Date.now(),
    limit,
  });
}

describe.skipIf(!!skip)("the PostgreSQL audit horizon", () => {
  it("is not held back by a write transaction open in another database of the server", async () => {
    await admin(async (c) => {
      const exists = await c.query("select 1 from pg_database where datname = $1", [OTHER_DATABASE]);
      if (exists.rowCount === 0) await c.query(`create database ${OTHER_DATABASE}`);
    });
    otherDatabase = true;
    const elsewhere = await openTransaction(
      ["create table busy (n int)", "insert into busy values (1)"],
      POSTGRES_URL.replace(/\/[^/]*$/, `/${OTHER_DATABASE}`),
    );
    expect((await elsewhere.query("select pg_current_xact_id() is not null as writing")).rows[0].writing).toBe(true);
    const s = await store();
    await s.audit.appendAuditEvent(event("evt_1", "team_ops", "audit", "2026-11-01T11:00:00Z"), Date.now() - 10_000);
    const page = await read(s);
    expect(ids(page.events)).toEqual(["evt_1"]);
    expect(page.heldBackMs ?? 0).toBe(0);
    expect(await s.audit.auditHorizon!()).toEqual({ heldBackMs: 0 });
  });

  it("is not held back by a write transaction open on an unrelated table of the same database", async () => {
    const scratch = newSchema();
    const unrelated = await openTransaction([
      `create schema ${quoteIdent(scratch)}`,
      `create table ${quoteIdent(scratch)}.busy (n int)`,
      `insert into ${quoteIdent(scratch)}.busy values (1)`,
    ]);
    expect((await unrelated.query("select pg_current_xact_id() is not null as writing")).rows[0].writing).toBe(true);
    const s = await store();
    await s.audit.appendAuditEvent(event("evt_1", "team_ops", "audit", "2026-11-01T11:00:00Z"), Date.now() - 10_000);
    expect(ids((await read(s)).events)).toEqual(["evt_1"]);
  });

  it("is not held back by Dataport's append still open to another schema's log", async () => {
    const elsewhere = newSchema();
    await store(elsewhere);
    await openAppend(elsewhere, "evt_elsewhere", Date.now() - 10_000);
    const s = await store();
    await s.audit.appendAuditEvent(event("evt_1", "team_ops", "audit", "2026-11-01T11:00:00Z"), Date.now() - 10_000);
    const page = await read(s);
    expect(ids(page.events)).toEqual(["evt_1"]);
    expect(page.heldBackMs ?? 0).toBe(0);
  });

  it("is held back by an append of its own still open, says how long, and is released when that backend dies", async () => {
    const schema = newSchema();
    const s = await store(schema);
    await s.audit.appendAuditEvent(
      event("evt_before", "team_ops", "audit", "2026-11-01T10:00:00Z"),
      Date.now() - 10_000,
    );
    const open = await openAppend(schema, "evt_open", Date.now() - 10_000);
    await s.audit.appendAuditEvent(
      event("evt_after", "team_ops", "audit", "2026-11-01T11:00:00Z"),
      Date.now() - 10_000,
    );
    await sleep(1100);
    const held = await read(s);
    // evt_after is committed, but positioned after the open append: a cursor past it could skip it for good.
    expect(ids(held.events)).toEqual(["evt_before"]);
    expect(held.heldBackMs).toBeGreaterThanOrEqual(1000);
    expect((await s.audit.auditHorizon!()).heldBackMs).toBeGreaterThanOrEqual(1000);
    // A writer that dies (kill -9, a lost connection) takes its registration with it.
    await admin((c) => c.query("select pg_terminate_backend($1)", [open.pid]));
    for (let i = 0; i < 100; i++) {
      const alive = await admin((c) => c.query("select 1 from pg_stat_activity where pid = $1", [open.pid]));
      if (alive.rowCount === 0) break;
      await sleep(50);
    }
    const released = await read(s, held.events.at(-1)!.position);
    expect(ids(released.events)).toEqual(["evt_after"]);
    expect(released.heldBackMs ?? 0).toBe(0);
    expect(await s.audit.auditHorizon!()).toEqual({ heldBackMs: 0 });
  });

  it("delivers an append that commits after a later one, before it and exactly once", async () => {
    const schema = newSchema();
    const s = await store(schema);
    const open = await openAppend(schema, "evt_early", Date.now() - 10_000);
    await s.audit.appendAuditEvent(event("evt_late", "team_ops", "audit", "2026-11-01T11:00:00Z"), Date.now() - 10_000);
    expect(ids((await read(s)).events)).toEqual([]);
    await open.query("commit");
    const page = await read(s);
    expect(ids(page.events)).toEqual(["evt_early", "evt_late"]);
    expect(ids((await read(s, page.events.at(-1)!.position)).events)).toEqual([]);
  });

  it("two instances appending at once, some in transactions that commit late: every event once, each writer's in its order", async () => {
    const schema = newSchema();
    const [a, b] = [await store(schema), await store(schema)];
    const perWriter = 30;
    const writers = [a, a, b, b].map((s, w) =>
      (async () => {
        for (let i = 0; i < perWriter; i++) {
          const e = event(`evt_w${w}_${String(i).padStart(2, "0")}`, "team_ops", "audit", "2026-11-01T11:00:00Z");
          if (i % 3 === 0) await s.audit.appendAuditEvent(e, Date.now() - 10_000);
          else if (i % 3 === 1) await s.audit.appendAuditEvents([e], Date.now() - 10_000);
          else {
            // An append that stays open a while after drawing its position: later positions commit first.
            await s.db.transaction(async (client) => {
              await appendAudit(client, s.db.t, e, Date.now() - 10_000);
              await sleep(Math.floor(Math.random() * 20));
            });
          }
        }
      })(),
    );
    let writing = true;
    const done = Promise.all(writers).finally(() => {
      writing = false;
    });
    const delivered: StoredAuditEvent[] = [];
    let after: string | null = null;
    const poll = async (reader: PostgresStorage) => {
      const page = await read(reader, after, 7);
      delivered.push(...page.events);
      if (page.events.length > 0) after = page.events.at(-1)!.position;
      return page;
    };
    for (let turn = 0; writing; turn++) await poll(turn % 2 ? b : a);
    await done;
    for (let turn = 0; turn < 1000; turn++)
      if (!(await poll(turn % 2 ? b : a)).hasMore && delivered.length >= 4 * perWriter) break;
    const got = ids(delivered);
    expect(got).toHaveLength(4 * perWriter);
    expect(new Set(got).size).toBe(4 * perWriter);
    for (let w = 0; w < 4; w++) {
      const mine = got.filter((id) => id.startsWith(`evt_w${w}_`));
      expect(mine).toEqual([...mine].sort());
    }
    const positions = delivered.map((e) => BigInt(e.position));
    for (let i = 1; i < positions.length; i++) expect(positions[i]! > positions[i - 1]!).toBe(true);
  });

  it("gives each part of a feed its own horizon (one sequence, a horizon per dataset, as the change feed will)", async () => {
    const schema = newSchema();
    const s = await store(schema);
    await s.db.query(`create sequence ${s.db.t("parts_feed")}`);
    const feed = feedPositions(s.db, "parts_feed");
    // A writer of part ds_a registers, draws twice, and stays open.
    const open = await openTransaction([]);
    await open.query(`select ${feed.registerSql("$1")}`, ["ds_a"]);
    const drawn = (await open.query(`select ${feed.drawSql()} as a, ${feed.drawSql()} as b`)).rows[0];
    // A writer of part ds_b commits a position after them.
    const [b] = await s.db.query<{ p: string }>(`select ${feed.nextPositionSql("$1")}::text as p`, ["ds_b"]);
    expect(BigInt(b!.p)).toBeGreaterThan(BigInt(drawn.b));
    const ofB = await feed.horizon("ds_b");
    expect({ held: ofB.held, past: BigInt(ofB.below) > BigInt(b!.p) }).toEqual({ held: false, past: true });
    const ofA = await feed.horizon("ds_a");
    expect({ held: ofA.held, below: BigInt(ofA.below) <= BigInt(drawn.a) }).toEqual({ held: true, below: true });
    // The whole sequence is a feed of its own, which no part's writer holds back.
    expect((await feed.horizon()).held).toBe(false);
    await open.query("commit");
    const after = await feed.horizon("ds_a");
    expect({ held: after.held, past: BigInt(after.below) > BigInt(b!.p) }).toEqual({ held: false, past: true });
  });

  it("continues a cursor made before migration 9 (<xid>.<seq>) after its event", async () => {
    const schema = newSchema();
    const s = quoteIdent(schema);
    let cursor = "";
    await admin(async (c) => {
      await c.query(`create schema ${s}`);
      await c.query(
        `create table ${s}.schema_migrations (version integer primary key, name text not null, applied_at timestamptz not null default now())`,
      );
      for (const migration of MIGRATIONS.filter((m) => m.version <= 8)) {
        await c.query(migration.sql.replaceAll("{s}", s));
        await c.query(`insert into ${s}.schema_migrations (version, name) values ($1, $2)`, [
          migration.version,
          migration.name,
        ]);
      }
      for (const id of ["evt_1", "evt_2", "evt_3"]) {
        const body = JSON.stringify(event(id, "team_ops", "audit", "2026-10-01T09:00:00Z"));
        await c.query(
          `insert into ${s}.audit_events (team_id, category, time_ms, stored_at, event, event_id) values ('team_ops', 'audit', 0, 1, $1, $2)`,
          [body, id],
        );
      }
      const row = (await c.query(`select xid::text as xid, seq from ${s}.audit_events where event_id = 'evt_2'`))
        .rows[0];
      cursor = `${row.xid}.${row.seq}`;
    });
    const upgraded = await store(schema);
    expect(upgraded.audit.isAuditPosition(cursor)).toBe(true);
    expect(ids((await read(upgraded, cursor)).events)).toEqual(["evt_3"]);
    const all = await read(upgraded);
    expect(ids(all.events)).toEqual(["evt_1", "evt_2", "evt_3"]);
    expect(all.events.map((e) => e.position)).toEqual(["1", "2", "3"]);
    await upgraded.audit.appendAuditEvent(
      event("evt_4", "team_ops", "audit", "2026-11-01T11:00:00Z"),
      Date.now() - 10_000,
    );
    expect((await read(upgraded, "3")).events.map((e) => [e.event.id, e.position])).toEqual([["evt_4", "4"]]);
    expect(upgraded.audit.isAuditPosition("0.0")).toBe(false);
  });

  it("says how long an open append holds the feed: lagSeconds, readiness details (stalled past auditStallSeconds) and metrics", async () => {
    const schema = newSchema();
    const s = await store(schema);
    await s.seed(parseFixture(auditFixture()));
    const metrics = createPrometheusMetrics();
    const api = createDataApi({ storage: s, metrics, auditLagSeconds: 0, auditStallSeconds: 1 });
    const get = async (path: string, token?: string) => {
      const res = await api.fetch(
        new Request(`http://dataport.test${path}`, { headers: token ? { authorization: `Bearer ${token}` } : {} }),
      );
      return { status: res.status, text: await res.text() };
    };
    expect(JSON.parse((await get("/api/health/ready")).text)).toEqual({
      status: "ok",
      checks: { storage: "ok", rateLimiter: "ok", cache: "ok" },
    });
    const open = await openAppend(schema, "evt_open", Date.now());
    await sleep(2100);
    const feed = JSON.parse((await get("/api/v1/audit?format=raw", TOKENS.sync)).text);
    expect(feed.events.map((e: AuditEvent) => e.id)).toEqual(["evt_f1"]);
    expect(feed.lagSeconds).toBeGreaterThanOrEqual(2);
    const ready = await get("/api/health/ready");
    expect(ready.status).toBe(200);
    const body = JSON.parse(ready.text);
    expect(body.details.auditFeed.stalled).toBe(true);
    expect(body.details.auditFeed.heldBackSeconds).toBeGreaterThanOrEqual(2);
    const scraped = (await get("/api/metrics")).text;
    const gauge = /^dataport_audit_feed_held_back_seconds (\S+)$/m.exec(scraped);
    expect(Number(gauge?.[1])).toBeGreaterThanOrEqual(2);
    await open.query("rollback");
    expect(JSON.parse((await get("/api/health/ready")).text)).toEqual({
      status: "ok",
      checks: { storage: "ok", rateLimiter: "ok", cache: "ok" },
    });
    expect(JSON.parse((await get("/api/v1/audit?format=raw", TOKENS.sync)).text).lagSeconds).toBe(0);
    expect(/^dataport_audit_feed_held_back_seconds 0$/m.test((await get("/api/metrics")).text)).toBe(true);
  });
});
