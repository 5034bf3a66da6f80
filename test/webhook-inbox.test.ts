import { describe, expect, it } from "vitest";
import { createAdminClient } from "../src/admin-client/index.js";
import { createAdmin } from "../src/admin/index.js";
import { KEPT_BURST } from "../src/core/webhook-inbox.js";
import { signHex } from "../src/domain/signatures.js";
import type { MemoryStorage } from "../src/memory/memory-storage.js";
import { createPrometheusMetrics } from "../src/metrics/prometheus.js";
import { WEBHOOK_SECRETS, webhookFixture } from "../src/testing/conformance/webhooks.js";
import { ADMIN_TOKEN } from "./support/admin.js";
import { NOW, setup as baseSetup } from "./support/api.js";
import { TOKENS } from "./support/fixture.js";

/**
 * The delivery log over HTTP (webhook-inbox.md): what the receiver records
 * for each outcome, the bounds and a flood, the admin routes to list,
 * inspect and replay, `/space/webhook-deliveries`, and the metrics label.
 */

const setup = (options: Parameters<typeof baseSetup>[0] = {}) =>
  baseSetup({ fixture: webhookFixture(), adminToken: ADMIN_TOKEN, ...options });
type Api = Awaited<ReturnType<typeof setup>>;

const JSON_TYPE = { "content-type": "application/json" };
const ADMIN = "http://dataport.test/api/admin/v1";

function adminOf(api: Api) {
  return createAdminClient({ baseUrl: ADMIN, token: ADMIN_TOKEN, fetch: api.api.fetch });
}

/** The log of a connection once the refusals handed over so far are written. */
async function deliveries(api: Api, connectionId: string, query: Record<string, string> = {}) {
  // Refusals are written off the sender's path, at the end of the turn: wait until the count settles.
  let last = -1;
  for (let i = 0; i < 50; i++) {
    const page = await createAdmin(api.api).listWebhookDeliveries(connectionId, { limit: 1000, ...query });
    if (page.data.length === last) return page.data;
    last = page.data.length;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  throw new Error("the log did not settle");
}

const post = (api: Api, endpoint: string, body: string, headers: Record<string, string> = JSON_TYPE) =>
  api.call("POST", `/api/webhooks/${endpoint}`, { body, headers });

describe("the delivery log: what the receiver records", () => {
  it("records a refused delivery with its reason, status, redacted headers and body; a stored and a duplicate one with their row", async () => {
    const api = await setup();
    const body = '{"id":"evt_1","amount":12}';
    const bad = await post(api, "hook-gh", body, {
      ...JSON_TYPE,
      "x-hub-signature-256": signHex("the wrong secret", body),
      authorization: "Bearer sk_live_should_not_be_kept",
      cookie: "session=s3cret",
      "proxy-authorization": "Basic abc",
      "x-github-delivery": "gh-1",
    });
    expect(bad.status).toBe(401);
    const good = await post(api, "hook-gh", body, {
      ...JSON_TYPE,
      "x-hub-signature-256": signHex(WEBHOOK_SECRETS.github, body),
      "x-github-delivery": "gh-1",
    });
    expect(good.status).toBe(200);
    const again = await post(api, "hook-gh", body, {
      ...JSON_TYPE,
      "x-hub-signature-256": signHex(WEBHOOK_SECRETS.github, body),
      "x-github-delivery": "gh-1",
    });
    expect(again.json).toMatchObject({ id: good.json.id, duplicate: true });

    const log = await deliveries(api, "conn_hook_gh");
    expect(log.map((d) => [d.outcome, d.reason, d.status, d.rowId, d.verifiedBy, d.deliveryKey])).toEqual([
      ["duplicate", null, 200, good.json.id, "current", "h:gh-1"],
      ["stored", null, 200, good.json.id, "current", "h:gh-1"],
      ["refused", "signature_invalid", 401, null, null, null],
    ]);
    expect(log[2]).not.toHaveProperty("headers");
    const refused = await createAdmin(api.api).getWebhookDelivery("conn_hook_gh", log[2]!.id);
    expect(refused).toMatchObject({
      connectionId: "conn_hook_gh",
      receivedAt: NOW,
      sourceIp: "198.51.100.7",
      body,
      bodyEncoding: "utf8",
      bodyTruncated: false,
      suppressed: 0,
    });
    expect(refused.headers).toMatchObject({
      authorization: "[redacted]",
      cookie: "[redacted]",
      "proxy-authorization": "[redacted]",
      // What the sender sent, as it sent it: nothing else of a secret.
      "x-hub-signature-256": signHex("the wrong secret", body),
      "x-github-delivery": "gh-1",
    });
    expect(JSON.stringify(refused)).not.toContain("sk_live_should_not_be_kept");
    expect(JSON.stringify(refused)).not.toContain(WEBHOOK_SECRETS.github);
    // A stored delivery keeps no body.
    expect((await createAdmin(api.api).getWebhookDelivery("conn_hook_gh", log[1]!.id)).body).toBeNull();
  });

  it("records which secret verified a delivery during a rotation's overlap, so the host sees when the sender moved", async () => {
    const api = await setup();
    const admin = createAdmin(api.api);
    await admin.setWebhookSecret("conn_hook_gh", "the-new-secret", { overlapSeconds: 3600 });
    const sign = (secret: string, body: string) => ({ ...JSON_TYPE, "x-hub-signature-256": signHex(secret, body) });
    expect((await post(api, "hook-gh", '{"n":1}', sign(WEBHOOK_SECRETS.github, '{"n":1}'))).status).toBe(200);
    expect((await post(api, "hook-gh", '{"n":2}', sign("the-new-secret", '{"n":2}'))).status).toBe(200);
    api.clock.advance(3600_000 + 1);
    expect((await post(api, "hook-gh", '{"n":3}', sign(WEBHOOK_SECRETS.github, '{"n":3}'))).status).toBe(401);
    expect((await deliveries(api, "conn_hook_gh")).map((d) => [d.outcome, d.verifiedBy])).toEqual([
      ["refused", null],
      ["stored", "current"],
      ["stored", "previous"],
    ]);
  });

  it("records each refusal with the contract's reason: 413, 415, invalid body, too many columns, rate limit, missing signature; not an unknown endpoint", async () => {
    const api = await setup({ maxBodyBytes: 64 * 1024, webhookRatePerSecond: 3 });
    expect((await post(api, "hook-open", JSON.stringify({ pad: "x".repeat(70_000) }))).status).toBe(413);
    expect((await post(api, "hook-open", "a=1", { "content-type": "text/plain" })).status).toBe(415);
    expect((await post(api, "hook-open", "[1,2]")).status).toBe(400);
    const wide = JSON.stringify(
      Object.fromEntries(
        Array.from({ length: 120 }, (_, i) => [`f${i}`, { a: i, b: i, c: i, d: i, e: i, f: i, g: i, h: i, i: i }]),
      ),
    );
    const tooWide = await api.call("POST", "/api/webhooks/hook-open", { body: wide, headers: JSON_TYPE });
    expect(tooWide.status).toBe(400);
    expect(tooWide.json.error.details).toEqual({ reason: "too_many_columns", limit: 997 });
    // Burst of 6 at 3/s: the three above after the 413 (answered before the limit) and three more pass, the next is
    // 429.
    for (let n = 1; n <= 3; n++) expect((await post(api, "hook-open", `{"n":${n}}`)).status).toBe(200);
    expect((await post(api, "hook-open", '{"n":4}')).status).toBe(429);
    expect((await post(api, "hook-gh", '{"n":4}')).status).toBe(401);
    expect((await post(api, "nope", '{"n":5}')).status).toBe(404);

    const open = await deliveries(api, "conn_hook_open");
    expect(open.map((d) => [d.outcome, d.reason, d.status])).toEqual([
      ["refused", "rate_limited", 429],
      ["stored", null, 200],
      ["stored", null, 200],
      ["stored", null, 200],
      ["refused", "too_many_columns", 400],
      ["refused", "invalid_body", 400],
      ["refused", "unsupported_media_type", 415],
      ["refused", "body_too_large", 413],
    ]);
    // A body over the request limit is not read: none is kept, and it says so.
    expect(open[7]).toMatchObject({ bodyEncoding: null, bodyTruncated: true });
    expect((await deliveries(api, "conn_hook_gh")).map((d) => d.reason)).toEqual(["signature_missing"]);
  });

  it("keeps a refused body up to inboxBodyBytes, and a body that is not UTF-8 as base64", async () => {
    const api = await setup({ inboxBodyBytes: 16 });
    await post(api, "hook-open", '{"text":"0123456789abcdefghij"');
    const bytes = Buffer.from([0xff, 0xfe, 0x00, 0x01]);
    await api.api.fetch(
      new Request("http://dataport.test/api/webhooks/hook-open", { method: "POST", headers: JSON_TYPE, body: bytes }),
    );
    const [binary, cut] = await deliveries(api, "conn_hook_open");
    const admin = createAdmin(api.api);
    expect(await admin.getWebhookDelivery("conn_hook_open", cut!.id)).toMatchObject({
      body: '{"text":"0123456',
      bodyEncoding: "utf8",
      bodyTruncated: true,
    });
    expect(await admin.getWebhookDelivery("conn_hook_open", binary!.id)).toMatchObject({
      body: bytes.toString("base64"),
      bodyEncoding: "base64",
      bodyTruncated: false,
    });
  });

  it("keeps at most inboxSize deliveries per endpoint and none older than inboxDays", async () => {
    const api = await setup({ inboxSize: 5, inboxDays: 1, webhookRatePerSecond: 0 });
    for (let i = 0; i < 12; i++) expect((await post(api, "hook-open", `{"n":${i}}`)).status).toBe(200);
    const log = await deliveries(api, "conn_hook_open");
    expect(log).toHaveLength(5);
    expect(log.map((d) => d.rowId)).toEqual(
      (await api.call("GET", "/api/v1/datasets/ds_conn_hook_open/rows", { token: TOKENS.sessionAda })).json.data
        .slice(-5)
        .map((r: { _id: string }) => r._id)
        .reverse(),
    );
    api.clock.advance(86_400_000 + 1);
    expect(await deliveries(api, "conn_hook_open")).toEqual([]);
  });

  it("keeps a flood of bad signatures within its bounds, counts every refusal, and notes the ones it did not keep", async () => {
    const api = await setup({ inboxSize: 100, webhookRatePerSecond: 0 });
    const body = '{"n":1}';
    const bad = { ...JSON_TYPE, "x-hub-signature-256": signHex("wrong", body) };
    const flood = Array.from({ length: 400 }, () => post(api, "hook-gh", body, bad));
    // Another endpoint's deliveries are stored meanwhile.
    const others = Array.from({ length: 20 }, (_, i) => post(api, "hook-open", `{"n":${i}}`));
    expect((await Promise.all(flood)).every((r) => r.status === 401)).toBe(true);
    expect((await Promise.all(others)).every((r) => r.status === 200)).toBe(true);
    // The clock stands still: the burst is kept, the rest is counted.
    const kept = await deliveries(api, "conn_hook_gh");
    expect(kept).toHaveLength(KEPT_BURST);
    expect(kept.every((d) => d.suppressed === 0)).toBe(true);
    expect(await deliveries(api, "conn_hook_open")).toHaveLength(20);
    // A second later the next refusal is kept again and carries the count of those that were not.
    api.clock.advance(1000);
    await post(api, "hook-gh", body, bad);
    const [next] = await deliveries(api, "conn_hook_gh");
    expect(next!.suppressed).toBe(400 - KEPT_BURST);
    // Every refusal counts in the space's daily counts, kept or not.
    let row: Record<string, unknown> | undefined;
    // Counts alone are written within a second.
    for (let i = 0; i < 200 && row?.refused !== 401; i++) {
      await new Promise((resolve) => setTimeout(resolve, 30));
      const space = await api.call("GET", "/api/v1/space/webhook-deliveries?days=1&teamId=team_ops", {
        token: TOKENS.sessionAda,
      });
      expect(space.json).toMatchObject({ object: "webhook-deliveries" });
      row = space.json.rows.find((r: { connection_id: string }) => r.connection_id === "conn_hook_gh");
    }
    expect(row).toEqual({
      connection_id: "conn_hook_gh",
      connection: "Hook hook-gh",
      day: "2026-11-01",
      received: 401,
      stored: 0,
      duplicates: 0,
      refused: 401,
      refused_by_reason: { signature_invalid: 401 },
    });
  });
});

describe("the delivery log under a flood", () => {
  it("writes a bounded number of batches for thousands of refusals, and none per suppressed one", async () => {
    const api = await setup({ webhookRatePerSecond: 0 });
    const webhooks = api.api.ports.storage.webhooks;
    const record = webhooks.recordWebhookDeliveries.bind(webhooks);
    const batches: number[] = [];
    webhooks.recordWebhookDeliveries = (batch) => {
      batches.push(batch.refusals.length);
      return record(batch);
    };
    const body = '{"n":1}';
    const bad = { ...JSON_TYPE, "x-hub-signature-256": signHex("wrong", body) };
    const replies = await Promise.all(Array.from({ length: 2000 }, () => post(api, "hook-gh", body, bad)));
    expect(replies.every((r) => r.status === 401)).toBe(true);
    await deliveries(api, "conn_hook_gh");
    // The kept ones (the burst), in at most one write each; the 1,950 others only in the counters, written later in
    // one.
    expect(batches.reduce((a, b) => a + b, 0)).toBe(KEPT_BURST);
    expect(batches.length).toBeLessThanOrEqual(KEPT_BURST + 1);
  });
});

describe("the delivery log: what the host does with it", () => {
  it("lists, inspects and replays over /api/admin/v1: a 401 fixed by the right secret becomes a row, audited", async () => {
    const api = await setup();
    const admin = adminOf(api);
    const body = '{"id":"evt_9","total":3}';
    expect(
      (await post(api, "hook-gh", body, { ...JSON_TYPE, "x-hub-signature-256": signHex("rotated-too-early", body) }))
        .status,
    ).toBe(401);
    await deliveries(api, "conn_hook_gh");
    const page = await admin.connections.listDeliveries("conn_hook_gh", {
      outcome: "refused",
      reason: "signature_invalid",
    });
    expect(page).toMatchObject({ hasMore: false, nextCursor: null });
    const [refused] = page.data;
    expect(await admin.connections.getDelivery("conn_hook_gh", refused!.id)).toMatchObject({
      id: refused!.id,
      body,
      status: 401,
    });
    const replayed = await admin.connections.replayDelivery("conn_hook_gh", refused!.id);
    expect(replayed).toMatchObject({ outcome: "stored", status: 200, replayOf: refused!.id, deliveryKey: 'b:"evt_9"' });
    const rows = (await api.call("GET", "/api/v1/datasets/ds_conn_hook_gh/rows", { token: TOKENS.sessionAda })).json
      .data;
    expect(rows).toEqual([expect.objectContaining({ _id: replayed.rowId, id: "evt_9", total: 3 })]);
    // Again: de-duplication applies (the payload's id).
    expect(await admin.connections.replayDelivery("conn_hook_gh", refused!.id)).toMatchObject({
      outcome: "duplicate",
      rowId: replayed.rowId,
    });
    // The replays are in the log and on the audit record.
    expect((await admin.connections.listDeliveries("conn_hook_gh")).data.map((d) => [d.outcome, d.replayOf])).toEqual([
      ["duplicate", refused!.id],
      ["stored", refused!.id],
      ["refused", null],
    ]);
    const audit = (api.storage as MemoryStorage).state.auditLog.filter(
      (e) => e.event.action === "webhook.delivery.replayed",
    );
    expect(audit.map((e) => e.event.details)).toEqual([
      { deliveryId: refused!.id, replayId: replayed.id, outcome: "stored" },
      expect.objectContaining({ deliveryId: refused!.id, outcome: "duplicate" }),
    ]);
    // A stored delivery has no body to replay: 409; unknown ones 404.
    await expect(admin.connections.replayDelivery("conn_hook_gh", replayed.id)).rejects.toMatchObject({
      status: 409,
      code: "conflict",
    });
    await expect(admin.connections.getDelivery("conn_hook_gh", "whd_nope")).rejects.toMatchObject({ status: 404 });
    await expect(admin.connections.listDeliveries("conn_retail")).rejects.toMatchObject({ status: 404 });
  });

  it("replays in bulk, oldest first, and pages the log with a cursor", async () => {
    const api = await setup({ webhookRatePerSecond: 0 });
    const admin = adminOf(api);
    for (let i = 0; i < 5; i++) expect((await post(api, "hook-open", `{"n":${i}`)).status).toBe(400);
    await post(api, "hook-open", "x", { "content-type": "text/plain" });
    expect(await deliveries(api, "conn_hook_open")).toHaveLength(6);
    const first = await admin.connections.listDeliveries("conn_hook_open", { limit: 4 });
    expect(first.hasMore).toBe(true);
    const second = await admin.connections.listDeliveries("conn_hook_open", { limit: 4, cursor: first.nextCursor });
    expect(second).toMatchObject({ hasMore: false, nextCursor: null });
    expect(new Set([...first.data, ...second.data].map((d) => d.id)).size).toBe(6);
    await expect(admin.connections.listDeliveries("conn_hook_open", { cursor: "bogus" })).rejects.toMatchObject({
      status: 400,
      code: "invalid_parameter",
    });
    // Bodies that still do not parse are refused again, and recorded as replays.
    expect(await admin.connections.replayDeliveries("conn_hook_open", { reason: "invalid_body" })).toEqual({
      matched: 5,
      replayed: 5,
      stored: 0,
      duplicate: 0,
      refused: 5,
      skipped: 0,
    });
    await expect(
      admin.connections.replayDeliveries("conn_hook_open", { reason: "nope" } as never),
    ).rejects.toMatchObject({ status: 422 });
    await expect(admin.connections.replayDeliveries("conn_hook_open", { since: "yesterday" })).rejects.toMatchObject({
      status: 400,
    });
  });
});

describe("the webhook counters by connection", () => {
  it("label deliveries and refusals with their connection when the host opts in, bounded", async () => {
    const metrics = createPrometheusMetrics({ webhookConnectionLabel: { maxConnections: 1 } });
    const api = await setup({ metrics });
    await post(api, "hook-open", '{"n":1}');
    await post(api, "hook-gh", '{"n":1}');
    await post(api, "nope", '{"n":1}');
    const text = await metrics.registry.metrics();
    expect(text).toContain('dataport_webhook_deliveries_total{outcome="stored",connection="conn_hook_open"} 1');
    expect(text).toContain('dataport_webhook_rejections_total{reason="invalid_signature",connection="other"} 1');
    expect(text).toContain('dataport_webhook_rejections_total{reason="not_found",connection="unknown"} 1');
  });
});
