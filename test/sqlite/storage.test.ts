import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { parseFixture } from "../../src/fixture/load.js";
import type { AuditEvent, Row } from "../../src/domain/model.js";
import Database from "better-sqlite3";
import { rowKey } from "../../src/sqlite/db.js";
import { createSqliteStorage, migrate, MIGRATIONS, type SqliteStorage } from "../../src/sqlite/index.js";
import { conformanceFixture } from "../../src/testing/conformance/fixture.js";

const dir = mkdtempSync(join(tmpdir(), "dataport-sqlite-"));
let n = 0;
const open: SqliteStorage[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((s) => s.close()));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function file(): string {
  return join(dir, `db-${++n}.sqlite`);
}

function store(path = file()): SqliteStorage {
  const s = createSqliteStorage({ path });
  open.push(s);
  return s;
}

async function seeded(path = file()): Promise<SqliteStorage> {
  const s = store(path);
  await s.seed(parseFixture(withWebhook()));
  return s;
}

function withWebhook() {
  const f = conformanceFixture() as ReturnType<typeof conformanceFixture> & { connections: unknown[] };
  f.connections.push({
    id: "conn_hook",
    teamId: "team_ops",
    name: "Shop events",
    type: "webhook",
    config: { endpointId: "ep_shop", signingSecret: null, retainRows: 3 },
    createdAt: "2026-09-01T00:00:00Z",
  });
  return f;
}

async function collect(rows: AsyncIterable<Row>): Promise<Row[]> {
  const out: Row[] = [];
  for await (const row of rows) out.push({ ...row });
  return out;
}

const ACTOR = { type: "api-key", id: "key_sync", name: "Warehouse sync" } as const;

function auditEvent(id: string, time = "2026-11-01T00:00:00.000Z", teamId = "team_ops"): AuditEvent {
  return {
    id,
    teamId,
    time,
    category: "audit",
    action: "test",
    actor: null,
    target: null,
    outcome: "success",
    ip: null,
    userAgent: null,
  };
}

function hook(i: number, dedupKey: string | null = null) {
  return {
    datasetId: "ds_conn_hook",
    dedupKey,
    row: { _id: `row_${i}`, n: i, _receivedAt: "2026-11-01T00:00:00.000Z" },
    columns: [
      { name: "_id", type: "string" as const },
      { name: "n", type: "number" as const },
    ],
    retainRows: 3,
    receivedAt: `2026-11-01T00:00:0${i % 10}.000Z`,
  };
}

describe("sqlite: schema and durability", () => {
  it("refuses to open without a path or with a bad busy timeout, instead of a private database in memory", () => {
    const open = (options: unknown) => () => createSqliteStorage(options as Parameters<typeof createSqliteStorage>[0]);
    expect(open(undefined)).toThrow(
      'createSqliteStorage needs { path }: a database file, or ":memory:" (got no options)',
    );
    expect(open({})).toThrow('createSqliteStorage needs { path }: a database file, or ":memory:" (got path undefined)');
    expect(open({ path: 42 })).toThrow("(got path number)");
    for (const busyTimeoutMs of [-1, Number.NaN, Infinity, "5000"]) {
      expect(open({ path: ":memory:", busyTimeoutMs })).toThrow(
        "createSqliteStorage: busyTimeoutMs must be a finite number of milliseconds, 0 or more",
      );
    }
  });

  it("applies every migration once and keeps data across a reopen", async () => {
    const path = file();
    const first = await seeded(path);
    const versions = first.db.prepare("SELECT version FROM schema_migrations ORDER BY version").all();
    expect(versions).toEqual(MIGRATIONS.map((m) => ({ version: m.version })));
    expect(first.db.pragma("journal_mode", { simple: true })).toBe("wal");
    expect(first.db.pragma("synchronous", { simple: true })).toBe(1);
    await first.webhooks.ingestWebhookRow(hook(1));
    await first.close();

    const again = store(path);
    expect(again.db.prepare("SELECT count(*) AS n FROM schema_migrations").get()).toEqual({ n: MIGRATIONS.length });
    expect(await again.seed(parseFixture(conformanceFixture()))).toBe("kept");
    const page = await again.rows.readDatasetRows("ds_conn_hook", {
      offset: 0,
      limit: null,
      columns: null,
      filters: null,
    });
    expect(page.totalRows).toBe(1);
    expect(await collect(page.rows)).toEqual([{ _id: "row_1", n: 1, _receivedAt: "2026-11-01T00:00:00.000Z" }]);
  });

  it("reads a page without filters by position range, never by OFFSET", async () => {
    const s = await seeded();
    const plan = s.db
      .prepare(
        "EXPLAIN QUERY PLAN SELECT position, data FROM dataset_rows WHERE row_key > ? AND row_key < ? ORDER BY row_key LIMIT 1000 OFFSET 0",
      )
      .all(rowKey(1, 900_000), rowKey(1, 1_000_000)) as { detail: string }[];
    expect(plan.map((p) => p.detail).join(" ")).toBe(
      "SEARCH dataset_rows USING INTEGER PRIMARY KEY (rowid>? AND rowid<?)",
    );
  });

  it("moves rows stored under the first schema to one-integer row keys (migration 2), in order, dedup keys kept", async () => {
    const path = file();
    const old = new Database(path);
    migrate(
      old,
      MIGRATIONS.filter((m) => m.version === 1),
    );
    old
      .prepare(
        "INSERT INTO datasets (seq, id, team_id, name, type, columns, updated_at, first_position, next_position) VALUES (3, 'ds_old', 'team_ops', 'Old', 'upload', '[]', 'x', 1, 4)",
      )
      .run();
    const insert = old.prepare("INSERT INTO dataset_rows (dataset_seq, position, dedup_key, data) VALUES (?, ?, ?, ?)");
    for (const position of [3, 1, 2])
      insert.run(3, position, position === 2 ? "h:two" : null, JSON.stringify({ p: position }));
    insert.run(4, 0, null, JSON.stringify({ other: true }));
    old.close();

    const s = store(path);
    expect(
      s.db.prepare("SELECT row_key, dataset_seq, position, dedup_key FROM dataset_rows ORDER BY row_key").all(),
    ).toEqual([
      { row_key: 3 * 2 ** 43 + 1, dataset_seq: 3, position: 1, dedup_key: null },
      { row_key: 3 * 2 ** 43 + 2, dataset_seq: 3, position: 2, dedup_key: "h:two" },
      { row_key: 3 * 2 ** 43 + 3, dataset_seq: 3, position: 3, dedup_key: null },
      { row_key: 4 * 2 ** 43, dataset_seq: 4, position: 0, dedup_key: null },
    ]);
    const page = await s.rows.readDatasetRows("ds_old", { offset: 1, limit: 10, columns: null, filters: null });
    expect(page.totalRows).toBe(3);
    expect(await collect(page.rows)).toEqual([{ p: 2 }, { p: 3 }]);
  });
});

describe("sqlite: dataset rows", () => {
  it("pages deep offsets by position, filters with JSON types and streams large reads", async () => {
    const s = await seeded();
    const rows = Array.from({ length: 2500 }, (_, i) => ({
      i,
      even: i % 2 === 0,
      tag: i % 3 === 0 ? "x" : null,
      obj: { a: i % 5, b: 1 },
    }));
    await s.rows.replaceDatasetRows("ds_stores", { rows, columns: [], refreshedAt: "2026-11-01T00:00:00.000Z" });
    const deep = await s.rows.readDatasetRows("ds_stores", { offset: 2400, limit: 3, columns: ["i"], filters: null });
    expect(deep.totalRows).toBe(2500);
    expect(await collect(deep.rows)).toEqual([{ i: 2400 }, { i: 2401 }, { i: 2402 }]);

    const filtered = await s.rows.readDatasetRows("ds_stores", {
      offset: 2,
      limit: 2,
      columns: ["i"],
      filters: { even: true, tag: "x" },
    });
    expect(filtered.totalRows).toBe(417); // i ≡ 0 (mod 6) below 2500
    expect(await collect(filtered.rows)).toEqual([{ i: 12 }, { i: 18 }]);

    const nulls = await s.rows.readDatasetRows("ds_stores", {
      offset: 0,
      limit: 2,
      columns: ["i"],
      filters: { tag: null, missing: null },
    });
    expect(nulls.totalRows).toBe(2500 - 834);
    expect(await collect(nulls.rows)).toEqual([{ i: 1 }, { i: 2 }]);

    const objects = await s.rows.readDatasetRows("ds_stores", {
      offset: 1,
      limit: 2,
      columns: ["i"],
      filters: { obj: { b: 1, a: 4 } },
    });
    expect(objects.totalRows).toBe(500);
    expect(await collect(objects.rows)).toEqual([{ i: 9 }, { i: 14 }]);

    const all = await s.rows.readDatasetRows("ds_stores", { offset: 10, limit: null, columns: ["i"], filters: null });
    const streamed = await collect(all.rows);
    expect(streamed).toHaveLength(2490);
    expect(streamed[0]).toEqual({ i: 10 });
    expect(streamed.at(-1)).toEqual({ i: 2499 });
  });

  it("keeps __proto__ and constructor columns as plain data on every read path", async () => {
    const s = await seeded();
    const hostile = JSON.parse('{"__proto__": {"polluted": 1}, "constructor": "c", "a": 1}') as Row;
    await s.rows.replaceDatasetRows("ds_stores", {
      rows: Array.from({ length: 1500 }, () => hostile),
      columns: [],
      refreshedAt: "2026-11-01T00:00:00.000Z",
    });
    const small = await collect(
      (await s.rows.readDatasetRows("ds_stores", { offset: 0, limit: 1, columns: null, filters: null })).rows,
    );
    const streamed = await collect(
      (await s.rows.readDatasetRows("ds_stores", { offset: 1499, limit: null, columns: null, filters: null })).rows,
    );
    const picked = await collect(
      (
        await s.rows.readDatasetRows("ds_stores", {
          offset: 0,
          limit: 1,
          columns: ["__proto__"],
          filters: { constructor: "c" },
        })
      ).rows,
    );
    for (const row of [...small, ...streamed, ...picked]) {
      expect(Object.hasOwn(row, "__proto__")).toBe(true);
      expect(Object.getOwnPropertyDescriptor(row, "__proto__")?.value).toEqual({ polluted: 1 });
    }
    expect(small).toHaveLength(1);
    expect(streamed).toHaveLength(1);
    expect(picked).toHaveLength(1);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });

  it("filters on column names a JSON path cannot quote", async () => {
    const s = await seeded();
    const odd = ['say "hi"', "back\\slash", "lone\ud800", "", "a.b"];
    const rows = [0, 1, 2].map((i) => Object.fromEntries(odd.map((k) => [k, i % 2 === 0 ? `v${k}` : null])));
    await s.rows.replaceDatasetRows("ds_stores", { rows, columns: [], refreshedAt: "2026-11-01T00:00:00.000Z" });
    for (const key of odd) {
      const page = await s.rows.readDatasetRows("ds_stores", {
        offset: 0,
        limit: 10,
        columns: [key],
        filters: { [key]: `v${key}` },
      });
      expect(page.totalRows).toBe(2);
      expect(await collect(page.rows)).toEqual([{ [key]: `v${key}` }, { [key]: `v${key}` }]);
    }
  });

  it("hands rows over as their JSON text when no columns are picked, identical to serialising the rows", async () => {
    const s = await seeded();
    const rows = Array.from(
      { length: 1500 },
      (_, i) => JSON.parse(`{"i":${i},"__proto__":{"x":1},"s":"é\\u0000","n":${i / 3}}`) as Row,
    );
    await s.rows.replaceDatasetRows("ds_stores", { rows, columns: [], refreshedAt: "2026-11-01T00:00:00.000Z" });
    for (const query of [
      { offset: 3, limit: 10, columns: null, filters: null },
      { offset: 1000, limit: null, columns: null, filters: null },
      {
        offset: 1,
        limit: null,
        columns: null,
        filters: JSON.parse('{"__proto__": {"x": 1}}') as Record<string, unknown>,
      },
    ]) {
      const texts: string[] = [];
      for await (const batch of (await s.rows.readDatasetRows("ds_stores", query)).rowsJson!) texts.push(...batch);
      const objects = await collect((await s.rows.readDatasetRows("ds_stores", query)).rows);
      expect(texts).toEqual(objects.map((r) => JSON.stringify(r)));
      expect(texts.length).toBeGreaterThan(0);
    }
    expect(
      (await s.rows.readDatasetRows("ds_stores", { offset: 0, limit: 1, columns: ["i"], filters: null })).rowsJson,
    ).toBeUndefined();
  });

  it("a streamed read sees one snapshot although a refresh commits in the middle", async () => {
    const s = await seeded();
    const old = Array.from({ length: 1200 }, (_, i) => ({ v: "old", i }));
    await s.rows.replaceDatasetRows("ds_stores", { rows: old, columns: [], refreshedAt: "2026-11-01T00:00:00.000Z" });
    const page = await s.rows.readDatasetRows("ds_stores", { offset: 0, limit: null, columns: ["v"], filters: null });
    const iterator = page.rows[Symbol.asyncIterator]();
    const seen: unknown[] = [(await iterator.next()).value];
    await s.rows.replaceDatasetRows("ds_stores", {
      rows: [{ v: "new", i: 0 }],
      columns: [],
      refreshedAt: "2026-11-02T00:00:00.000Z",
    });
    for (let next = await iterator.next(); !next.done; next = await iterator.next()) seen.push(next.value);
    expect(seen).toHaveLength(1200);
    expect(seen.every((r) => (r as Row).v === "old")).toBe(true);
    expect(
      await collect(
        (await s.rows.readDatasetRows("ds_stores", { offset: 0, limit: 10, columns: ["v"], filters: null })).rows,
      ),
    ).toEqual([{ v: "new" }]);
  });
});

describe("sqlite: webhooks", () => {
  it("de-duplicates 20 concurrent deliveries of one key into one row (group commit)", async () => {
    const s = await seeded();
    const results = await Promise.all(
      Array.from({ length: 20 }, (_, i) => s.webhooks.ingestWebhookRow(hook(i, "delivery-1"))),
    );
    expect(results.filter((r) => !r.duplicate)).toEqual([{ id: "row_0", duplicate: false }]);
    expect(results.filter((r) => r.duplicate).every((r) => r.id === "row_0")).toBe(true);
    expect((await s.catalog.getDataset("ds_conn_hook"))?.rowCount).toBe(1);
  });

  it("trims beyond retainRows with their dedup keys, widens columns and moves updatedAt", async () => {
    const s = await seeded();
    for (let i = 1; i <= 5; i++) await s.webhooks.ingestWebhookRow(hook(i, `k${i}`));
    const page = await s.rows.readDatasetRows("ds_conn_hook", {
      offset: 0,
      limit: null,
      columns: ["n"],
      filters: null,
    });
    expect(page.totalRows).toBe(3);
    expect(await collect(page.rows)).toEqual([{ n: 3 }, { n: 4 }, { n: 5 }]);
    expect(await s.catalog.getDataset("ds_conn_hook")).toMatchObject({
      rowCount: 3,
      updatedAt: "2026-11-01T00:00:05.000Z",
      columns: [
        { name: "_id", type: "string" },
        { name: "n", type: "number" },
      ],
    });
    expect(await s.webhooks.ingestWebhookRow(hook(7, "k1"))).toEqual({ id: "row_7", duplicate: false });
    expect(await s.webhooks.ingestWebhookRow(hook(8, "k5"))).toEqual({ id: "row_5", duplicate: true });
  });

  it("creates connections, finds endpoints and changes settings", async () => {
    const s = await seeded();
    expect(await s.webhooks.getWebhookEndpoint("ep_shop")).toEqual({
      connectionId: "conn_hook",
      teamId: "team_ops",
      name: "Shop events",
      datasetId: "ds_conn_hook",
      endpointId: "ep_shop",
      signingSecret: null,
      retainRows: 3,
      signature: { scheme: "auto" },
      previousSecret: null,
    });
    await s.webhooks.createWebhookConnection({
      connection: { id: "conn_new", teamId: "team_ops", name: "New", createdAt: "2026-11-01T00:00:00.000Z" },
      endpoint: { endpointId: "ep_new", signingSecret: "s1", retainRows: 10 },
      dataset: { id: "ds_new", name: "New" },
    });
    expect(await s.webhooks.updateWebhookSettings("conn_new", { signingSecret: null, retainRows: 5 })).toMatchObject({
      signingSecret: null,
      retainRows: 5,
      datasetId: "ds_new",
    });
    expect(await s.catalog.getDataset("ds_new")).toMatchObject({
      type: "connection",
      connectionId: "conn_new",
      rowCount: 0,
      columns: [],
    });
    expect((await s.catalog.getConnection("conn_new"))?.config).toEqual({
      endpointId: "ep_new",
      signingSecret: null,
      retainRows: 5,
    });
    expect(await s.webhooks.updateWebhookSettings("nope", { retainRows: 1 })).toBeNull();
    expect(await s.webhooks.getWebhookEndpoint("nope")).toBeNull();
  });

  it("sees a secret changed through this store or another connection on the next lookup (the endpoint cache never serves a stale one)", async () => {
    const path = file();
    const s = await seeded(path);
    expect((await s.webhooks.getWebhookEndpoint("ep_shop"))?.signingSecret).toBeNull();
    expect((await s.webhooks.getWebhookEndpoint("ep_shop"))?.signingSecret).toBeNull(); // now remembered

    await s.webhooks.updateWebhookSettings("conn_hook", { signingSecret: "whsec_one" });
    expect((await s.webhooks.getWebhookEndpoint("ep_shop"))?.signingSecret).toBe("whsec_one");

    // Another process on the same file (here: another connection) rotates and then removes the secret.
    const other = store(path);
    await other.webhooks.updateWebhookSettings("conn_hook", { signingSecret: "whsec_two" });
    expect((await s.webhooks.getWebhookEndpoint("ep_shop"))?.signingSecret).toBe("whsec_two");
    // …with an overlap: the remembered endpoint gives way to one with the previous secret.
    await other.webhooks.updateWebhookSettings("conn_hook", {
      signingSecret: "whsec_three",
      previousSecretValidUntil: "2026-11-02T00:00:00.000Z",
    });
    expect(await s.webhooks.getWebhookEndpoint("ep_shop")).toMatchObject({
      signingSecret: "whsec_three",
      previousSecret: { secret: "whsec_two", validUntilMs: Date.parse("2026-11-02T00:00:00.000Z") },
    });
    await other.webhooks.updateWebhookSettings("conn_hook", { signingSecret: null, retainRows: 7 });
    expect(await s.webhooks.getWebhookEndpoint("ep_shop")).toMatchObject({ signingSecret: null, retainRows: 7 });
  });
});

describe("sqlite: input tables", () => {
  it("advances _updatedAt strictly within one millisecond and refuses a stale write", async () => {
    const s = await seeded();
    const now = Date.parse("2026-11-01T00:00:00.000Z");
    const row = await s.tables.insertTableRow({
      tableId: "tbl_targets",
      rowId: "r2",
      values: { region: "APAC", target: 1 },
      actor: ACTOR,
      now,
      auditEvent: auditEvent("e1"),
    });
    expect(row).toEqual({
      _id: "r2",
      region: "APAC",
      target: 1,
      _createdAt: "2026-11-01T00:00:00.000Z",
      _updatedAt: "2026-11-01T00:00:00.000Z",
    });
    const base = { tableId: "tbl_targets", rowId: "r2", actor: ACTOR, now, auditEvent: auditEvent("e2") };
    const a = await s.tables.updateTableRow({
      ...base,
      patch: { target: 2 },
      expectedUpdatedAt: row._updatedAt as string,
    });
    const b = await s.tables.updateTableRow({
      ...base,
      patch: { target: 3 },
      expectedUpdatedAt: row._updatedAt as string,
    });
    expect(a).toMatchObject({ status: "ok", row: { target: 2, _updatedAt: "2026-11-01T00:00:00.001Z" } });
    expect(b).toEqual({ status: "conflict", current: { ...(a as { row: Row }).row } });
    const c = await s.tables.updateTableRow({
      ...base,
      patch: { target: 4 },
      expectedUpdatedAt: null,
      auditEvent: auditEvent("e2b"),
    });
    expect(c).toMatchObject({
      status: "ok",
      row: { target: 4, _updatedAt: "2026-11-01T00:00:00.002Z", _createdAt: "2026-11-01T00:00:00.000Z" },
    });
    expect(
      await s.tables.deleteTableRow({
        tableId: "tbl_targets",
        rowId: "r2",
        actor: ACTOR,
        now,
        auditEvent: auditEvent("e3"),
      }),
    ).toMatchObject({ status: "ok" });
    expect(
      await s.tables.deleteTableRow({
        tableId: "tbl_targets",
        rowId: "r2",
        actor: ACTOR,
        now,
        auditEvent: auditEvent("e4"),
      }),
    ).toEqual({ status: "not_found" });
    expect(
      (await s.tables.listEditLog("tbl_targets")).map((e) => [
        e.op,
        e.rowId,
        e.actor.id,
        (e.after ?? e.before)?.target,
      ]),
    ).toEqual([
      ["create", "r2", "key_sync", 1],
      ["update", "r2", "key_sync", 2],
      ["update", "r2", "key_sync", 4],
      ["delete", "r2", "key_sync", 4],
    ]);
    expect((await s.tables.getTable("tbl_targets"))?.rowCount).toBe(1);
    const audit = await s.audit.readAuditEvents({
      teamIds: ["team_ops"],
      categories: ["audit"],
      after: null,
      since: null,
      storedBefore: now,
      limit: 10,
    });
    expect(audit.events.map((e) => e.event.id)).toEqual(["e1", "e2", "e2b", "e3"]);
  });

  it("writes one row per Idempotency-Key from two connections; honours a claim an earlier version left", async () => {
    const path = file();
    const s = await seeded(path);
    const t = store(path);
    const idempotency = { scope: "key_sync:tbl_targets", key: "k", fingerprint: "f1", status: 201, ttlMs: 86_400_000 };
    const now = Date.parse("2026-11-01T00:00:00.000Z");
    const insert = (on: SqliteStorage, rowId: string, at = now, key = "k") =>
      on.tables.insertTableRowOnce({
        tableId: "tbl_targets",
        rowId,
        values: {},
        actor: ACTOR,
        now: at,
        auditEvent: auditEvent(rowId),
        idempotency: { ...idempotency, key },
      });
    const outcomes = await Promise.all([insert(s, "r1"), insert(t, "r2"), insert(s, "r3"), insert(t, "r4")]);
    expect(outcomes.map((o) => o.state)).toEqual(["written", "completed", "completed", "completed"]);
    const first = (outcomes[0] as { result: Row }).result;
    expect(outcomes[1]).toEqual({ state: "completed", fingerprint: "f1", response: { status: 201, body: first } });
    const stored = await t.tables.listTableRows("tbl_targets", { offset: 0, limit: 10 });
    expect(stored.rows.map((r) => r._id)).toEqual(["row_1", "r1"]);
    // A key an earlier version claimed before writing (no answer yet): in progress until its one-minute lease runs out.
    const raw = new Database(path);
    const claim =
      "INSERT INTO idempotency_keys (scope, key, fingerprint, claimed_at, response) " +
      "VALUES (?, 'old', 'f0', ?, NULL)";
    raw.prepare(claim).run(idempotency.scope, now);
    raw.close();
    expect(await insert(s, "r5", now + 59_999, "old")).toEqual({ state: "in_progress", fingerprint: "f0" });
    expect(await insert(s, "r6", now + 60_000, "old")).toMatchObject({ state: "written", result: { _id: "r6" } });
    const replayed = await insert(t, "r7", now + 60_001, "old");
    expect(replayed).toMatchObject({ state: "completed", fingerprint: "f1", response: { body: { _id: "r6" } } });
  });
});

describe("sqlite: audit", () => {
  it("pages by position with a horizon, since and hasMore; positions survive deletion", async () => {
    const s = await seeded();
    for (let i = 1; i <= 5; i++)
      await s.audit.appendAuditEvent(auditEvent(`a${i}`, `2026-11-0${i}T00:00:00.000Z`), 100 * i);
    await s.audit.appendAuditEvent(auditEvent("other", "2026-11-01T00:00:00.000Z", "team_mkt"), 150);
    const q = { teamIds: ["team_ops"], categories: ["audit" as const], since: null, storedBefore: 400, limit: 2 };
    const first = await s.audit.readAuditEvents({ ...q, after: null });
    expect(first.events.map((e) => e.event.id)).toEqual(["a1", "a2"]);
    expect(first.hasMore).toBe(true);
    const second = await s.audit.readAuditEvents({ ...q, after: first.events[1]!.position });
    expect(second.events.map((e) => [e.event.id, e.storedAt])).toEqual([
      ["a3", 300],
      ["a4", 400],
    ]);
    expect(second.hasMore).toBe(false);
    const since = await s.audit.readAuditEvents({
      ...q,
      after: null,
      since: "2026-11-03T00:00:00.000Z",
      storedBefore: 1000,
      limit: 10,
    });
    expect(since.events.map((e) => e.event.id)).toEqual(["a3", "a4", "a5"]);

    const last = Number(since.events.at(-1)!.position);
    s.db.prepare("DELETE FROM audit_events WHERE position >= ?").run(last - 1);
    await s.audit.appendAuditEvent(auditEvent("a6"), 500);
    const after = await s.audit.readAuditEvents({ ...q, after: String(last - 2), storedBefore: 1000, limit: 10 });
    expect(after.events.map((e) => e.event.id)).toEqual(["a6"]);
    expect(Number(after.events[0]!.position)).toBe(last + 2); // "other" took one position; none reused
    expect(s.audit.isAuditPosition("12")).toBe(true);
    expect(s.audit.isAuditPosition("0")).toBe(false);
    expect(s.audit.isAuditPosition("1e3")).toBe(false);
  });
});

describe("sqlite: what requests record (group commit)", () => {
  it("appends one turn's audit events in one commit, each resolving after it; a duplicate id fails only itself", async () => {
    const path = file();
    const s = await seeded(path);
    await s.audit.appendAuditEvent(auditEvent("dup"), 100);
    const reader = new Database(path, { readonly: true });
    const storedBy = (id: string) =>
      reader.prepare("SELECT count(*) AS n FROM audit_events WHERE event_id = ?").get(id) as { n: number };
    try {
      const appends = ["g1", "g2", "dup", "g3"].map((id) => s.audit.appendAuditEvent(auditEvent(id), 200));
      // Queued, not yet committed: nothing is visible to another connection until the group commits.
      expect(storedBy("g1").n).toBe(0);
      const outcomes = await Promise.allSettled(appends);
      expect(outcomes.map((o) => o.status)).toEqual(["fulfilled", "fulfilled", "rejected", "fulfilled"]);
      expect(["g1", "g2", "g3"].map((id) => storedBy(id).n)).toEqual([1, 1, 1]);
      expect(storedBy("dup").n).toBe(1);
    } finally {
      reader.close();
    }
  });

  it("a read's answer is sent after its data_access event is committed (visible to another connection at once)", async () => {
    const path = file();
    const s = await seeded(path);
    const { createDataApi } = await import("../../src/index.js");
    const api = createDataApi({ storage: s });
    const reader = new Database(path, { readonly: true });
    try {
      const res = await api.fetch(
        new Request("http://x/api/v1/datasets/ds_orders/rows?maxRows=2", {
          headers: { authorization: "Bearer dp_test_sync_0000000000000000" },
        }),
      );
      // No turn of the event loop passes between the answer and this count.
      const audited = reader.prepare("SELECT count(*) AS n FROM audit_events WHERE category = 'data_access'").get() as {
        n: number;
      };
      expect(res.status).toBe(200);
      expect(audited.n).toBe(1);
    } finally {
      reader.close();
    }
  });
});

describe("sqlite: the usage log sums a turn's calls", () => {
  it("counts every call of one turn once, per counter: calls, errors, latency, dataset reads and the latest read", async () => {
    const s = await seeded();
    const call = (status: number, latencyMs: number, at: string, objectId = "ds_orders") =>
      s.usage.recordApiCall({
        at,
        teamId: "team_ops",
        credentialKind: "api-key",
        credentialId: "key_sync",
        credentialName: "Warehouse sync",
        method: "GET",
        route: "/api/v1/datasets/:id/rows",
        objectId,
        status,
        latencyMs,
      });
    const calls = [
      ...Array.from({ length: 40 }, (_, i) => call(200, 2, `2026-11-24T10:00:${String(i).padStart(2, "0")}.000Z`)),
      ...Array.from({ length: 7 }, () => call(404, 1, "2026-11-24T09:00:00.000Z")),
      call(503, 30, "2026-11-24T08:00:00.000Z"),
      call(200, 5, "2026-11-24T11:00:00.000Z", "ds_stores"),
    ];
    await Promise.all(calls);
    const usage = await s.usage.spaceApiUsage({ teamId: "team_ops", fromDay: "2026-11-24", toDay: "2026-11-24" });
    expect(usage.map((r) => [r.calls, r.errors, r.server_errors, r.avg_latency_ms])).toEqual([[49, 8, 1, 2]]); // (40·2 + 7·1 + 30 + 5) / 49 = 2.49
    const datasets = await s.usage.spaceDatasetUsage({ teamId: "team_ops" });
    const reads = Object.fromEntries(datasets.map((d) => [d.dataset_id, [d.api_reads, d.last_api_read_at]]));
    expect(reads.ds_orders).toEqual([40, "2026-11-24T10:00:39.000Z"]);
    expect(reads.ds_stores).toEqual([1, "2026-11-24T11:00:00.000Z"]);

    await call(200, 4, "2026-11-24T12:00:00.000Z");
    const again = await s.usage.spaceApiUsage({ teamId: "team_ops", fromDay: "2026-11-24", toDay: "2026-11-24" });
    expect(again.map((r) => r.calls)).toEqual([50]);

    // A read of the counters in the middle of a turn commits the calls before it; the calls after it are the next
    // group's.
    const before = [call(200, 1, "2026-11-24T12:00:01.000Z"), call(200, 1, "2026-11-24T12:00:02.000Z")];
    const midTurn = s.usage.spaceApiUsage({ teamId: "team_ops", fromDay: "2026-11-24", toDay: "2026-11-24" });
    const after = call(500, 1, "2026-11-24T12:00:03.000Z");
    expect((await midTurn).map((r) => r.calls)).toEqual([52]);
    await Promise.all([...before, after]);
    const last = await s.usage.spaceApiUsage({ teamId: "team_ops", fromDay: "2026-11-24", toDay: "2026-11-24" });
    expect(last.map((r) => [r.calls, r.server_errors])).toEqual([[53, 2]]);
  });
});
