/**
 * Every admin write is visible to the very next read of every process on
 * the file (admin-api.md): another connection in this process, and a real
 * second process, change teams, memberships, sessions and webhook secrets
 * while this store has just read (and, for endpoints, cached) the old state.
 */
import { execFile } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { sha256Hex } from "../../src/domain/crypto.js";
import type { ConnectionRecord } from "../../src/domain/model.js";
import { parseFixture } from "../../src/fixture/load.js";
import { createSqliteStorage, type SqliteStorage } from "../../src/sqlite/index.js";
import { conformanceFixture, TOKENS } from "../../src/testing/conformance/fixture.js";
import { OPEN_FILE } from "./support/other-process.js";

const root = new URL("../..", import.meta.url).pathname;
const dir = mkdtempSync(join(tmpdir(), "dataport-sqlite-visibility-"));
let n = 0;
const open: SqliteStorage[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((s) => s.close()));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function store(path: string): SqliteStorage {
  const s = createSqliteStorage({ path });
  open.push(s);
  return s;
}

const HOOK: ConnectionRecord = {
  id: "conn_hook",
  teamId: "team_ops",
  name: "Shop events",
  type: "webhook",
  config: { endpointId: "ep_shop", signingSecret: "whsec_old", retainRows: 3 },
  createdAt: "2026-09-01T00:00:00Z",
};

async function seededFile(): Promise<{ path: string; s: SqliteStorage }> {
  const path = join(dir, `db-${++n}.sqlite`);
  const s = store(path);
  const fixture = conformanceFixture() as ReturnType<typeof conformanceFixture> & { connections: unknown[] };
  fixture.connections.push(HOOK);
  await s.seed(parseFixture(fixture));
  return { path, s };
}

/** Read everything the assertions look at, so anything this store remembers is warm. */
async function warm(s: SqliteStorage): Promise<void> {
  expect((await s.identity.getTeam("team_ops"))?.plan).toBe("business");
  expect((await s.credentials.findApiKeyWithTeam!(sha256Hex(TOKENS.sync)))?.team?.plan).toBe("business");
  expect((await s.identity.listMemberships("usr_ada")).map((m) => m.teamId)).toEqual(["team_free", "team_ops"]);
  expect((await s.webhooks.getWebhookEndpoint("ep_shop"))?.signingSecret).toBe("whsec_old");
  expect((await s.webhooks.getWebhookEndpoint("ep_shop"))?.signingSecret).toBe("whsec_old");
}

async function expectChanged(s: SqliteStorage, secret: string): Promise<void> {
  expect((await s.identity.getTeam("team_ops"))?.plan).toBe("free");
  expect((await s.credentials.findApiKeyWithTeam!(sha256Hex(TOKENS.sync)))?.team?.plan).toBe("free");
  expect((await s.identity.listMemberships("usr_ada")).map((m) => m.teamId)).toEqual(["team_free"]);
  expect((await s.webhooks.getWebhookEndpoint("ep_shop"))?.signingSecret).toBe(secret);
}

const OPS_FREE = { id: "team_ops", name: "Operations", plan: "free", businessId: "biz_1", isPersonal: false } as const;
const rotated = (secret: string): ConnectionRecord => ({ ...HOOK, config: { ...HOOK.config, signingSecret: secret } });

describe("sqlite: admin writes are visible at once", () => {
  it("to another connection on the file: plan change, membership removal, secret rotated by putConnection and by updateWebhookSettings", async () => {
    const { path, s } = await seededFile();
    const other = store(path);
    await warm(s);

    expect(await other.identity.putTeam(OPS_FREE)).toBe("updated");
    expect(await other.identity.deleteMembership("usr_ada", "team_ops")).toBe(true);
    expect(await other.catalog.putConnection(rotated("whsec_new"))).toBe("updated");
    await expectChanged(s, "whsec_new");

    await other.webhooks.updateWebhookSettings("conn_hook", { signingSecret: "whsec_newer" });
    expect((await s.webhooks.getWebhookEndpoint("ep_shop"))?.signingSecret).toBe("whsec_newer");
    await other.webhooks.updateWebhookSettings("conn_hook", { signingSecret: null });
    expect((await s.webhooks.getWebhookEndpoint("ep_shop"))?.signingSecret).toBeNull();
  });

  it("to another process on the file, right after its commits", async () => {
    const { path, s } = await seededFile();
    await warm(s);
    const calls = [
      { method: "identity.putTeam", args: [OPS_FREE] },
      { method: "identity.deleteMembership", args: ["usr_ada", "team_ops"] },
      { method: "catalog.putConnection", args: [rotated("whsec_from_child")] },
    ];
    const { stdout } = await promisify(execFile)(
      process.execPath,
      ["--import", "tsx", join(root, "test/sqlite/support/store-calls.ts"), path, JSON.stringify(calls)],
      { cwd: root },
    );
    expect(stdout.trim().split("\n")).toEqual(['"updated"', "true", '"updated"']);
    await expectChanged(s, "whsec_from_child");

    await promisify(execFile)(
      process.execPath,
      [
        "--import",
        "tsx",
        join(root, "test/sqlite/support/store-calls.ts"),
        path,
        JSON.stringify([
          { method: "webhooks.updateWebhookSettings", args: ["conn_hook", { signingSecret: "whsec_2" }] },
        ]),
      ],
      { cwd: root },
    );
    expect((await s.webhooks.getWebhookEndpoint("ep_shop"))?.signingSecret).toBe("whsec_2");
  }, 30_000);

  it("to this store's own endpoint cache: putConnection rotates, moves the endpoint id, deleteConnection removes it", async () => {
    const { s } = await seededFile();
    await warm(s);
    await s.catalog.putConnection(rotated("whsec_local"));
    expect((await s.webhooks.getWebhookEndpoint("ep_shop"))?.signingSecret).toBe("whsec_local");

    await s.catalog.putConnection({ ...HOOK, config: { ...HOOK.config, endpointId: "ep_moved" } });
    expect(await s.webhooks.getWebhookEndpoint("ep_shop")).toBeNull();
    expect(await s.webhooks.getWebhookEndpoint("ep_moved")).toMatchObject({
      connectionId: "conn_hook",
      datasetId: "ds_conn_hook",
      signingSecret: "whsec_old",
    });
    expect(s.db.prepare("SELECT endpoint_id FROM connections WHERE id = 'conn_hook'").get()).toEqual({
      endpoint_id: "ep_moved",
    });

    // Not a webhook any more: no endpoint.
    await s.catalog.putConnection({ ...HOOK, type: "memory", config: { endpointId: "ep_moved" } });
    expect(await s.webhooks.getWebhookEndpoint("ep_moved")).toBeNull();
    expect(s.db.prepare("SELECT endpoint_id FROM connections WHERE id = 'conn_hook'").get()).toEqual({
      endpoint_id: null,
    });

    await s.catalog.putConnection(HOOK);
    expect((await s.webhooks.getWebhookEndpoint("ep_shop"))?.signingSecret).toBe("whsec_old");
    expect(await s.catalog.deleteConnection("conn_hook")).toBe(true);
    expect(await s.webhooks.getWebhookEndpoint("ep_shop")).toBeNull();
    expect(await s.catalog.getDataset("ds_conn_hook")).toBeNull();
    expect(await s.catalog.deleteConnection("conn_hook")).toBe(false);
  });

  it("refuses a put that takes another connection's endpoint id, writing nothing", async () => {
    const { path, s } = await seededFile();
    await s.webhooks.createWebhookConnection({
      connection: { id: "conn_two", teamId: "team_ops", name: "Two", createdAt: "2026-11-01T00:00:00.000Z" },
      endpoint: { endpointId: "ep_two", signingSecret: null, retainRows: null },
      dataset: { id: "ds_two", name: "Two" },
    });
    const two = await s.catalog.getConnection("conn_two");
    await expect(
      s.catalog.putConnection({ ...two!, config: { ...two!.config, endpointId: "ep_shop" } }),
    ).rejects.toThrow(/endpoint id ep_shop/);
    await expect(s.catalog.putConnection({ ...HOOK, id: "conn_three" })).rejects.toThrow(/endpoint id ep_shop/);
    expect(await s.catalog.getConnection("conn_two")).toEqual(two);
    expect(await s.catalog.getConnection("conn_three")).toBeNull();
    expect((await s.webhooks.getWebhookEndpoint("ep_shop"))?.connectionId).toBe("conn_hook");
    expect((await store(path).webhooks.getWebhookEndpoint("ep_two"))?.connectionId).toBe("conn_two");
  });

  it("sessions: inserted, expired and deleted by another connection, seen by the next lookup", async () => {
    const { path, s } = await seededFile();
    const other = store(path);
    const now = Date.parse("2026-11-01T12:00:00.000Z");
    const hash = sha256Hex("sess_token_new");
    expect(await s.credentials.findSessionUser(hash, now)).toBeNull();
    await other.credentials.insertSession({
      id: "sess_new",
      tokenHash: hash,
      userId: "usr_bob",
      expiresAt: "2026-11-01T13:00:00.000Z",
    });
    expect(await s.credentials.findSessionUser(hash, now)).toBe("usr_bob");
    expect(await s.credentials.findSessionUser(hash, Date.parse("2026-11-01T13:00:00.000Z"))).toBeNull(); // at expiresAt: expired
    expect(await s.credentials.getSession("sess_new")).toEqual({
      id: "sess_new",
      tokenHash: hash,
      userId: "usr_bob",
      expiresAt: "2026-11-01T13:00:00.000Z",
    });
    await expect(
      s.credentials.insertSession({ id: "sess_new", tokenHash: sha256Hex("x"), userId: "usr_bob", expiresAt: null }),
    ).rejects.toThrow();
    await expect(
      s.credentials.insertSession({ id: "sess_other", tokenHash: hash, userId: "usr_bob", expiresAt: null }),
    ).rejects.toThrow();
    await expect(
      s.credentials.insertSession({ id: "sess_bad", tokenHash: sha256Hex("y"), userId: "usr_bob", expiresAt: "soon" }),
    ).rejects.toThrow(/expiresAt/);
    expect(await s.credentials.getSession("sess_bad")).toBeNull();
    // Fixture sessions: the id form of the fixture loader, never expiring.
    const adaHash = sha256Hex(TOKENS.sessionAda);
    expect(await s.credentials.getSession(`sess_${adaHash.slice(0, 24)}`)).toEqual({
      id: `sess_${adaHash.slice(0, 24)}`,
      tokenHash: adaHash,
      userId: "usr_ada",
      expiresAt: null,
    });

    expect(await other.credentials.deleteSession("sess_new")).toBe(true);
    expect(await s.credentials.findSessionUser(hash, now)).toBeNull();
    expect(await other.credentials.deleteUserSessions("usr_ada")).toBe(1);
    expect(await s.credentials.findSessionUser(adaHash, now)).toBeNull();
    expect(await s.credentials.findSessionUser(sha256Hex(TOKENS.sessionBob), now)).toBe("usr_bob");
  });
});

describe("sqlite: the remembered key lookup", () => {
  it("forgets on this store's own writes: revoke, team plan, a new key, the creator deleted", async () => {
    const { s } = await seededFile();
    const hash = sha256Hex(TOKENS.sync);
    const first = await s.credentials.findApiKeyWithTeam!(hash);
    expect(first?.key.revokedAt).toBeNull();
    expect(Object.isFrozen(first?.key.scopes)).toBe(true);

    await s.identity.putTeam(OPS_FREE);
    expect((await s.credentials.findApiKeyWithTeam!(hash))?.team?.plan).toBe("free");
    await s.credentials.revokeApiKey(first!.key.id, "2026-11-24T00:00:00.000Z");
    expect((await s.credentials.findApiKeyWithTeam!(hash))?.key.revokedAt).toBe("2026-11-24T00:00:00.000Z");
    await s.credentials.markKeysCreatorDeleted(first!.key.createdBy);
    expect((await s.credentials.findApiKeyWithTeam!(hash))?.key.creatorDeleted).toBe(true);

    const fresh = sha256Hex("dp_test_fresh_0000000000000000");
    expect(await s.credentials.findApiKeyWithTeam!(fresh)).toBeNull();
    await s.credentials.insertApiKey({
      ...first!.key,
      id: "key_fresh",
      tokenHash: fresh,
      revokedAt: null,
      creatorDeleted: false,
    });
    expect((await s.credentials.findApiKeyWithTeam!(fresh))?.key.id).toBe("key_fresh");
  });
});

describe("sqlite: the remembered dataset records", () => {
  const actor = { type: "api-key", id: "key_sync", name: "Warehouse sync" } as const;
  const event = (id: string) =>
    ({
      id,
      teamId: "team_ops",
      time: "2026-11-24T00:00:00.000Z",
      category: "audit",
      action: "table.row.created",
      actor,
      target: null,
      outcome: "success",
      ip: null,
      userAgent: null,
    }) as const;
  const columns = [{ name: "region", type: "string" as const }];
  async function* rows(n: number) {
    for (let i = 0; i < n; i++) yield { region: `r${i}` };
  }

  it("forgets on every write of this store: ingest, trims, bulk writes, a replace, a put, a table row, a delete", async () => {
    const { s } = await seededFile();
    const first = await s.catalog.getDataset("ds_orders");
    expect(Object.isFrozen(first)).toBe(true);
    expect(Object.isFrozen(first?.columns[0])).toBe(true);
    expect(await s.catalog.getDataset("ds_orders")).toBe(first); // remembered: the same frozen record

    await s.rows.writeDatasetRows({
      datasetId: "ds_orders",
      mode: "append",
      rows: rows(4),
      columns: () => columns,
      updatedAt: "2026-11-24T01:00:00.000Z",
    });
    expect(await s.catalog.getDataset("ds_orders")).toMatchObject({
      rowCount: first!.rowCount + 4,
      updatedAt: "2026-11-24T01:00:00.000Z",
    });
    await s.rows.replaceDatasetRows("ds_orders", {
      rows: [{ region: "EMEA" }],
      columns,
      refreshedAt: "2026-11-24T02:00:00.000Z",
    });
    expect(await s.catalog.getDataset("ds_orders")).toMatchObject({
      rowCount: 1,
      lastRefreshedAt: "2026-11-24T02:00:00.000Z",
      columns,
    });
    await s.catalog.putDataset({ ...first!, name: "Orders (renamed)" });
    expect((await s.catalog.getDataset("ds_orders"))?.name).toBe("Orders (renamed)");

    // The webhook's dataset: ingest moves rowCount and updatedAt; past retainRows (3) the trim keeps it at 3.
    expect((await s.catalog.getDataset("ds_conn_hook"))?.rowCount).toBe(0);
    for (let i = 1; i <= 4; i++) {
      await s.webhooks.ingestWebhookRow({
        datasetId: "ds_conn_hook",
        dedupKey: null,
        row: { _id: `row_${i}`, n: i },
        columns: [{ name: "n", type: "number" }],
        retainRows: 3,
        receivedAt: `2026-11-24T00:00:0${i}.000Z`,
      });
      expect(await s.catalog.getDataset("ds_conn_hook")).toMatchObject({
        rowCount: Math.min(i, 3),
        updatedAt: `2026-11-24T00:00:0${i}.000Z`,
      });
    }

    const table = await s.catalog.getDataset("tbl_targets");
    await s.tables.insertTableRow({
      tableId: "tbl_targets",
      rowId: "row_new",
      values: { region: "APAC" },
      actor,
      now: Date.parse("2026-11-24T03:00:00.000Z"),
      auditEvent: event("evt_memo_1"),
    });
    expect((await s.catalog.getDataset("tbl_targets"))?.rowCount).toBe(table!.rowCount + 1);

    expect(await s.catalog.deleteDataset("ds_orders")).toBe(true);
    expect(await s.catalog.getDataset("ds_orders")).toBeNull();
  });

  it("forgets when another connection or another process on the file commits", async () => {
    const { path, s } = await seededFile();
    const first = await s.catalog.getDataset("ds_stores");
    expect(await s.catalog.getDataset("ds_stores")).toBe(first);

    const other = store(path);
    await other.catalog.putDataset({ ...first!, name: "Stores (from another connection)" });
    expect((await s.catalog.getDataset("ds_stores"))?.name).toBe("Stores (from another connection)");

    // A real second process, through plain SQL on the file.
    await promisify(execFile)(
      process.execPath,
      [
        "-e",
        `${OPEN_FILE} const db = open(${JSON.stringify(path)}); db.exec("PRAGMA busy_timeout = 5000"); db.prepare("UPDATE datasets SET name = 'Stores (from another process)' WHERE id = 'ds_stores'").run(); db.close();`,
      ],
      { cwd: root },
    );
    expect((await s.catalog.getDataset("ds_stores"))?.name).toBe("Stores (from another process)");
  });
});

describe("sqlite: reads of a remembered dataset record", () => {
  it("describe the dataset's columns as they are now, after a declaration changes them", async () => {
    const { createDataApi } = await import("../../src/server/api.js");
    const { createAdmin } = await import("../../src/admin/index.js");
    const { s } = await seededFile();
    const api = createDataApi({ storage: s });
    const admin = createAdmin(api);
    const read = async (query = "") => {
      const reply = await api.handle({
        method: "GET",
        url: `http://localhost/api/v1/datasets/ds_stores/rows?maxRows=1${query}`,
        headers: {
          get: (name: string) => (name === "authorization" ? `Bearer ${TOKENS.sync}` : null),
          keys: () => ["authorization"],
        },
        clientAddress: "127.0.0.1",
        readBody: async () => new Uint8Array(),
      });
      return JSON.parse(String(reply.body)) as {
        metadata: { columns: string[]; columnTypes: Record<string, string | null>; datasetName: string };
      };
    };
    const before = (await read()).metadata;
    expect((await read()).metadata).toEqual(before); // the record is remembered: the same facts
    const declared = [
      { name: "store_id", type: "string" as const },
      { name: "opened", type: "date" as const },
    ];
    const current = (await s.catalog.getDataset("ds_stores"))!;
    expect(current.type).toBe("connection");
    await admin.putDataset("ds_stores", {
      teamId: current.teamId,
      name: "Stores v2",
      type: "connection",
      connectionId: current.connectionId,
      source: current.source,
      columns: declared,
      dropColumns: current.columns.map((c) => c.name).filter((name) => !declared.some((d) => d.name === name)),
    });
    const after = (await read()).metadata;
    expect(after.datasetName).toBe("Stores v2");
    expect(after.columns).toEqual(["store_id", "opened"]);
    expect(after.columnTypes).toEqual({ store_id: "string", opened: "date" });
    expect((await read("&columns=opened")).metadata.columnTypes).toEqual({ opened: "date" });
  });
});
