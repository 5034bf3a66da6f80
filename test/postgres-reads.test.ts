import { describe, expect, it, vi } from "vitest";
import type { Row } from "../src/domain/model.js";
import type { PostgresStorage } from "../src/postgres/index.js";
import type { RowQuery } from "../src/ports/storage/rows.js";
import { postgresStores } from "./support/postgres-stores.js";
import { postgresSkipReason } from "./support/services.js";

// Dataset reads on PostgreSQL (issue #18): filters pushed down to the GIN
// index, deep offsets as positions, rows without a jsonb form.
const skip = await postgresSkipReason();
const { store } = postgresStores({ prefix: "dp_reads", maxConnections: 4 });

const REGIONS = ["EMEA", "APAC", "LATAM", "NA"];

async function fill(s: PostgresStorage, rows: Iterable<Row>): Promise<void> {
  await s.rows.writeDatasetRows({
    datasetId: "ds_orders",
    mode: "replace",
    rows: (async function* () {
      yield* rows;
    })(),
    columns: () => [],
    updatedAt: "2026-11-01T00:00:00.000Z",
  });
}

function* orders(n: number): Generator<Row> {
  for (let i = 0; i < n; i++)
    yield {
      order_id: `NW-${i}`,
      region: REGIONS[i % 4]!,
      amount: i % 100,
      tags: { tier: i % 2 ? "gold" : "blue", n: 1 },
    };
}

async function read(s: PostgresStorage, query: Partial<RowQuery>): Promise<{ total: number; rows: Row[] }> {
  const page = await s.rows.readDatasetRows("ds_orders", {
    offset: 0,
    limit: 100,
    columns: null,
    filters: null,
    ...query,
  });
  const rows: Row[] = [];
  for await (const row of page.rows) rows.push({ ...row });
  return { total: page.totalRows, rows };
}

/** The plan PostgreSQL makes for the statement a read sends (captured as it goes to the pool). */
async function planOf(s: PostgresStorage, query: Partial<RowQuery>): Promise<string> {
  const spy = vi.spyOn(s.db.pool, "query");
  await read(s, query);
  const [text, params] = spy.mock.calls.at(-1)! as unknown as [string, unknown[]];
  spy.mockRestore();
  // As autovacuum leaves it: statistics taken, the GIN index's pending list merged.
  await s.db.query(`select gin_clean_pending_list($1::regclass)`, [`${s.db.schema}.dataset_rows_doc`]);
  await s.db.query(`analyze ${s.db.t("dataset_rows")}`);
  const [plan] = await s.db.query<{ "QUERY PLAN": unknown }>(`explain (format json) ${text}`, params);
  return JSON.stringify(plan!["QUERY PLAN"]);
}

describe.skipIf(!!skip)("postgres dataset reads", () => {
  it("narrows a filtered read with the GIN index, and checks equality, not containment, on what it finds", async () => {
    const s = await store();
    await fill(s, orders(20_000));
    expect(await planOf(s, { filters: { order_id: "NW-12345" } })).toContain("dataset_rows_doc");
    expect(await read(s, { filters: { order_id: "NW-12345" } })).toEqual({
      total: 1,
      rows: [{ order_id: "NW-12345", region: "APAC", amount: 45, tags: { tier: "gold", n: 1 } }],
    });
    // Several filters, an object value in another key order, a number spelled differently.
    const gold = await read(s, { filters: { region: "APAC", tags: { n: 1.0, tier: "gold" }, amount: 45 }, limit: 3 });
    expect(gold.total).toBe(200);
    expect(gold.rows.map((r) => r.order_id)).toEqual(["NW-45", "NW-145", "NW-245"]);
    // Contained but not equal: no match.
    expect((await read(s, { filters: { tags: { tier: "gold" } } })).total).toBe(0);
    // A deep page of a filtered read, in position order.
    const deep = await read(s, { filters: { region: "NA" }, offset: 4990, limit: 20 });
    expect({ total: deep.total, ids: deep.rows.map((r) => r.order_id) }).toEqual({
      total: 5000,
      ids: Array.from({ length: 10 }, (_, k) => `NW-${(4990 + k) * 4 + 3}`),
    });
  });

  it("matches a null filter against a missing key, and serves an offset without a filter as a position", async () => {
    const s = await store();
    await fill(s, [{ a: 1, b: null }, { a: 2 }, { a: 3, b: "x" }, { a: 4, b: 0 }]);
    expect((await read(s, { filters: { b: null } })).rows.map((r) => r.a)).toEqual([1, 2]);
    expect((await read(s, { filters: { b: null, a: 2 } })).rows).toEqual([{ a: 2 }]);
    expect((await read(s, { filters: { b: 0 } })).rows).toEqual([{ a: 4, b: 0 }]);
    await fill(s, orders(20_000));
    const plan = await planOf(s, { offset: 19_000, limit: 10 });
    // An index condition on the position; nothing skips rows one by one.
    expect(plan).toContain('"Index Cond"');
    expect(plan).not.toContain('"Offset"');
    expect((await read(s, { offset: 19_990, limit: 50, columns: ["order_id"] })).rows.map((r) => r.order_id)).toEqual(
      Array.from({ length: 10 }, (_, k) => `NW-${19_990 + k}`),
    );
  });

  it("stores rows that have no jsonb form (a NUL or a lone surrogate from an upstream) and filters them like any other row", async () => {
    const s = await store();
    const odd: Row[] = [
      { id: 1, text: "a\u0000b" },
      { id: 2, text: "\ud800" },
      { id: 3, text: "plain" },
    ];
    await s.rows.replaceDatasetRows("ds_orders", { rows: odd, columns: [], refreshedAt: "2026-11-01T00:00:00.000Z" });
    expect((await read(s, {})).rows.map((r) => r.id)).toEqual([1, 2, 3]);
    expect((await read(s, {})).rows[0]!.text).toBe("a\u0000b");
    expect(await read(s, { filters: { text: "plain" } })).toEqual({ total: 1, rows: [{ id: 3, text: "plain" }] });
    expect(await read(s, { filters: { id: 1 } })).toEqual({ total: 1, rows: [{ id: 1, text: "a\u0000b" }] });
    expect(await read(s, { filters: { id: 2 } })).toEqual({ total: 1, rows: [{ id: 2, text: "\ud800" }] });
  });
});
