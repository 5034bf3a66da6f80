import { describe, expect, it } from "vitest";
import { parseFixture } from "../src/fixture/load.js";
import { createMemoryStorage } from "../src/memory/memory-storage.js";
import { testFixture } from "./support/fixture.js";

describe("memory store", () => {
  const all = { offset: 0, limit: null, columns: null, filters: null };

  it("a page stopped early keeps the key of the last row handed over, stays done, and hands over copies", async () => {
    const storage = createMemoryStorage();
    await storage.seed(parseFixture(testFixture()));
    const plain = await storage.rows.readDatasetRows("ds_orders", { ...all, offset: 1, limit: 3 });
    expect(plain.lastKey()).toBeNull();
    const iterator = plain.rows[Symbol.asyncIterator]();
    const first = (await iterator.next()).value;
    expect(first).toEqual({ order_id: "A-2", amount: 30, region: "AMER" });
    first.order_id = "changed";
    expect((await iterator.next()).value.order_id).toBe("A-3");
    expect(plain.lastKey()).toEqual({ values: [], position: 2 });
    await iterator.return!();
    expect(await iterator.next()).toEqual({ done: true, value: undefined });
    expect(plain.lastKey()).toEqual({ values: [], position: 2 });

    const filtered = await storage.rows.readDatasetRows("ds_orders", {
      ...all,
      offset: 1,
      filters: { region: "EMEA" },
    });
    for await (const row of filtered.rows) {
      expect(row.order_id).toBe("A-3");
      break;
    }
    expect(filtered.lastKey()).toEqual({ values: [], position: 2 });

    const sorted = await storage.rows.readDatasetRows("ds_orders", {
      ...all,
      sort: [{ column: "amount", descending: true }],
    });
    const seen: unknown[] = [];
    for await (const row of sorted.rows) {
      seen.push(row.order_id);
      if (seen.length === 2) break;
    }
    expect(seen).toEqual(["A-4", "A-2"]);
    expect(sorted.lastKey()).toEqual({ values: [30], position: 1 });

    const again = await storage.rows.readDatasetRows("ds_orders", { ...all, limit: 1 });
    for await (const row of again.rows) expect(row.order_id).toBe("A-1");
    const rest = await storage.rows.readDatasetRows("ds_orders", { ...all, offset: 1, limit: 1 });
    for await (const row of rest.rows) expect(row.order_id).toBe("A-2");
    expect((await storage.rows.readDatasetRows("ds_orders", { ...all, limit: 0 })).lastKey()).toBeNull();
  });

  it("a streaming read neither skips nor repeats rows when retention trims the front under it", async () => {
    const storage = createMemoryStorage();
    await storage.seed(parseFixture(testFixture()));
    const page = await storage.rows.readDatasetRows("ds_orders", {
      offset: 0,
      limit: null,
      columns: ["order_id"],
      filters: null,
    });
    const iterator = page.rows[Symbol.asyncIterator]();
    const seen: unknown[] = [];
    for (let i = 0; i < 2; i++) seen.push((await iterator.next()).value.order_id);
    for (const id of ["N-1", "N-2"]) {
      await storage.webhooks.ingestWebhookRow({
        datasetId: "ds_orders",
        dedupKey: null,
        row: { _id: id, order_id: id },
        columns: [],
        retainRows: 5,
        receivedAt: "2026-11-01T00:00:00.000Z",
      });
    }
    for (;;) {
      const next = await iterator.next();
      if (next.done) break;
      seen.push(next.value.order_id);
    }
    expect(seen).toEqual(["A-1", "A-2", "A-3", "A-4", "A-5", "N-1", "N-2"]);
  });

  it("retention's trimmed rows leave its array many at a time: reads, counts, keys and appends see only the window", async () => {
    const storage = createMemoryStorage();
    await storage.seed(parseFixture(testFixture()));
    const ids = (page: { rows: AsyncIterable<Record<string, unknown>> }) =>
      (async () => {
        const out: unknown[] = [];
        for await (const row of page.rows) out.push(row._id);
        return out;
      })();
    const deliver = (i: number, dedupKey: string | null = `k${i}`) =>
      storage.webhooks.ingestWebhookRow({
        datasetId: "ds_orders",
        dedupKey,
        row: { _id: `N-${i}`, n: i, even: i % 2 === 0 },
        columns: [],
        retainRows: 10,
        receivedAt: "2026-11-01T00:00:00.000Z",
      });
    // A streaming read started before many trims (several drops of the trimmed rows) goes on where it was.
    const early = await storage.rows.readDatasetRows("ds_orders", { ...all, limit: null });
    const earlyRows = early.rows[Symbol.asyncIterator]();
    await earlyRows.next();
    for (let i = 0; i < 200; i++) {
      await deliver(i);
      // The fixture's five rows go first; from the tenth delivery on the window is deliveries only.
      const expected = Array.from({ length: 10 }, (_, k) => `N-${i - 9 + k}`);
      const page = await storage.rows.readDatasetRows("ds_orders", { ...all, limit: null });
      if (i >= 9) {
        expect(page.totalRows).toBe(10);
        expect(await ids(page)).toEqual(expected);
        const offset = await storage.rows.readDatasetRows("ds_orders", { ...all, offset: 3, limit: 2 });
        expect(await ids(offset)).toEqual(expected.slice(3, 5));
        const filtered = await storage.rows.readDatasetRows("ds_orders", { ...all, filters: { even: true } });
        expect(filtered.totalRows).toBe(5);
        expect((await storage.catalog.getDataset("ds_orders"))?.rowCount).toBe(10);
      }
    }
    const rest: unknown[] = [];
    for (let next = await earlyRows.next(); !next.done; next = await earlyRows.next()) rest.push(next.value._id);
    expect(rest).toEqual(Array.from({ length: 10 }, (_, k) => `N-${190 + k}`));
    // A trimmed row's key is free again; a retained one's is not.
    expect(await deliver(1000, "k150")).toEqual({ id: "N-1000", duplicate: false });
    expect(await deliver(1001, "k199")).toEqual({ id: "N-199", duplicate: true });
    // A sorted read and an append start from the window too.
    const sorted = await storage.rows.readDatasetRows("ds_orders", {
      ...all,
      sort: [{ column: "n", descending: false }],
    });
    expect((await ids(sorted)).slice(0, 2)).toEqual(["N-191", "N-192"]);
  });

  it("counts API calls per day, team, method, route and credential, today's and earlier days' alike", async () => {
    const storage = createMemoryStorage();
    await storage.seed(parseFixture(testFixture()));
    const base = {
      teamId: "team_ops",
      credentialKind: "api-key" as const,
      credentialId: "key_sync",
      route: "/api/v1/me",
      objectId: null,
    };
    const calls = [
      {
        ...base,
        at: "2026-11-02T09:00:00.000Z",
        credentialName: "Warehouse sync",
        method: "GET",
        status: 200,
        latencyMs: 4,
      },
      {
        ...base,
        at: "2026-11-02T09:00:00.000Z",
        credentialName: "Warehouse sync",
        method: "GET",
        status: 500,
        latencyMs: 6,
      },
      // The same key renamed, another method, another team: each its own counter.
      {
        ...base,
        at: "2026-11-02T09:01:00.000Z",
        credentialName: "Sync (renamed)",
        method: "GET",
        status: 200,
        latencyMs: 2,
      },
      {
        ...base,
        at: "2026-11-02T09:02:00.000Z",
        credentialName: "Warehouse sync",
        method: "POST",
        status: 404,
        latencyMs: 2,
      },
      {
        ...base,
        at: "2026-11-02T09:03:00.000Z",
        credentialName: "Warehouse sync",
        method: "GET",
        status: 200,
        latencyMs: 2,
        teamId: "team_mkt",
      },
      // An earlier day after a later one, then the later day again.
      {
        ...base,
        at: "2026-11-01T23:59:00.000Z",
        credentialName: "Warehouse sync",
        method: "GET",
        status: 200,
        latencyMs: 8,
      },
      {
        ...base,
        at: "2026-11-02T10:00:00.000Z",
        credentialName: "Warehouse sync",
        method: "GET",
        status: 200,
        latencyMs: 2,
      },
    ];
    for (const call of calls) storage.usage.recordApiCall(call);
    const rows = await storage.usage.spaceApiUsage({ teamId: "team_ops", fromDay: "2026-11-01", toDay: "2026-11-02" });
    const brief = rows.map((r) => [
      r.day,
      r.method,
      r.credential,
      r.calls,
      r.errors,
      r.server_errors,
      r.avg_latency_ms,
    ]);
    expect(brief).toEqual([
      ["2026-11-02", "GET", "Sync (renamed)", 1, 0, 0, 2],
      ["2026-11-02", "GET", "Warehouse sync", 3, 1, 1, 4],
      ["2026-11-02", "POST", "Warehouse sync", 1, 1, 0, 2],
      ["2026-11-01", "GET", "Warehouse sync", 1, 0, 0, 8],
    ]);
    expect(
      (await storage.usage.spaceApiUsage({ teamId: "team_mkt", fromDay: "2026-11-02", toDay: "2026-11-02" })).map(
        (r) => r.calls,
      ),
    ).toEqual([1]);
  });
});

describe("memory store: what it hands out and takes in", () => {
  it("hands out identity records frozen, so a caller cannot change the store through them", async () => {
    const storage = createMemoryStorage();
    await storage.identity.putTeam({ id: "team_a", name: "A", plan: "pro", businessId: null, isPersonal: false });
    const team = (await storage.identity.getTeam("team_a"))!;
    expect(Object.isFrozen(team)).toBe(true);
    expect(() => {
      (team as { name: string }).name = "changed";
    }).toThrow(TypeError);
    expect((await storage.identity.listTeams({ after: null, limit: 10 }))[0]).toBe(team);
  });

  it("stores a copy of a delivered webhook row: the caller's row and columns stay the caller's", async () => {
    const storage = createMemoryStorage();
    await storage.seed(parseFixture(testFixture()));
    const row = { _id: "N-1", order_id: "N-1", amount: 5 };
    const columns = [
      { name: "_id", type: "string" as const },
      { name: "order_id", type: "string" as const },
      { name: "amount", type: "number" as const },
    ];
    await storage.webhooks.ingestWebhookRow({
      datasetId: "ds_orders",
      dedupKey: null,
      row,
      columns,
      retainRows: 10,
      receivedAt: "2026-11-01T00:00:00.000Z",
    });
    row.order_id = "changed";
    columns[2]!.type = "boolean" as never;
    const stored = storage.state.datasetRows.get("ds_orders")!.at(-1)!;
    expect(stored).not.toBe(row);
    expect({ ...stored }).toEqual({ _id: "N-1", order_id: "N-1", amount: 5 });
    expect((await storage.catalog.getDataset("ds_orders"))!.columns.find((c) => c.name === "amount")).toEqual({
      name: "amount",
      type: "number",
    });
  });

  it("refuses a space with one audit event id twice, loading nothing of it", async () => {
    const storage = createMemoryStorage();
    const space = parseFixture(testFixture());
    const event = {
      id: "evt_twice",
      teamId: "team_ops",
      time: "2026-11-01T00:00:00Z",
      category: "audit" as const,
      action: "x",
      actor: null,
      target: null,
      outcome: "success",
      ip: null,
      userAgent: null,
    };
    space.auditEvents.push(event, { ...event });
    await expect(storage.seed(space)).rejects.toThrow(/evt_twice/);
    expect(await storage.identity.getTeam("team_ops")).toBeNull();
    expect(storage.state.auditLog).toEqual([]);
    expect(await storage.seed(parseFixture(testFixture()))).toBe("loaded");
  });

  it("a read under way keeps the rows it started on when a bulk write replaces them, even after retention trimmed them", async () => {
    const storage = createMemoryStorage();
    await storage.seed(parseFixture(testFixture()));
    const page = await storage.rows.readDatasetRows("ds_orders", {
      offset: 0,
      limit: null,
      columns: ["order_id"],
      filters: null,
    });
    const iterator = page.rows[Symbol.asyncIterator]();
    const seen: unknown[] = [(await iterator.next()).value.order_id];
    // Retention trims the array the read is on, then a replace puts a new one.
    await storage.webhooks.ingestWebhookRow({
      datasetId: "ds_orders",
      dedupKey: null,
      row: { _id: "N-1", order_id: "N-1" },
      columns: [],
      retainRows: 5,
      receivedAt: "2026-11-01T00:00:00.000Z",
    });
    async function* replacement() {
      yield { order_id: "R-1" };
    }
    await storage.rows.writeDatasetRows({
      datasetId: "ds_orders",
      mode: "replace",
      rows: replacement(),
      columns: () => [{ name: "order_id", type: "string" }],
      updatedAt: "2026-11-01T00:00:01.000Z",
    });
    for (let next = await iterator.next(); !next.done; next = await iterator.next()) seen.push(next.value.order_id);
    expect(seen).toEqual(["A-1", "A-2", "A-3", "A-4", "A-5", "N-1"]);
    expect(storage.state.datasetRows.get("ds_orders")).toEqual([{ order_id: "R-1" }]);
  });
});
