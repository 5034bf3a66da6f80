import { afterEach, describe, expect, it } from "vitest";
import type { Row } from "../../domain/model.js";
import type { DeliveryDetail, DeliveryLogQuery, InboxKeep, RefusalLogInput } from "../../domain/webhook-inbox.js";
import { parseFixture } from "../../fixture/load.js";
import type { Storage } from "../../ports/storage.js";
import { type ConformanceOptions, loadSpace, type StorageFactory } from "./harness.js";
import { webhookFixture } from "./webhooks.js";

const T0 = Date.parse("2026-11-01T12:00:00.000Z");
const at = (seconds: number) => new Date(T0 + seconds * 1000).toISOString();
/** Keep everything of the last week as of T0 + 1 h. */
const KEEP: InboxKeep = { size: 1000, afterMs: T0 - 7 * 86_400_000 };

function detail(extra: Partial<DeliveryDetail> = {}): DeliveryDetail {
  return {
    sourceIp: "203.0.113.9",
    deliveryKey: null,
    headers: { "content-type": "application/json", authorization: "[redacted]", "x-hub-signature-256": "sha256=00" },
    body: null,
    bodyEncoding: null,
    bodyTruncated: false,
    contentType: "application/json",
    verifiedBy: null,
    suppressed: 0,
    replayOf: null,
    ...extra,
  };
}

function refusal(id: string, seconds: number, extra: Partial<RefusalLogInput> = {}): RefusalLogInput {
  return {
    id,
    connectionId: "conn_hook_gh",
    receivedAt: at(seconds),
    reason: "signature_invalid",
    status: 401,
    detail: detail({ body: '{"n":"\u0000 \u{1F600} \\"}', bodyEncoding: "utf8" }),
    ...extra,
  };
}

function row(id: string): Row {
  const out: Row = Object.create(null);
  out._id = id;
  out.n = 1;
  return out;
}

function deliver(
  store: Storage,
  id: string,
  seconds: number,
  options: { dedupKey?: string; keep?: InboxKeep; connectionId?: string; datasetId?: string } = {},
) {
  const receivedAt = at(seconds);
  return store.webhooks.ingestWebhookRow({
    datasetId: options.datasetId ?? "ds_conn_hook_gh",
    dedupKey: options.dedupKey ?? null,
    row: row(`row_${id}`),
    columns: [
      { name: "_id", type: "string" },
      { name: "n", type: "number" },
    ],
    retainRows: 10_000,
    receivedAt,
    log: {
      id,
      connectionId: options.connectionId ?? "conn_hook_gh",
      receivedAt,
      detail: detail({ deliveryKey: options.dedupKey ?? null, verifiedBy: "current" }),
      keep: options.keep ?? KEEP,
    },
  });
}

const query = (extra: Partial<DeliveryLogQuery> = {}): DeliveryLogQuery => ({
  limit: 100,
  order: "newest",
  keep: KEEP,
  ...extra,
});

const ids = async (store: Storage, extra: Partial<DeliveryLogQuery> = {}, connectionId = "conn_hook_gh") =>
  (await store.webhooks.listWebhookDeliveries(connectionId, query(extra))).map((e) => e.id);

/**
 * The delivery log (webhook-inbox.md) on `WebhookStore`: entries written with
 * a delivery or in refusal batches, filters and order, the bounds, the daily
 * counters, and (with `ConformanceOptions.sameDatabase`) two instances on one database.
 */
export function describeWebhookLogConformance(
  name: string,
  factory: StorageFactory,
  options: ConformanceOptions = {},
): void {
  describe.skipIf(!!options.skip)(`${name}: webhook delivery log`, () => {
    const open: Storage[] = [];
    afterEach(async () => {
      await Promise.all(
        open
          .splice(0)
          .reverse()
          .map((s) => s.close()),
      );
    });
    const seeded = async () => {
      const store = await factory();
      open.push(store);
      await loadSpace(store, parseFixture(webhookFixture()), options);
      return store;
    };

    it("records a stored and a duplicate delivery with the delivery, and refusals in batches, newest first", async () => {
      const store = await seeded();
      expect(await deliver(store, "whd_1", 1, { dedupKey: "h:a" })).toEqual({ id: "row_whd_1", duplicate: false });
      expect(await deliver(store, "whd_2", 2, { dedupKey: "h:a" })).toEqual({ id: "row_whd_1", duplicate: true });
      await store.webhooks.recordWebhookDeliveries({
        refusals: [
          refusal("whd_3", 3),
          refusal("whd_4", 4, { reason: "rate_limited", status: 429, detail: detail({ suppressed: 7 }) }),
        ],
        counts: [],
        keep: KEEP,
      });
      const entries = await store.webhooks.listWebhookDeliveries("conn_hook_gh", query());
      expect(entries.map((e) => [e.id, e.outcome, e.reason, e.status, e.rowId])).toEqual([
        ["whd_4", "refused", "rate_limited", 429, null],
        ["whd_3", "refused", "signature_invalid", 401, null],
        ["whd_2", "duplicate", null, 200, "row_whd_1"],
        ["whd_1", "stored", null, 200, "row_whd_1"],
      ]);
      expect(entries[0]!.detail.suppressed).toBe(7);
      for (let i = 1; i < entries.length; i++) expect(entries[i - 1]!.seq).toBeGreaterThan(entries[i]!.seq);
      const one = await store.webhooks.getWebhookDelivery("conn_hook_gh", "whd_3", KEEP);
      expect(one).toEqual({
        seq: entries[1]!.seq,
        id: "whd_3",
        connectionId: "conn_hook_gh",
        receivedAt: at(3),
        outcome: "refused",
        reason: "signature_invalid",
        status: 401,
        rowId: null,
        detail: detail({ body: '{"n":"\u0000 \u{1F600} \\"}', bodyEncoding: "utf8" }),
      });
      expect((await store.webhooks.getWebhookDelivery("conn_hook_gh", "whd_1", KEEP))!.detail).toMatchObject({
        deliveryKey: "h:a",
        verifiedBy: "current",
      });
      // Per connection: another endpoint's log and an unknown id answer nothing.
      expect(await ids(store, {}, "conn_hook_open")).toEqual([]);
      expect(await store.webhooks.getWebhookDelivery("conn_hook_open", "whd_3", KEEP)).toBeNull();
      expect(await store.webhooks.getWebhookDelivery("conn_hook_gh", "whd_nope", KEEP)).toBeNull();
    });

    it("filters by outcome, reason and time, pages by seq, and serves oldest first", async () => {
      const store = await seeded();
      await deliver(store, "whd_1", 10);
      await store.webhooks.recordWebhookDeliveries({
        refusals: [
          refusal("whd_2", 20),
          refusal("whd_3", 30, { reason: "invalid_body", status: 400 }),
          refusal("whd_4", 40),
        ],
        counts: [],
        keep: KEEP,
      });
      await deliver(store, "whd_5", 50);
      expect(await ids(store, { outcome: "refused" })).toEqual(["whd_4", "whd_3", "whd_2"]);
      expect(await ids(store, { outcome: "stored" })).toEqual(["whd_5", "whd_1"]);
      expect(await ids(store, { reason: "signature_invalid" })).toEqual(["whd_4", "whd_2"]);
      expect(await ids(store, { since: at(20), until: at(40) })).toEqual(["whd_3", "whd_2"]);
      expect(await ids(store, { order: "oldest", outcome: "refused", limit: 2 })).toEqual(["whd_2", "whd_3"]);
      const first = await store.webhooks.listWebhookDeliveries("conn_hook_gh", query({ limit: 2 }));
      expect(first.map((e) => e.id)).toEqual(["whd_5", "whd_4"]);
      expect(await ids(store, { limit: 2, beforeSeq: first[1]!.seq })).toEqual(["whd_3", "whd_2"]);
    });

    it("keeps the newest `size` entries and none older than the bound, and does not grow far past them", async () => {
      const store = await seeded();
      const keep: InboxKeep = { size: 10, afterMs: T0 };
      for (let i = 0; i < 150; i++) await deliver(store, `whd_s${i}`, 1 + i, { keep });
      for (let b = 0; b < 5; b++) {
        const refusals = Array.from({ length: 30 }, (_, i) => refusal(`whd_r${b * 30 + i}`, 200 + b * 30 + i));
        await store.webhooks.recordWebhookDeliveries({ refusals, counts: [], keep });
      }
      expect(await ids(store, { keep })).toEqual(Array.from({ length: 10 }, (_, i) => `whd_r${149 - i}`));
      expect(await store.webhooks.getWebhookDelivery("conn_hook_gh", "whd_r139", keep)).toBeNull();
      expect(await store.webhooks.getWebhookDelivery("conn_hook_gh", "whd_r140", keep)).not.toBeNull();
      // What is still held past the bound (a store may trim every so many writes): at most 128 more.
      const held = await ids(store, { keep: { size: 1000, afterMs: 0 }, limit: 1000 });
      expect(held.length).toBeGreaterThanOrEqual(10);
      expect(held.length).toBeLessThanOrEqual(10 + 128);
      // Age: an entry received before the bound is not served, whatever the size.
      const recent: InboxKeep = { size: 1000, afterMs: Date.parse(at(345)) };
      expect(await ids(store, { keep: recent })).toEqual(["whd_r149", "whd_r148", "whd_r147", "whd_r146", "whd_r145"]);
    });

    it("adds up the daily counters of a team's connections, with each connection's name", async () => {
      const store = await seeded();
      await deliver(store, "whd_1", 1, { dedupKey: "h:x" });
      await deliver(store, "whd_2", 2, { dedupKey: "h:x" });
      await deliver(store, "whd_3", 86_400 + 5);
      await store.webhooks.recordWebhookDeliveries({
        refusals: [refusal("whd_4", 3)],
        counts: [
          { connectionId: "conn_hook_gh", day: "2026-11-01", kind: "refused:signature_invalid", n: 1 },
          { connectionId: "conn_hook_gh", day: "2026-11-01", kind: "refused:signature_invalid", n: 40 },
          { connectionId: "conn_hook_open", day: "2026-11-01", kind: "refused:rate_limited", n: 2 },
        ],
        keep: KEEP,
      });
      const counts = await store.webhooks.webhookDeliveryCounts({
        teamId: "team_ops",
        fromDay: "2026-11-01",
        toDay: "2026-11-01",
      });
      const sorted = counts
        .map((c) => [c.connectionId, c.connection, c.day, c.kind, c.n])
        .sort((a, b) => String(a).localeCompare(String(b)));
      expect(sorted).toEqual([
        ["conn_hook_gh", "Hook hook-gh", "2026-11-01", "duplicate", 1],
        ["conn_hook_gh", "Hook hook-gh", "2026-11-01", "refused:signature_invalid", 41],
        ["conn_hook_gh", "Hook hook-gh", "2026-11-01", "stored", 1],
        ["conn_hook_open", "Hook hook-open", "2026-11-01", "refused:rate_limited", 2],
      ]);
      const next = await store.webhooks.webhookDeliveryCounts({
        teamId: "team_ops",
        fromDay: "2026-11-02",
        toDay: "2026-11-09",
      });
      expect(next.map((c) => [c.connectionId, c.day, c.kind, c.n])).toEqual([
        ["conn_hook_gh", "2026-11-02", "stored", 1],
      ]);
      expect(
        await store.webhooks.webhookDeliveryCounts({
          teamId: "team_growth",
          fromDay: "2026-11-01",
          toDay: "2026-11-09",
        }),
      ).toEqual([]);
    });

    it.skipIf(!options.sameDatabase)(
      "shares one log and one set of counters between two instances on one database",
      async () => {
        const a = await seeded();
        const b = await options.sameDatabase!(a);
        open.push(b);
        const written: Promise<unknown>[] = [];
        for (let i = 0; i < 20; i++) {
          const store = i % 2 === 0 ? a : b;
          written.push(deliver(store, `whd_${i}`, 1 + i, { dedupKey: `h:${i % 5}` }));
          written.push(
            store.webhooks.recordWebhookDeliveries({ refusals: [refusal(`whd_r${i}`, 1 + i)], counts: [], keep: KEEP }),
          );
        }
        await Promise.all(written);
        for (const store of [a, b]) {
          const entries = await store.webhooks.listWebhookDeliveries("conn_hook_gh", query());
          expect(entries).toHaveLength(40);
          expect(new Set(entries.map((e) => e.seq)).size).toBe(40);
          expect(entries.filter((e) => e.outcome === "stored")).toHaveLength(5);
          expect(entries.filter((e) => e.outcome === "duplicate")).toHaveLength(15);
          expect(entries.filter((e) => e.outcome === "refused")).toHaveLength(20);
        }
        const counts = await b.webhooks.webhookDeliveryCounts({
          teamId: "team_ops",
          fromDay: "2026-11-01",
          toDay: "2026-11-01",
        });
        expect(Object.fromEntries(counts.map((c) => [c.kind, c.n]))).toEqual({ stored: 5, duplicate: 15 });
      },
    );
  });
}
