/**
 * The reader threads themselves (src/sqlite/reader-pool.ts): any read-only
 * statement runs there with a deadline (what aggregates will use); one that
 * calls the deadline check is ended at the deadline; one that cannot be
 * ended costs its thread, which is replaced.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { ApiError } from "../../src/base/api-error.js";
import { type ReaderPool, readerPool } from "../../src/sqlite/reader-pool.js";
import { createSqliteStorage } from "../../src/sqlite/index.js";
import { DEADLINE_CHECK } from "../../src/sqlite/statement-deadline.js";
import { openSqlite } from "../../src/sqlite/db.js";
import { longRead } from "../../src/sqlite/long-reads.js";

const dir = mkdtempSync(join(tmpdir(), "dataport-sqlite-reader-pool-"));
const path = join(dir, "pool.db");
const pools: ReaderPool[] = [];
afterAll(async () => {
  await Promise.all(pools.map((p) => p.close()));
  rmSync(dir, { recursive: true, force: true });
});

/** A statement that visits `n` rows of nothing (a recursive count), calling the deadline check per row or not. */
const counting = (n: number, checked: boolean) =>
  `WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE ${checked ? `${DEADLINE_CHECK} AND ` : ""}i < ${n}) SELECT count(*) AS n FROM c`;

async function pool(timeoutMs: number): Promise<ReaderPool> {
  const storage = createSqliteStorage({ path });
  await storage.close();
  const readers = readerPool({ path, driver: "better-sqlite3", size: 1, timeoutMs, busyTimeoutMs: 0 });
  pools.push(readers);
  // Started (from the TypeScript sources a thread takes a while, and its start counts in the deadline).
  for (let tries = 0; ; tries++) {
    try {
      await readers.call({ kind: "statement", text: "SELECT 1 AS one", params: [], mode: "get" });
      return readers;
    } catch (error) {
      if (tries > 50) throw error;
    }
  }
}

const causeOf = (error: unknown) => ((error as ApiError).cause as Error).message;

describe("sqlite: reader threads", () => {
  it("run a read-only statement with its parameters, and refuse a write", async () => {
    const readers = await pool(10_000);
    expect(
      await readers.call({
        kind: "statement",
        text: "SELECT ? + ? AS sum, ? AS text",
        params: [2, 3, "é"],
        mode: "get",
      }),
    ).toEqual({ sum: 5, text: "é" });
    // A statement request (an aggregate's scan and sort) runs with a 2 MB page cache and two sorter threads.
    expect(
      await readers.call({
        kind: "statement",
        text: "SELECT (SELECT threads FROM pragma_threads) AS threads, (SELECT cache_size FROM pragma_cache_size) AS cache",
        params: [],
        mode: "get",
      }),
    ).toEqual({ threads: 2, cache: -2000 });
    expect(await readers.call({ kind: "statement", text: counting(1000, true), params: [], mode: "all" })).toEqual([
      { n: 1000 },
    ]);
    const write = await readers
      .call({
        kind: "statement",
        text: "INSERT INTO meta (key, value) VALUES ('x', 'y') RETURNING key",
        params: [],
        mode: "all",
      })
      .catch((e: unknown) => e);
    expect((write as { code?: string }).code).toBe("SQLITE_READONLY");
  }, 60_000);

  it("end a statement that checks the deadline at the deadline (503), and answer the next call at once", async () => {
    const readers = await pool(300);
    const started = performance.now();
    const ended = await readers
      .call({ kind: "statement", text: counting(2_000_000_000, true), params: [], mode: "get" })
      .catch((e: unknown) => e);
    expect(ended).toBeInstanceOf(ApiError);
    expect([(ended as ApiError).status, (ended as ApiError).code, (ended as ApiError).headers]).toEqual([
      503,
      "storage_unavailable",
      { "retry-after": "1" },
    ]);
    expect(causeOf(ended)).toBe("the statement was ended at its deadline");
    // Counting to two billion takes minutes; the thread stopped at the deadline.
    expect(performance.now() - started).toBeLessThan(5000);
    expect(await readers.call({ kind: "statement", text: "SELECT 2 AS two", params: [], mode: "get" })).toEqual({
      two: 2,
    });
  }, 60_000);

  it("give a statement that cannot be ended a grace period, then stop its thread and go on with a new one", async () => {
    const readers = await pool(300);
    const stuck = await readers
      .call({ kind: "statement", text: counting(2_000_000_000, false), params: [], mode: "get" })
      .catch((e: unknown) => e);
    expect((stuck as ApiError).status).toBe(503);
    expect(causeOf(stuck)).toBe("the statement did not end at its deadline: its reader thread was stopped");
    for (let tries = 0; ; tries++) {
      const next = await readers
        .call({ kind: "statement", text: "SELECT 3 AS three", params: [], mode: "get" })
        .catch((e: unknown) => e);
      if (!(next instanceof ApiError) || tries > 50) {
        expect(next).toEqual({ three: 3 });
        break;
      }
    }
  }, 60_000);

  it("reject what waits for a busy thread past its deadline, without running it", async () => {
    const readers = await pool(400);
    // Holds the one thread past its own deadline, until its grace period ends.
    const first = readers
      .call({ kind: "statement", text: counting(2_000_000_000, false), params: [], mode: "get" })
      .catch((e: unknown) => e);
    await new Promise((resolve) => setTimeout(resolve, 100));
    const second = await readers
      .call({ kind: "statement", text: "SELECT 4 AS four", params: [], mode: "get" })
      .catch((e: unknown) => e);
    expect(causeOf(second)).toBe("no reader thread was free before the deadline");
    expect(causeOf(await first)).toBe("the statement did not end at its deadline: its reader thread was stopped");
  }, 60_000);

  it("longRead runs an aggregate on a reader thread (a file) or on the loop (:memory:), ended at callTimeoutMs either way", async () => {
    const file = openSqlite({ path: join(dir, "long-read.db"), callTimeoutMs: 300 });
    const memory = openSqlite({ path: ":memory:", callTimeoutMs: 300 });
    try {
      for (const handle of [file, memory]) {
        // The thread started first (from the sources it takes longer than this deadline).
        for (let tries = 0; handle.readers !== null; tries++) {
          const warm = await longRead(handle, "SELECT 1 AS one", [], "get").catch((e: unknown) => e);
          if (!(warm instanceof ApiError) || tries > 50) break;
        }
        expect(await longRead(handle, counting(5000, true), [], "get")).toEqual({ n: 5000 });
        const ended = await longRead(handle, counting(2_000_000_000, true), [], "get").catch((e: unknown) => e);
        expect([(ended as ApiError).status, (ended as ApiError).code]).toEqual([503, "storage_unavailable"]);
      }
      expect(file.readers).not.toBeNull();
      expect(memory.readers).toBeNull();
    } finally {
      await file.readers?.close();
      file.close();
      memory.close();
    }
  }, 60_000);
});
