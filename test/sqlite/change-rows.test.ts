/**
 * SQLite's change log names a webhook row instead of copying it: the row
 * stays in dataset_rows after retention moves it below the window, for as
 * long as its insert change is kept, and goes with that change.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { parseFixture } from "../../src/fixture/load.js";
import { rowKey } from "../../src/sqlite/db.js";
import { createSqliteStorage, type SqliteStorage } from "../../src/sqlite/index.js";
import { conformanceFixture } from "../../src/testing/conformance/fixture.js";

const dir = mkdtempSync(join(tmpdir(), "dataport-sqlite-change-rows-"));
const open: SqliteStorage[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((s) => s.close()));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const HOOK = "ds_conn_hook";
const T0 = Date.parse("2026-11-01T12:00:00.000Z");
let files = 0;

async function seeded(): Promise<SqliteStorage> {
  const s = createSqliteStorage({ path: join(dir, `db-${++files}.sqlite`) });
  open.push(s);
  const fixture = conformanceFixture() as ReturnType<typeof conformanceFixture> & { connections: unknown[] };
  fixture.connections.push({
    id: "conn_hook",
    teamId: "team_ops",
    name: "Shop events",
    type: "webhook",
    config: { endpointId: "ep_shop", signingSecret: null, retainRows: 3 },
    createdAt: "2026-09-01T00:00:00Z",
  });
  await s.seed(parseFixture(fixture));
  return s;
}

function deliver(s: SqliteStorage, i: number, at: number, dedupKey: string | null = null) {
  return s.webhooks.ingestWebhookRow({
    datasetId: HOOK,
    dedupKey,
    row: { _id: `wh${i}`, _receivedAt: new Date(at).toISOString(), n: i, note: "x".repeat(200) },
    columns: [
      { name: "_id", type: "string" },
      { name: "_receivedAt", type: "string" },
      { name: "n", type: "number" },
      { name: "note", type: "string" },
    ],
    retainRows: 3,
    receivedAt: new Date(at).toISOString(),
  });
}

/** Every row stored for the dataset, at any position. */
function storedRows(s: SqliteStorage): number {
  const { seq } = s.db.prepare("SELECT seq FROM datasets WHERE id = ?").get(HOOK) as { seq: number };
  const range = [rowKey(seq, 0), rowKey(seq + 1, 0)];
  return (
    s.db.prepare("SELECT count(*) AS n FROM dataset_rows WHERE row_key >= ? AND row_key < ?").get(...range) as {
      n: number;
    }
  ).n;
}

describe("sqlite: webhook inserts name their rows", () => {
  it("keeps a trimmed row for its insert change, serves it whole, and deletes it with the change", async () => {
    const s = await seeded();
    for (let i = 1; i <= 8; i++) await deliver(s, i, T0 + i * 1000);
    // The dataset shows 3 rows; the 5 trimmed ones stay, named by their inserts, which carry them whole.
    expect((await s.catalog.getDataset(HOOK))!.rowCount).toBe(3);
    expect(storedRows(s)).toBe(8);
    expect(s.db.prepare("SELECT count(*) AS n FROM changes WHERE row IS NOT NULL").get()).toEqual({ n: 0 });
    const page = await s.rows.readDatasetChanges(HOOK, { after: null, limit: 100 });
    const inserts = page.changes.map((c) => c.change).filter((c) => c.op === "insert");
    expect(inserts.map((c) => (c.op === "insert" ? c.row : null))).toEqual(
      Array.from({ length: 8 }, (_, k) => ({
        _id: `wh${k + 1}`,
        _receivedAt: new Date(T0 + (k + 1) * 1000).toISOString(),
        n: k + 1,
        note: "x".repeat(200),
      })),
    );
    // Retention removes the changes stored before wh6: the rows only they named go with them, the window stays.
    await s.rows.trimDatasetChanges(T0 + 6000);
    expect(storedRows(s)).toBe(3);
    const rows = await s.rows.readDatasetRows(HOOK, { offset: 0, limit: null, columns: null, filters: null });
    const ids: unknown[] = [];
    for await (const row of rows.rows) ids.push(row._id);
    expect(ids).toEqual(["wh6", "wh7", "wh8"]);
    const kept = await s.rows.readDatasetChanges(HOOK, { after: null, limit: 100 });
    expect(kept.changes.map((c) => (c.change.op === "insert" ? c.change.row._id : c.change.op))).toEqual([
      "wh6",
      "trim",
      "wh7",
      "trim",
      "wh8",
      "trim",
    ]);
  });

  it("a key of a trimmed row is free again: its redelivery is a new row, the old row stays for its change", async () => {
    const s = await seeded();
    for (let i = 1; i <= 5; i++) await deliver(s, i, T0 + i * 1000, `k${i}`);
    expect(await deliver(s, 9, T0 + 9000, "k1")).toEqual({ id: "wh9", duplicate: false });
    expect(await deliver(s, 10, T0 + 10_000, "k9")).toEqual({ id: "wh10", duplicate: false });
    expect(await deliver(s, 11, T0 + 11_000, "k5")).toEqual({ id: "wh5", duplicate: true });
    const page = await s.rows.readDatasetChanges(HOOK, { after: null, limit: 100 });
    const first = page.changes[0]!.change;
    expect(first.op === "insert" ? first.row : null).toEqual({
      _id: "wh1",
      _receivedAt: new Date(T0 + 1000).toISOString(),
      n: 1,
      note: "x".repeat(200),
    });
  });

  it("a group commit's inserts are one change row, read as one change per row; a cursor may stop inside it", async () => {
    const s = await seeded();
    await deliver(s, 1, T0 + 1000);
    // Five deliveries in one turn: one group commit, rows wh2…wh6, one change row covering five positions.
    const batch = await Promise.all([2, 3, 4, 5, 6].map((i) => deliver(s, i, T0 + i * 1000)));
    expect(batch.map((r) => r.id)).toEqual(["wh2", "wh3", "wh4", "wh5", "wh6"]);
    const stored = s.db
      .prepare("SELECT op, row_span FROM changes WHERE feed_id = ? ORDER BY position")
      .all(HOOK) as Array<{ op: string; row_span: number | null }>;
    expect(stored).toEqual([
      { op: "insert", row_span: 1 },
      { op: "insert", row_span: 5 },
      { op: "trim", row_span: null },
    ]);
    const seen: string[] = [];
    const positions: number[] = [];
    let after: string | null = null;
    for (let pages = 0; pages < 10; pages++) {
      const page = await s.rows.readDatasetChanges(HOOK, { after, limit: 2 });
      for (const { position, change } of page.changes) {
        positions.push(Number(position));
        if (change.op === "insert") seen.push(`${change.rowId}@${change.at}`);
        else seen.push(change.op === "trim" ? `trim:${change.upTo}` : change.op);
      }
      if (page.changes.length > 0) after = page.changes.at(-1)!.position;
      if (!page.hasMore) break;
    }
    // Each row once, in order, at its own position and its own time; then the batch's trim (retainRows 3).
    expect(seen).toEqual([
      ...[1, 2, 3, 4, 5, 6].map((i) => `wh${i}@${new Date(T0 + i * 1000).toISOString()}`),
      "trim:wh3",
    ]);
    expect(positions).toEqual([1, 2, 3, 4, 5, 6, 7].map((k) => positions[0]! + k - 1));
    // The head is the last position given; a cursor in the middle of the range continues inside it.
    expect(await s.rows.datasetChangesHead(HOOK)).toBe(String(positions[6]));
    const inside = await s.rows.readDatasetChanges(HOOK, { after: String(positions[3]), limit: 100 });
    expect(inside.changes.map((c) => (c.change.op === "insert" ? c.change.rowId : c.change.op))).toEqual([
      "wh5",
      "wh6",
      "trim",
    ]);
  });

  it("retention removes a log larger than one transaction's share in several, all of it", async () => {
    const s = await seeded();
    const insert = s.db.prepare(
      "INSERT INTO changes (feed_id, op, row_id, row, stored_at) VALUES (?, 'reset', NULL, NULL, ?)",
    );
    s.db.transaction(() => {
      for (let i = 0; i < 120_000; i++) insert.run("tbl_other", T0);
    })();
    await deliver(s, 1, T0 + 10_000);
    await s.rows.trimDatasetChanges(T0 + 5000);
    expect(s.db.prepare("SELECT count(*) AS n FROM changes").get()).toEqual({ n: 1 });
  });
});
