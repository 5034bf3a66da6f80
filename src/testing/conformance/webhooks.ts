import { describe, expect, it } from "vitest";
import type { Column, Row } from "../../domain/model.js";
import type { Storage } from "../../ports/storage.js";
import type { RowQuery } from "../../ports/storage/rows.js";
import { conformanceFixture } from "./fixture.js";
import { type ConformanceOptions, seededStore, type StorageFactory } from "./harness.js";

/** Secrets of the webhook fixture: GitHub's and Standard Webhooks' published test secrets. */
export const WEBHOOK_SECRETS = {
  github: "It's a Secret to Everybody",
  standard: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
} as const;

/**
 * The conformance fixture plus four webhook connections on team_ops:
 * `hook-open` (unsigned), `hook-gh` (GitHub's test secret), `hook-std`
 * (Standard Webhooks' test secret) and `hook-small` (keeps 3 rows). Their
 * datasets are `ds_<connection id>`, created by the loader. Read them with
 * the session of Ada, an owner of team_ops.
 */
export function webhookFixture() {
  const fixture = conformanceFixture();
  const hook = (id: string, endpointId: string, config: Record<string, unknown>) => ({
    id,
    teamId: "team_ops",
    name: `Hook ${endpointId}`,
    type: "webhook",
    config: { endpointId, ...config },
    createdAt: "2026-10-05T00:00:00Z",
  });
  const connections = [
    hook("conn_hook_open", "hook-open", { signingSecret: null }),
    hook("conn_hook_gh", "hook-gh", { signingSecret: WEBHOOK_SECRETS.github }),
    hook("conn_hook_std", "hook-std", { signingSecret: WEBHOOK_SECRETS.standard }),
    hook("conn_hook_small", "hook-small", { signingSecret: null, retainRows: 3 }),
  ];
  return {
    ...fixture,
    connections: [...fixture.connections, ...connections] as typeof fixture.connections,
  };
}

const all: RowQuery = { offset: 0, limit: null, columns: null, filters: null };
const T0 = "2026-11-01T12:00:00.000Z";

async function rowsOf(store: Storage, datasetId: string): Promise<Row[]> {
  const out: Row[] = [];
  for await (const row of (await store.rows.readDatasetRows(datasetId, all)).rows) out.push({ ...row });
  return out;
}

function row(id: string, fields: Record<string, unknown> = {}): Row {
  const out: Row = Object.create(null);
  out._id = id;
  out._receivedAt = T0;
  out._sourceIp = "203.0.113.9";
  for (const key of Object.keys(fields)) out[key] = fields[key];
  return out;
}

function columnsOf(r: Row): Column[] {
  return Object.keys(r).map((name) => {
    const v = r[name];
    return {
      name,
      type:
        v === null
          ? null
          : typeof v === "number"
            ? "number"
            : typeof v === "boolean"
              ? "boolean"
              : name === "_receivedAt"
                ? "datetime"
                : "string",
    };
  });
}

function ingest(store: Storage, datasetId: string, r: Row, dedupKey: string | null = null, retainRows = 10_000) {
  return store.webhooks.ingestWebhookRow({
    datasetId,
    dedupKey,
    row: r,
    columns: columnsOf(r),
    retainRows,
    receivedAt: T0,
  });
}

/** Webhook endpoints and delivered rows (`WebhookStore`): de-duplication, retention, settings. */
export function describeWebhooksConformance(
  name: string,
  factory: StorageFactory,
  options: ConformanceOptions = {},
): void {
  describe.skipIf(!!options.skip)(`${name}: webhooks`, () => {
    const seeded = seededStore(factory, options, webhookFixture);

    it("finds an endpoint by its path segment, with its dataset, secret and retention", async () => {
      const store = await seeded();
      expect(await store.webhooks.getWebhookEndpoint("hook-gh")).toEqual({
        connectionId: "conn_hook_gh",
        teamId: "team_ops",
        name: "Hook hook-gh",
        datasetId: "ds_conn_hook_gh",
        endpointId: "hook-gh",
        signingSecret: WEBHOOK_SECRETS.github,
        retainRows: null,
        signature: { scheme: "auto" },
        previousSecret: null,
      });
      expect(await store.webhooks.getWebhookEndpoint("hook-small")).toMatchObject({
        signingSecret: null,
        retainRows: 3,
      });
      expect(await store.webhooks.getWebhookEndpoint("nope")).toBeNull();
      expect(await store.webhooks.getWebhookEndpoint("conn_hook_gh")).toBeNull();
    });

    it("appends rows in arrival order, widens the columns and moves rowCount and updatedAt", async () => {
      const store = await seeded();
      expect(await ingest(store, "ds_conn_hook_open", row("r1", { a: 1 }))).toEqual({ id: "r1", duplicate: false });
      await store.webhooks.ingestWebhookRow({
        datasetId: "ds_conn_hook_open",
        dedupKey: null,
        row: row("r2", { a: "x", b: true }),
        columns: columnsOf(row("r2", { a: "x", b: true })),
        retainRows: 10_000,
        receivedAt: "2026-11-01T12:00:05.000Z",
      });
      const dataset = await store.catalog.getDataset("ds_conn_hook_open");
      expect(dataset).toMatchObject({
        type: "connection",
        connectionId: "conn_hook_open",
        rowCount: 2,
        updatedAt: "2026-11-01T12:00:05.000Z",
      });
      expect(dataset!.columns).toEqual([
        { name: "_id", type: "string" },
        { name: "_receivedAt", type: "datetime" },
        { name: "_sourceIp", type: "string" },
        { name: "a", type: "string" },
        { name: "b", type: "boolean" },
      ]);
      expect((await rowsOf(store, "ds_conn_hook_open")).map((r) => [r._id, r.a])).toEqual([
        ["r1", 1],
        ["r2", "x"],
      ]);
    });

    it("stores a repeated key once and answers with the first row's id", async () => {
      const store = await seeded();
      expect(await ingest(store, "ds_conn_hook_open", row("r1"), "h:delivery-1")).toEqual({
        id: "r1",
        duplicate: false,
      });
      expect(await ingest(store, "ds_conn_hook_open", row("r2"), "h:delivery-1")).toEqual({
        id: "r1",
        duplicate: true,
      });
      expect(await ingest(store, "ds_conn_hook_open", row("r3"), "h:delivery-2")).toEqual({
        id: "r3",
        duplicate: false,
      });
      // Keys are per dataset.
      expect(await ingest(store, "ds_conn_hook_gh", row("r4"), "h:delivery-1")).toEqual({ id: "r4", duplicate: false });
      expect((await rowsOf(store, "ds_conn_hook_open")).map((r) => r._id)).toEqual(["r1", "r3"]);
      expect((await store.catalog.getDataset("ds_conn_hook_open"))!.rowCount).toBe(2);
    });

    it("stores exactly one row for 20 concurrent copies of one delivery", async () => {
      const store = await seeded();
      const results = await Promise.all(
        Array.from({ length: 20 }, (_, i) => ingest(store, "ds_conn_hook_open", row(`r${i}`, { n: i }), "h:same")),
      );
      const stored = await rowsOf(store, "ds_conn_hook_open");
      expect(stored).toHaveLength(1);
      expect(results.filter((r) => !r.duplicate)).toHaveLength(1);
      expect(new Set(results.map((r) => r.id))).toEqual(new Set([stored[0]!._id]));
    });

    it("trims the oldest rows beyond retainRows, and forgets their dedup keys with them", async () => {
      const store = await seeded();
      for (let i = 1; i <= 5; i++) await ingest(store, "ds_conn_hook_small", row(`r${i}`), `h:d${i}`, 3);
      expect((await rowsOf(store, "ds_conn_hook_small")).map((r) => r._id)).toEqual(["r3", "r4", "r5"]);
      expect((await store.catalog.getDataset("ds_conn_hook_small"))!.rowCount).toBe(3);
      // Retained: still a duplicate. Trimmed: a new row.
      expect(await ingest(store, "ds_conn_hook_small", row("x3"), "h:d3", 3)).toEqual({ id: "r3", duplicate: true });
      expect(await ingest(store, "ds_conn_hook_small", row("x1"), "h:d1", 3)).toEqual({ id: "x1", duplicate: false });
      expect((await rowsOf(store, "ds_conn_hook_small")).map((r) => r._id)).toEqual(["r4", "r5", "x1"]);
    });

    it("pages by position across trimming and an append after it: no row skipped, none repeated", async () => {
      const store = await seeded();
      for (let i = 1; i <= 5; i++) await ingest(store, "ds_conn_hook_small", row(`r${i}`), null, 3);
      const first = await store.rows.readDatasetRows("ds_conn_hook_small", { ...all, limit: 1 });
      for await (const r of first.rows) expect(r._id).toBe("r3");
      await ingest(store, "ds_conn_hook_small", row("r6"), null, 3);
      const next = await store.rows.readDatasetRows("ds_conn_hook_small", { ...all, limit: 1, after: first.lastKey() });
      for await (const r of next.rows) expect(r._id).toBe("r4");
      // A bulk append keeps the stored rows where they are: the page after r4 is r5.
      await store.rows.writeDatasetRows({
        datasetId: "ds_conn_hook_small",
        mode: "append",
        rows: (async function* () {
          yield row("b1");
        })(),
        columns: () => columnsOf(row("b1")),
        updatedAt: T0,
      });
      const ids: unknown[] = [];
      const rest = await store.rows.readDatasetRows("ds_conn_hook_small", { ...all, after: next.lastKey() });
      for await (const r of rest.rows) ids.push(r._id);
      expect(ids).toEqual(["r5", "r6", "b1"]);
    });

    it("keeps __proto__, constructor and prototype as ordinary columns", async () => {
      const store = await seeded();
      const r = row("r1");
      r.__proto__ = "p";
      r["constructor.prototype.polluted"] = 1;
      await ingest(store, "ds_conn_hook_open", r);
      const [stored] = await rowsOf(store, "ds_conn_hook_open");
      expect(Object.hasOwn(stored!, "__proto__")).toBe(true);
      expect(JSON.parse(JSON.stringify(stored))).toMatchObject({
        ["__proto__"]: "p",
        "constructor.prototype.polluted": 1,
      });
      expect(({} as Record<string, unknown>).polluted).toBeUndefined();
      expect((await store.catalog.getDataset("ds_conn_hook_open"))!.columns.map((c) => c.name)).toContain("__proto__");
    });

    it("changes secret and retention; lowering retention trims at once", async () => {
      const store = await seeded();
      for (let i = 1; i <= 4; i++) await ingest(store, "ds_conn_hook_open", row(`r${i}`), `h:d${i}`);
      expect(await store.webhooks.updateWebhookSettings("conn_hook_open", { signingSecret: "s3cret" })).toMatchObject({
        signingSecret: "s3cret",
        retainRows: null,
      });
      expect((await store.webhooks.getWebhookEndpoint("hook-open"))!.signingSecret).toBe("s3cret");
      expect(await store.webhooks.updateWebhookSettings("conn_hook_open", { retainRows: 2 })).toMatchObject({
        signingSecret: "s3cret",
        retainRows: 2,
      });
      expect((await rowsOf(store, "ds_conn_hook_open")).map((r) => r._id)).toEqual(["r3", "r4"]);
      expect((await store.catalog.getDataset("ds_conn_hook_open"))!.rowCount).toBe(2);
      expect(await ingest(store, "ds_conn_hook_open", row("x1"), "h:d1", 2)).toEqual({ id: "x1", duplicate: false });
      expect(
        await store.webhooks.updateWebhookSettings("conn_hook_open", { signingSecret: null, retainRows: null }),
      ).toMatchObject({
        signingSecret: null,
        retainRows: null,
      });
      expect(await store.webhooks.updateWebhookSettings("nope", { signingSecret: null })).toBeNull();
      expect(await store.webhooks.updateWebhookSettings("conn_retail", { signingSecret: "x" })).toBeNull();
    });

    it("keeps the secret a rotation replaced until the overlap's end; a plain change or a removal drops it", async () => {
      const store = await seeded();
      const until = (at: string) => ({ secret: expect.any(String), validUntilMs: Date.parse(at) });
      const endpoint = () => store.webhooks.getWebhookEndpoint("hook-gh");
      const first = await store.webhooks.updateWebhookSettings("conn_hook_gh", {
        signingSecret: "second",
        previousSecretValidUntil: "2026-11-02T00:00:00.000Z",
      });
      expect(first).toMatchObject({
        signingSecret: "second",
        previousSecret: { secret: WEBHOOK_SECRETS.github, validUntilMs: Date.parse("2026-11-02T00:00:00.000Z") },
      });
      expect(await endpoint()).toEqual(first);
      // Stored in the connection's config, next to the current secret.
      expect((await store.catalog.getConnection("conn_hook_gh"))!.config).toMatchObject({
        signingSecret: "second",
        previousSigningSecret: WEBHOOK_SECRETS.github,
        previousSecretValidUntil: "2026-11-02T00:00:00.000Z",
      });
      // Other changes leave it alone; a second rotation replaces it by the secret it replaces.
      expect(
        await store.webhooks.updateWebhookSettings("conn_hook_gh", { retainRows: 5, signature: { scheme: "github" } }),
      ).toMatchObject({
        signingSecret: "second",
        previousSecret: until("2026-11-02T00:00:00.000Z"),
        signature: { scheme: "github" },
      });
      await store.webhooks.updateWebhookSettings("conn_hook_gh", {
        signingSecret: "third",
        previousSecretValidUntil: "2026-11-03T00:00:00.000Z",
      });
      expect(await endpoint()).toMatchObject({
        signingSecret: "third",
        previousSecret: { secret: "second", validUntilMs: Date.parse("2026-11-03T00:00:00.000Z") },
      });
      // The same secret again keeps what there was.
      await store.webhooks.updateWebhookSettings("conn_hook_gh", {
        signingSecret: "third",
        previousSecretValidUntil: "2026-11-04T00:00:00.000Z",
      });
      expect((await endpoint())!.previousSecret).toEqual({
        secret: "second",
        validUntilMs: Date.parse("2026-11-03T00:00:00.000Z"),
      });
      // A new secret without an overlap leaves none.
      expect(await store.webhooks.updateWebhookSettings("conn_hook_gh", { signingSecret: "fourth" })).toMatchObject({
        signingSecret: "fourth",
        previousSecret: null,
      });
      expect((await endpoint())!.previousSecret).toBeNull();
      // Removing the secret removes every secret; a secret set on an unsigned endpoint has nothing to keep.
      await store.webhooks.updateWebhookSettings("conn_hook_gh", {
        signingSecret: "fifth",
        previousSecretValidUntil: "2026-11-05T00:00:00.000Z",
      });
      expect(await store.webhooks.updateWebhookSettings("conn_hook_gh", { signingSecret: null })).toMatchObject({
        signingSecret: null,
        previousSecret: null,
      });
      expect((await store.catalog.getConnection("conn_hook_gh"))!.config).not.toHaveProperty("previousSigningSecret");
      await store.webhooks.updateWebhookSettings("conn_hook_gh", {
        signingSecret: "sixth",
        previousSecretValidUntil: "2026-11-06T00:00:00.000Z",
      });
      expect(await endpoint()).toMatchObject({
        signingSecret: "sixth",
        previousSecret: null,
        retainRows: 5,
        signature: { scheme: "github" },
      });
      expect(await store.webhooks.updateWebhookSettings("conn_hook_gh", { signature: null })).toMatchObject({
        signature: { scheme: "auto" },
      });
      expect((await store.catalog.getConnection("conn_hook_gh"))!.config).not.toHaveProperty("signature");
    });

    it("creates a webhook connection with an empty dataset the catalog serves", async () => {
      const store = await seeded();
      const endpoint = await store.webhooks.createWebhookConnection({
        connection: { id: "conn_new", teamId: "team_ops", name: "Stripe events", createdAt: T0 },
        endpoint: { endpointId: "whk_new", signingSecret: null, retainRows: 50 },
        dataset: { id: "ds_conn_new", name: "Stripe events" },
      });
      expect(endpoint).toEqual({
        connectionId: "conn_new",
        teamId: "team_ops",
        name: "Stripe events",
        datasetId: "ds_conn_new",
        endpointId: "whk_new",
        signingSecret: null,
        retainRows: 50,
        signature: { scheme: "auto" },
        previousSecret: null,
      });
      expect(await store.webhooks.getWebhookEndpoint("whk_new")).toEqual(endpoint);
      expect(await store.catalog.getConnection("conn_new")).toMatchObject({
        type: "webhook",
        config: { endpointId: "whk_new", signingSecret: null, retainRows: 50 },
      });
      expect(await store.catalog.getDataset("ds_conn_new")).toEqual({
        id: "ds_conn_new",
        teamId: "team_ops",
        name: "Stripe events",
        type: "connection",
        connectionId: "conn_new",
        source: null,
        columns: [],
        rowCount: 0,
        lastRefreshedAt: null,
        updatedAt: T0,
      });
      await ingest(store, "ds_conn_new", row("r1", { x: 1 }));
      expect((await store.rows.readDatasetRows("ds_conn_new", all)).totalRows).toBe(1);
      await expect(
        store.webhooks.createWebhookConnection({
          connection: { id: "conn_other", teamId: "team_ops", name: "Dup", createdAt: T0 },
          endpoint: { endpointId: "whk_new", signingSecret: null, retainRows: null },
          dataset: { id: "ds_conn_other", name: "Dup" },
        }),
      ).rejects.toThrow();
      const stripe = await store.webhooks.createWebhookConnection({
        connection: { id: "conn_stripe", teamId: "team_ops", name: "Stripe", createdAt: T0 },
        endpoint: {
          endpointId: "whk_stripe",
          signingSecret: "whsec_abc",
          retainRows: null,
          signature: { scheme: "stripe" },
        },
        dataset: { id: "ds_conn_stripe", name: "Stripe" },
      });
      expect(stripe).toMatchObject({
        signingSecret: "whsec_abc",
        signature: { scheme: "stripe" },
        previousSecret: null,
      });
      expect(await store.webhooks.getWebhookEndpoint("whk_stripe")).toEqual(stripe);
    });
  });
}
