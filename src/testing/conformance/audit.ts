import { describe, expect, it } from "vitest";
import type { AuditCategory, AuditEvent } from "../../domain/model.js";
import { parseFixture } from "../../fixture/load.js";
import type { Storage } from "../../ports/storage.js";
import type { StoredAuditEvent } from "../../ports/storage/audit.js";
import { type ConformanceOptions, emptyStore, loadSpace, type StorageFactory } from "./harness.js";
import { conformanceFixture } from "./fixture.js";

/** The base fixture plus a second business and three host-written events, in file order. */
export function auditFixture() {
  const base = conformanceFixture();
  return {
    ...base,
    businesses: [...base.businesses, { id: "biz_2", name: "Contoso" }],
    teams: [
      ...base.teams,
      { id: "team_other", name: "Contoso ops", plan: "business", businessId: "biz_2", isPersonal: false },
    ],
    auditEvents: [
      event("evt_f1", "team_ops", "audit", "2026-10-01T09:00:00Z", { action: "dashboard.published" }),
      event("evt_f2", "team_other", "audit", "2026-10-01T09:30:00Z"),
      event("evt_f3", "team_mkt", "data_access", "2026-10-01T08:00:00Z", { action: "dataset.rows.read" }),
    ],
  };
}

export function event(
  id: string,
  teamId: string,
  category: AuditCategory,
  time: string,
  extra: Partial<AuditEvent> = {},
): AuditEvent {
  return {
    id,
    teamId,
    time,
    category,
    action: "dashboard.updated",
    actor: { type: "user", id: "usr_ada", email: "ada@northwind.test" },
    target: { type: "dashboard", id: "dash_1" },
    outcome: "success",
    ip: "203.0.113.7",
    userAgent: "Mozilla/5.0",
    ...extra,
  };
}

const BIZ_1 = ["team_mkt", "team_ops"];
const ALL_CATEGORIES: AuditCategory[] = ["audit", "data_access", "error"];
const T0 = Date.parse("2026-11-01T12:00:00Z");

type ReadQuery = Parameters<Storage["audit"]["readAuditEvents"]>[0];
const query = (over: Partial<ReadQuery> = {}): ReadQuery => ({
  teamIds: BIZ_1,
  categories: ALL_CATEGORIES,
  after: null,
  since: null,
  storedBefore: T0,
  limit: 1000,
  ...over,
});

/** Follow the feed page by page until hasMore is false; returns every event and the last position. */
async function drain(store: Storage, over: Partial<ReadQuery>, pageSize: number) {
  const seen: StoredAuditEvent[] = [];
  let after = over.after ?? null;
  for (let pages = 0; pages < 10_000; pages++) {
    const page = await store.audit.readAuditEvents(query({ ...over, after, limit: pageSize }));
    expect(page.events.length).toBeLessThanOrEqual(pageSize);
    seen.push(...page.events);
    if (page.events.length > 0) after = page.events.at(-1)!.position;
    if (!page.hasMore) return { seen, after };
    expect(page.events.length).toBe(pageSize);
  }
  throw new Error("the feed never reported hasMore: false");
}

const ids = (events: StoredAuditEvent[]) => events.map((e) => e.event.id);

export function describeAuditConformance(
  name: string,
  factory: StorageFactory,
  options: ConformanceOptions = {},
): void {
  describe.skipIf(!!options.skip)(`${name}: audit`, () => {
    const fresh = emptyStore(factory);
    const seeded = async () => {
      const store = await fresh();
      await loadSpace(store, parseFixture(auditFixture()), options);
      return store;
    };
    const everything = () => query({ teamIds: [...BIZ_1, "team_other"] });

    it("serves fixture events first, in file order, readable at any horizon, as they were written", async () => {
      const store = await seeded();
      const page = await store.audit.readAuditEvents(query({ storedBefore: 0 }));
      expect(ids(page.events)).toEqual(["evt_f1", "evt_f3"]);
      expect(page.hasMore).toBe(false);
      expect(page.events[0]!.event).toEqual(auditFixture().auditEvents[0]);
      expect(page.events[0]!.storedAt).toBe(0);
      for (const e of page.events) expect(store.audit.isAuditPosition(e.position)).toBe(true);
    });

    it("round-trips an appended event and its storedAt exactly", async () => {
      const store = await fresh();
      const written = event("evt_a", "team_ops", "error", "2026-11-01T11:59:59.123Z", {
        actor: null,
        target: null,
        outcome: "failure",
        ip: null,
        userAgent: null,
        details: { requestId: "r-1", nested: { list: [1, "two", null] } },
      });
      await store.audit.appendAuditEvent(written, T0 - 5000);
      const page = await store.audit.readAuditEvents(query());
      expect(page.events).toHaveLength(1);
      expect(page.events[0]!.event).toEqual(written);
      expect(page.events[0]!.storedAt).toBe(T0 - 5000);
    });

    it("pages with limit 2 from the start: every event exactly once, in stored order, hasMore until the end", async () => {
      const store = await seeded();
      for (let i = 1; i <= 7; i++)
        await store.audit.appendAuditEvent(
          event(`evt_${i}`, i % 2 ? "team_ops" : "team_mkt", "audit", `2026-11-01T10:0${i}:00Z`),
          T0 - 60_000 + i,
        );
      const { seen } = await drain(store, {}, 2);
      expect(ids(seen)).toEqual(["evt_f1", "evt_f3", "evt_1", "evt_2", "evt_3", "evt_4", "evt_5", "evt_6", "evt_7"]);
      expect(new Set(seen.map((e) => e.position)).size).toBe(seen.length);
      // Exactly a full last page: hasMore is false, not a promise of an empty page.
      const whole = await store.audit.readAuditEvents(query({ limit: 9 }));
      expect(whole.events).toHaveLength(9);
      expect(whole.hasMore).toBe(false);
      const part = await store.audit.readAuditEvents(query({ limit: 8 }));
      expect(part.hasMore).toBe(true);
    });

    it("an empty read after the end stays empty and says hasMore false", async () => {
      const store = await seeded();
      const { after } = await drain(store, {}, 10);
      const again = await store.audit.readAuditEvents(query({ after }));
      expect(again).toEqual({ events: [], hasMore: false });
    });

    it("delivers a back-dated event stored after the reader passed its timestamp, exactly once", async () => {
      const store = await fresh();
      await store.audit.appendAuditEvent(event("evt_1", "team_ops", "audit", "2026-11-01T11:00:00Z"), T0 - 30_000);
      await store.audit.appendAuditEvent(event("evt_2", "team_ops", "audit", "2026-11-01T11:30:00Z"), T0 - 20_000);
      const first = await drain(store, {}, 10);
      expect(ids(first.seen)).toEqual(["evt_1", "evt_2"]);
      // A slow writer stamped this an hour before anything already read.
      await store.audit.appendAuditEvent(event("evt_late", "team_ops", "audit", "2026-11-01T10:00:00Z"), T0 - 10_000);
      const second = await drain(store, { after: first.after }, 10);
      expect(ids(second.seen)).toEqual(["evt_late"]);
      const third = await store.audit.readAuditEvents(query({ after: second.after }));
      expect(third.events).toEqual([]);
    });

    it("holds back events stored after storedBefore (inclusive bound) and delivers them once the horizon passes", async () => {
      const store = await fresh();
      await store.audit.appendAuditEvent(event("evt_old", "team_ops", "audit", "2026-11-01T11:59:00Z"), T0 - 5000);
      await store.audit.appendAuditEvent(event("evt_edge", "team_ops", "audit", "2026-11-01T11:59:01Z"), T0 - 4000);
      await store.audit.appendAuditEvent(event("evt_young", "team_ops", "audit", "2026-11-01T11:59:02Z"), T0 - 3000);
      const now = await store.audit.readAuditEvents(query({ storedBefore: T0 - 4000 }));
      expect(ids(now.events)).toEqual(["evt_old", "evt_edge"]);
      expect(now.hasMore).toBe(false);
      const later = await store.audit.readAuditEvents(query({ storedBefore: T0, after: now.events.at(-1)!.position }));
      expect(ids(later.events)).toEqual(["evt_young"]);
    });

    it("stops at the first held-back event even when later positions were stored earlier (writer clock skew)", async () => {
      const store = await fresh();
      await store.audit.appendAuditEvent(event("evt_1", "team_ops", "audit", "2026-11-01T11:00:00Z"), T0 - 9000);
      await store.audit.appendAuditEvent(event("evt_skewed", "team_ops", "audit", "2026-11-01T11:00:01Z"), T0 - 1000);
      // Stored after evt_skewed by a writer whose clock runs behind.
      await store.audit.appendAuditEvent(event("evt_3", "team_ops", "audit", "2026-11-01T11:00:02Z"), T0 - 8000);
      await store.audit.appendAuditEvent(
        event("evt_other_team", "team_other", "audit", "2026-11-01T11:00:03Z"),
        T0 - 500,
      );
      const page = await store.audit.readAuditEvents(query({ storedBefore: T0 - 5000 }));
      expect(ids(page.events)).toEqual(["evt_1"]);
      expect(page.hasMore).toBe(false);
      const rest = await drain(store, { after: page.events[0]!.position, storedBefore: T0 }, 1);
      expect(ids(rest.seen)).toEqual(["evt_skewed", "evt_3"]);
    });

    it("a held-back event of another team or category also stops the read", async () => {
      const store = await fresh();
      await store.audit.appendAuditEvent(event("evt_1", "team_ops", "audit", "2026-11-01T11:00:00Z"), T0 - 9000);
      await store.audit.appendAuditEvent(
        event("evt_young_other", "team_other", "error", "2026-11-01T11:00:01Z"),
        T0 + 1000,
      );
      await store.audit.appendAuditEvent(event("evt_3", "team_ops", "audit", "2026-11-01T11:00:02Z"), T0 - 8000);
      const page = await store.audit.readAuditEvents(query({ categories: ["audit"] }));
      expect(ids(page.events)).toEqual(["evt_1"]);
      expect(page.hasMore).toBe(false);
      const later = await store.audit.readAuditEvents(
        query({ categories: ["audit"], after: page.events[0]!.position, storedBefore: T0 + 1000 }),
      );
      expect(ids(later.events)).toEqual(["evt_3"]);
    });

    it("filters by team and category; an empty team list reads nothing", async () => {
      const store = await seeded();
      await store.audit.appendAuditEvent(event("evt_err", "team_ops", "error", "2026-11-01T11:00:00Z"), T0 - 9000);
      await store.audit.appendAuditEvent(
        event("evt_read", "team_mkt", "data_access", "2026-11-01T11:00:00Z"),
        T0 - 9000,
      );
      await store.audit.appendAuditEvent(
        event("evt_elsewhere", "team_other", "audit", "2026-11-01T11:00:00Z"),
        T0 - 9000,
      );
      expect(ids((await store.audit.readAuditEvents(query({ categories: ["audit"] }))).events)).toEqual(["evt_f1"]);
      expect(ids((await store.audit.readAuditEvents(query({ categories: ["audit", "error"] }))).events)).toEqual([
        "evt_f1",
        "evt_err",
      ]);
      expect(ids((await store.audit.readAuditEvents(query({ categories: ["data_access"] }))).events)).toEqual([
        "evt_f3",
        "evt_read",
      ]);
      expect(ids((await store.audit.readAuditEvents(query({ teamIds: ["team_other"] }))).events)).toEqual([
        "evt_f2",
        "evt_elsewhere",
      ]);
      expect(
        ids(
          (await store.audit.readAuditEvents(query({ teamIds: ["team_ops"], categories: ["audit", "data_access"] })))
            .events,
        ),
      ).toEqual(["evt_f1"]);
      expect(await store.audit.readAuditEvents(query({ teamIds: [] }))).toEqual({ events: [], hasMore: false });
    });

    it("hasMore counts only matching events", async () => {
      const store = await fresh();
      await store.audit.appendAuditEvent(event("evt_1", "team_ops", "audit", "2026-11-01T11:00:00Z"), T0 - 9000);
      await store.audit.appendAuditEvent(event("evt_2", "team_ops", "data_access", "2026-11-01T11:00:00Z"), T0 - 9000);
      await store.audit.appendAuditEvent(event("evt_3", "team_other", "audit", "2026-11-01T11:00:00Z"), T0 - 9000);
      const page = await store.audit.readAuditEvents(query({ categories: ["audit"], limit: 1 }));
      expect(ids(page.events)).toEqual(["evt_1"]);
      expect(page.hasMore).toBe(false);
    });

    it("since keeps events whose writer time is at or after it, compared as instants", async () => {
      const store = await seeded();
      await store.audit.appendAuditEvent(
        event("evt_before", "team_ops", "audit", "2026-10-31T23:59:59.999Z"),
        T0 - 9000,
      );
      await store.audit.appendAuditEvent(event("evt_at", "team_ops", "audit", "2026-11-01T00:00:00Z"), T0 - 9000);
      await store.audit.appendAuditEvent(
        event("evt_offset", "team_ops", "audit", "2026-11-01T02:00:00+01:00"),
        T0 - 9000,
      );
      await store.audit.appendAuditEvent(
        event("evt_offset_before", "team_ops", "audit", "2026-11-01T00:30:00+01:00"),
        T0 - 9000,
      );
      const page = await store.audit.readAuditEvents(query({ since: "2026-11-01T00:00:00.000Z" }));
      expect(ids(page.events)).toEqual(["evt_at", "evt_offset"]);
      const paged = await drain(store, { since: "2026-11-01T00:00:00.000Z" }, 1);
      expect(ids(paged.seen)).toEqual(["evt_at", "evt_offset"]);
    });

    it("continues from a position returned under other filters: positions are one sequence for the whole log", async () => {
      const store = await seeded();
      await store.audit.appendAuditEvent(event("evt_1", "team_ops", "audit", "2026-11-01T11:00:00Z"), T0 - 9000);
      await store.audit.appendAuditEvent(event("evt_2", "team_other", "audit", "2026-11-01T11:00:00Z"), T0 - 9000);
      await store.audit.appendAuditEvent(event("evt_3", "team_ops", "audit", "2026-11-01T11:00:00Z"), T0 - 9000);
      const other = await store.audit.readAuditEvents(query({ teamIds: ["team_other"] }));
      expect(ids(other.events)).toEqual(["evt_f2", "evt_2"]);
      const next = await store.audit.readAuditEvents(
        query({ teamIds: ["team_ops"], after: other.events[1]!.position }),
      );
      expect(ids(next.events)).toEqual(["evt_3"]);
    });

    it("never reuses positions and validates them", async () => {
      const store = await seeded();
      const positions = new Set<string>();
      for (let round = 0; round < 3; round++) {
        await store.audit.appendAuditEvent(
          event(`evt_${round}`, "team_ops", "audit", "2026-11-01T11:00:00Z"),
          T0 - 9000,
        );
        const all = await store.audit.readAuditEvents(query({ teamIds: [...BIZ_1, "team_other"] }));
        for (const e of all.events) {
          positions.add(e.position);
          expect(store.audit.isAuditPosition(e.position)).toBe(true);
        }
        expect(positions.size).toBe(4 + round);
      }
      for (const bad of ["", " ", "not a position", "1 2", "x".repeat(101)])
        expect(store.audit.isAuditPosition(bad)).toBe(false);
    });

    it("concurrent appends while a reader polls: every event delivered exactly once", async () => {
      const store = await fresh();
      const total = 60;
      const delivered: string[] = [];
      let after: string | null = null;
      let writing = true;
      const writers = Promise.all(
        Array.from({ length: total }, (_, i) =>
          store.audit.appendAuditEvent(
            event(
              `evt_${i}`,
              i % 3 ? "team_ops" : "team_mkt",
              "audit",
              `2026-11-01T11:00:${String(i % 60).padStart(2, "0")}Z`,
            ),
            T0 - 9000,
          ),
        ),
      ).finally(() => {
        writing = false;
      });
      const poller = (async () => {
        while (writing) {
          const page = await store.audit.readAuditEvents(query({ after, limit: 7 }));
          delivered.push(...ids(page.events));
          if (page.events.length > 0) after = page.events.at(-1)!.position;
          await new Promise((resolve) => setImmediate(resolve));
        }
      })();
      await Promise.all([writers, poller]);
      // Every event must arrive exactly once, but a store may hold committed
      // events back while an older writing transaction anywhere on its server
      // is still open (PostgreSQL's xid gate): keep draining for a while.
      const deadline = Date.now() + 15_000;
      for (;;) {
        const rest = await drain(store, { after }, 7);
        delivered.push(...ids(rest.seen));
        after = rest.after;
        if (delivered.length >= total || Date.now() > deadline) break;
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      expect(delivered).toHaveLength(total);
      expect(new Set(delivered).size).toBe(total);
    });

    it("refuses an event whose id is stored (seeded ones included), storing nothing", async () => {
      const store = await seeded();
      await store.audit.appendAuditEvent(event("evt_1", "team_ops", "audit", "2026-11-01T11:00:00Z"), T0 - 9000);
      await expect(
        store.audit.appendAuditEvent(event("evt_1", "team_mkt", "error", "2026-11-01T11:30:00Z"), T0 - 8000),
      ).rejects.toThrow();
      await expect(
        store.audit.appendAuditEvent(event("evt_f2", "team_ops", "audit", "2026-11-01T11:30:00Z"), T0 - 8000),
      ).rejects.toThrow();
      const page = await store.audit.readAuditEvents(everything());
      expect(ids(page.events)).toEqual(["evt_f1", "evt_f2", "evt_f3", "evt_1"]);
      expect(page.events[3]!.event).toEqual(event("evt_1", "team_ops", "audit", "2026-11-01T11:00:00Z"));
      expect(page.events[1]!.event.teamId).toBe("team_other");
    });

    it("appends a batch in order, skipping ids already stored, and answers how many it stored", async () => {
      const store = await seeded();
      await store.audit.appendAuditEvent(event("evt_1", "team_ops", "audit", "2026-11-01T11:00:00Z"), T0 - 9000);
      const batch = [
        event("evt_b1", "team_ops", "audit", "2026-11-01T10:00:00Z"),
        event("evt_1", "team_ops", "error", "2026-11-01T10:01:00Z"),
        event("evt_f1", "team_mkt", "audit", "2026-11-01T10:02:00Z"),
        event("evt_b2", "team_mkt", "data_access", "2026-11-01T09:00:00Z", { details: { rows: 3 } }),
        // Twice in one batch: the first is stored, the second then finds its id taken.
        event("evt_b3", "team_ops", "audit", "2026-11-01T10:03:00Z", { action: "first" }),
        event("evt_b3", "team_ops", "audit", "2026-11-01T10:04:00Z", { action: "second" }),
      ];
      expect(await store.audit.appendAuditEvents(batch, T0 - 5000)).toBe(3);
      const page = await store.audit.readAuditEvents(everything());
      expect(ids(page.events)).toEqual(["evt_f1", "evt_f2", "evt_f3", "evt_1", "evt_b1", "evt_b2", "evt_b3"]);
      expect(page.events.slice(4).map((e) => [e.event, e.storedAt])).toEqual([
        [batch[0], T0 - 5000],
        [batch[3], T0 - 5000],
        [batch[4], T0 - 5000],
      ]);
      // The stored event is the one first stored, not the batch's copy with the same id.
      expect(page.events[0]!.event).toEqual(auditFixture().auditEvents[0]);
      expect(page.events[3]!.event.category).toBe("audit");
      expect(await store.audit.appendAuditEvents(batch, T0)).toBe(0);
      expect(await store.audit.appendAuditEvents([], T0)).toBe(0);
      await expect(store.audit.appendAuditEvent(batch[3]!, T0)).rejects.toThrow();
      expect((await store.audit.readAuditEvents(everything())).events).toHaveLength(7);
    });

    it("a batch's events are readable at the horizon of their storedAt, in batch order, each at its own position", async () => {
      const store = await fresh();
      const batch = Array.from({ length: 5 }, (_, i) =>
        event(`evt_${i}`, "team_ops", "audit", `2026-11-01T10:0${i}:00Z`),
      );
      expect(await store.audit.appendAuditEvents(batch, T0 - 1000)).toBe(5);
      expect(await store.audit.readAuditEvents(query({ storedBefore: T0 - 1001 }))).toEqual({
        events: [],
        hasMore: false,
      });
      const { seen } = await drain(store, { storedBefore: T0 - 1000 }, 2);
      expect(ids(seen)).toEqual(["evt_0", "evt_1", "evt_2", "evt_3", "evt_4"]);
      expect(new Set(seen.map((e) => e.position)).size).toBe(5);
    });

    it("of concurrent appends of one id, exactly one stores it", async () => {
      const store = await fresh();
      const single = await Promise.allSettled(
        Array.from({ length: 10 }, () =>
          store.audit.appendAuditEvent(event("evt_once", "team_ops", "audit", "2026-11-01T11:00:00Z"), T0 - 9000),
        ),
      );
      expect(single.filter((r) => r.status === "fulfilled")).toHaveLength(1);
      // Ten overlapping batches over eight ids: eight stored in all.
      const batches = Array.from({ length: 10 }, (_, i) =>
        Array.from({ length: 4 }, (_, j) => event(`evt_b${(i + j) % 8}`, "team_ops", "audit", "2026-11-01T11:00:00Z")),
      );
      const counts = await Promise.all(batches.map((batch) => store.audit.appendAuditEvents(batch, T0 - 9000)));
      expect(counts.reduce((a, b) => a + b, 0)).toBe(8);
      const page = await store.audit.readAuditEvents(query());
      expect(page.events).toHaveLength(9);
      expect(new Set(ids(page.events)).size).toBe(9);
    });
  });
}
