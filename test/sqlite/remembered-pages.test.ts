/**
 * Plain pages (stored order, no conditions) are remembered by the SQLite
 * store while nothing can have changed them (src/sqlite/catalog.ts,
 * `rememberedPages`): a read again is served from memory, and every change —
 * appends, trims, a replace, a dataset deleted and made again under the same
 * seq, here or by another connection on the file — is seen by the next read.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import type { Column, Row } from "../../src/domain/model.js";
import { parseFixture } from "../../src/fixture/load.js";
import { joinedTexts } from "../../src/http/json-stream.js";
import type { RowQuery } from "../../src/ports/storage.js";
import { createSqliteStorage, type SqliteStorage } from "../../src/sqlite/index.js";
import { conformanceFixture } from "../../src/testing/conformance/fixture.js";
import { uploadDataset, writeRows } from "../support/datasets.js";

const dir = mkdtempSync(join(tmpdir(), "dataport-sqlite-pages-"));
let n = 0;
const open: SqliteStorage[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((s) => s.close()));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function store(path: string, pageMemoryBytes?: number): SqliteStorage {
  const s = createSqliteStorage({ path, ...(pageMemoryBytes !== undefined && { pageMemoryBytes }) });
  open.push(s);
  return s;
}

async function seeded(pageMemoryBytes?: number): Promise<{ path: string; s: SqliteStorage }> {
  const path = join(dir, `db-${++n}.sqlite`);
  const s = store(path, pageMemoryBytes);
  await s.seed(parseFixture(conformanceFixture()));
  return { path, s };
}

const COLUMNS: Column[] = [{ name: "v", type: "string" }];

/** A dataset holding rows { v } in this order. */
function write(s: SqliteStorage, id: string, mode: "replace" | "append", values: string[]) {
  return writeRows(
    s,
    id,
    mode,
    values.map((v) => ({ v }) as Row),
    COLUMNS,
  );
}

/** A new dataset holding `values`, made through the catalog as a host's admin call makes one. */
async function made(s: SqliteStorage, id: string, values: string[]): Promise<void> {
  await s.catalog.putDataset(uploadDataset(id, `Memo ${id}`, COLUMNS, false));
  await write(s, id, "replace", values);
}

const PAGE: RowQuery = { offset: 0, limit: 3, columns: null, filters: null };

/** The page's batches of texts as handed over, and the values they hold. */
async function read(
  s: SqliteStorage,
  id: string,
  query: Partial<RowQuery> = {},
): Promise<{ batches: (readonly string[])[]; values: string[] }> {
  // As a rows request does: the record first (access, columns), then the page.
  await s.catalog.getDataset(id);
  const page = await s.rows.readDatasetRows(id, { ...PAGE, ...query });
  const batches: (readonly string[])[] = [];
  for await (const batch of page.rowsJson!) batches.push(batch);
  return { batches, values: batches.flat().map((text) => (JSON.parse(text) as { v: string }).v) };
}

function seqOf(s: SqliteStorage, id: string): number {
  return (s.db.prepare("SELECT seq FROM datasets WHERE id = ?").get(id) as { seq: number }).seq;
}

describe("remembered plain pages on SQLite", () => {
  it("serves a page read again from memory (the same frozen texts), and joins them once", async () => {
    const { s } = await seeded();
    await made(s, "ds_memo", ["a", "b", "c", "d"]);
    const first = await read(s, "ds_memo");
    const again = await read(s, "ds_memo");
    expect(again.values).toEqual(["a", "b", "c"]);
    expect(again.batches[0]).toBe(first.batches[0]);
    expect(Object.isFrozen(again.batches[0])).toBe(true);
    expect(joinedTexts(again.batches[0]!)).toBe('{"v":"a"},{"v":"b"},{"v":"c"}');
    expect(joinedTexts(again.batches[0]!)).toBe(joinedTexts(first.batches[0]!));
    // The same rows through another limit that ends at the same position: the same range, the same page.
    const shorter = await s.rows.readDatasetRows("ds_memo", { ...PAGE, limit: 3, offset: 1 });
    expect(await shorter.rowsJson![Symbol.asyncIterator]().next()).toMatchObject({
      value: ['{"v":"b"}', '{"v":"c"}', '{"v":"d"}'],
    });
  });

  it("keeps nothing with pageMemoryBytes 0, and refuses a bad size", async () => {
    const { s } = await seeded(0);
    await made(s, "ds_memo", ["a", "b", "c", "d"]);
    const first = await read(s, "ds_memo");
    const again = await read(s, "ds_memo");
    expect(again.values).toEqual(["a", "b", "c"]);
    expect(again.batches[0]).not.toBe(first.batches[0]);
    expect(Object.isFrozen(again.batches[0])).toBe(false);
    for (const bad of [-1, 1.5, Number.NaN, Infinity, "8MB"]) {
      expect(() => createSqliteStorage({ path: ":memory:", pageMemoryBytes: bad as number })).toThrow(
        new TypeError("createSqliteStorage: pageMemoryBytes must be a whole number of bytes, 0 or more"),
      );
    }
  });

  it("does not keep a page larger than an eighth of the memory", async () => {
    const { s } = await seeded(1024);
    await made(s, "ds_memo", ["x".repeat(100), "y".repeat(100), "z"]);
    // Three rows of ~100 characters: over 128 bytes, read from the file each time.
    const first = await read(s, "ds_memo");
    expect((await read(s, "ds_memo")).batches[0]).not.toBe(first.batches[0]);
    // One short row fits: remembered.
    const small = await read(s, "ds_memo", { offset: 2, limit: 1 });
    expect(small.values).toEqual(["z"]);
    expect((await read(s, "ds_memo", { offset: 2, limit: 1 })).batches[0]).toBe(small.batches[0]);
  });

  it("sees appends, a replace and a cursor's continuation right after a remembered read", async () => {
    const { s } = await seeded();
    await made(s, "ds_memo", ["a", "b"]);
    expect((await read(s, "ds_memo")).values).toEqual(["a", "b"]);
    await write(s, "ds_memo", "append", ["c", "d"]);
    expect((await read(s, "ds_memo")).values).toEqual(["a", "b", "c"]);
    expect((await read(s, "ds_memo", { offset: 2 })).values).toEqual(["c", "d"]);
    await write(s, "ds_memo", "replace", ["p", "q"]);
    const replaced = await s.rows.readDatasetRows("ds_memo", PAGE);
    expect(replaced.totalRows).toBe(2);
    expect((await read(s, "ds_memo")).values).toEqual(["p", "q"]);
    // A cursor after "p" continues with "q" and then what an append brings.
    const firstPage = await s.rows.readDatasetRows("ds_memo", { ...PAGE, limit: 1 });
    for await (const _ of firstPage.rowsJson!);
    const after = firstPage.lastKey()!;
    await write(s, "ds_memo", "append", ["r"]);
    expect((await read(s, "ds_memo", { after })).values).toEqual(["q", "r"]);
  });

  it.each([
    ["this process", false],
    ["another connection on the file", true],
  ])("forgets pages when %s deletes the dataset and makes it again under the same seq", async (_, elsewhere) => {
    const { path, s } = await seeded();
    const writer = elsewhere ? store(path) : s;
    await made(s, "ds_memo", ["old-1", "old-2", "old-3"]);
    const seq = seqOf(s, "ds_memo");
    expect((await read(s, "ds_memo")).values).toEqual(["old-1", "old-2", "old-3"]);
    expect(await writer.catalog.deleteDataset("ds_memo")).toBe(true);
    await made(writer, "ds_memo", ["new-1", "new-2", "new-3"]);
    // The highest seq came back: the same row keys now hold other rows.
    expect(seqOf(s, "ds_memo")).toBe(seq);
    expect((await read(s, "ds_memo")).values).toEqual(["new-1", "new-2", "new-3"]);
    // And the other way round: a page the writer remembers follows the reader's own remake.
    expect((await read(writer, "ds_memo")).values).toEqual(["new-1", "new-2", "new-3"]);
    await s.catalog.deleteDataset("ds_memo");
    await made(s, "ds_memo", ["third-1", "third-2"]);
    expect(seqOf(s, "ds_memo")).toBe(seq);
    expect((await read(writer, "ds_memo")).values).toEqual(["third-1", "third-2"]);
  });

  it.each([
    ["this process", false],
    ["another connection on the file", true],
  ])("hands over the change log's head with a remembered page, moved when %s writes", async (_, elsewhere) => {
    const { path, s } = await seeded();
    const writer = elsewhere ? store(path) : s;
    await made(s, "ds_memo", ["a", "b"]);
    const headed = async () => {
      const page = await s.rows.readDatasetRows("ds_memo", { ...PAGE, limit: 2, changesHead: true });
      for await (const _ of page.rowsJson!);
      return page.changesHead;
    };
    const first = await headed();
    expect(first).toBe(await s.rows.datasetChangesHead("ds_memo"));
    // Read again: the page and the head both from memory (no statement but PRAGMA data_version).
    expect(await headed()).toBe(first);
    // An append beyond the page leaves the page's rows as they were but moves the head.
    await write(writer, "ds_memo", "append", ["c", "d"]);
    const second = await headed();
    expect(Number(second)).toBeGreaterThan(Number(first));
    expect(second).toBe(await s.rows.datasetChangesHead("ds_memo"));
    expect((await s.rows.readDatasetChanges("ds_memo", { after: first!, limit: 10 })).changes).toHaveLength(2);
  });

  it("sees webhook deliveries and their retention trims in the next read", async () => {
    const { s } = await seeded();
    await s.webhooks.createWebhookConnection({
      connection: { id: "conn_memo", teamId: "team_ops", name: "Hook", createdAt: "2026-11-24T00:00:00.000Z" },
      endpoint: { endpointId: "ep_memo", signingSecret: null, retainRows: 3 },
      dataset: { id: "ds_hook", name: "Hook rows" },
    });
    const dataset = { id: "ds_hook" };
    const deliver = (v: string) =>
      s.webhooks.ingestWebhookRow({
        datasetId: dataset.id,
        dedupKey: null,
        row: { _id: v, v } as Row,
        columns: COLUMNS,
        receivedAt: "2026-11-24T00:00:02.000Z",
        retainRows: 3,
      });
    for (const v of ["a", "b", "c"]) await deliver(v);
    expect((await read(s, dataset.id)).values).toEqual(["a", "b", "c"]);
    await deliver("d");
    expect((await read(s, dataset.id)).values).toEqual(["b", "c", "d"]);
  });
});
