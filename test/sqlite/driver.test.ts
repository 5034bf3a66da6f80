/**
 * The SQLite binding under the store (src/sqlite/driver.ts): which one a
 * store runs on, a connection the host opened itself, and what a wrong
 * choice says. Runs on whatever runs it: Node 20 here with better-sqlite3,
 * and through test/sqlite/drivers.test.ts on Node 22 (node:sqlite) and Bun
 * (bun:sqlite), where DATAPORT_SQLITE_DRIVER names the binding.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { parseFixture } from "../../src/fixture/load.js";
import type { RowQuery } from "../../src/ports/storage/rows.js";
import { createSqliteStorage, type SqliteDriverName } from "../../src/sqlite/index.js";
import { conformanceFixture } from "../../src/testing/conformance/fixture.js";

const dir = mkdtempSync(join(tmpdir(), "dataport-sqlite-driver-"));
let n = 0;
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const file = () => join(dir, `store-${++n}.db`);

const named = process.env.DATAPORT_SQLITE_DRIVER as SqliteDriverName | undefined;
const runtime = "Bun" in globalThis ? "bun" : "node";
/**
 * What this runtime runs a store on when nothing names a driver (the
 * default of the machine running `npm test`: Node 20 with better-sqlite3).
 */
const expected: SqliteDriverName = named ?? (runtime === "bun" ? "bun:sqlite" : "better-sqlite3");

/** A connection opened the way a host would open it, with `driver`'s own package or module. */
function hostConnection(driver: SqliteDriverName, path: string): { db: { close(): void }; selectOne(): unknown } {
  const require = createRequire(import.meta.url);
  if (driver === "better-sqlite3") {
    const db = new (require("better-sqlite3"))(path);
    return { db, selectOne: () => db.prepare("SELECT 1 AS one").get() };
  }
  if (driver === "node:sqlite") {
    const { DatabaseSync } = process.getBuiltinModule("node:sqlite") as {
      DatabaseSync: new (path: string) => { prepare(s: string): { get(): unknown }; close(): void };
    };
    const db = new DatabaseSync(path);
    return { db, selectOne: () => ({ ...(db.prepare("SELECT 1 AS one").get() as object) }) };
  }
  const { Database } = require("bun:sqlite") as {
    Database: new (path: string) => { prepare(s: string): { get(): unknown }; close(): void };
  };
  const db = new Database(path);
  return { db, selectOne: () => db.prepare("SELECT 1 AS one").get() };
}

const sorted: RowQuery = {
  offset: 0,
  limit: 3,
  columns: ["order_id"],
  filters: null,
  sort: [{ column: "amount", descending: true }],
};

describe(`sqlite driver (${runtime}, ${expected})`, () => {
  it("runs a store on the runtime's default binding, or on the one DATAPORT_SQLITE_DRIVER names", async () => {
    const store = createSqliteStorage({ path: file() });
    try {
      expect(store.driver).toBe(expected);
    } finally {
      await store.close();
    }
  });

  it("runs on a connection the host opened (its binding recognised), reader threads included, and closes it on close", async () => {
    const path = file();
    const host = hostConnection(expected, path);
    // loopBudgetMs 0: the sorted read runs on a reader thread, which opens the file with the same binding.
    const store = createSqliteStorage({ database: host.db, loopBudgetMs: 0 });
    try {
      expect(store.driver).toBe(expected);
      await store.seed(parseFixture(conformanceFixture()));
      const page = await store.rows.readDatasetRows("ds_orders", sorted);
      const rows: unknown[] = [];
      for await (const row of page.rows) rows.push(row);
      expect(page.totalRows).toBe(5);
      expect(rows).toEqual([{ order_id: "A-4" }, { order_id: "A-2" }, { order_id: "A-1" }]);
      expect(host.selectOne()).toEqual({ one: 1 });
    } finally {
      await store.close();
    }
    expect(() => host.selectOne()).toThrow();
    await expect(store.ping()).rejects.toThrow("The database connection is not open");
  });

  it("says what is wrong with a driver option", () => {
    expect(() => createSqliteStorage({ path: file(), driver: "sqlite3" as SqliteDriverName })).toThrow(
      'createSqliteStorage: driver must be "better-sqlite3", "node:sqlite" or "bun:sqlite" (got "sqlite3")',
    );
    expect(() => createSqliteStorage({ database: {} })).toThrow(
      /database must be an open connection of better-sqlite3/,
    );
    const host = hostConnection(expected, file());
    try {
      expect(() => createSqliteStorage({ path: file(), database: host.db })).toThrow(
        "give either database (a connection the host opened) or path and driver, not both",
      );
    } finally {
      host.db.close();
    }
    if (runtime !== "bun")
      expect(() => createSqliteStorage({ path: file(), driver: "bun:sqlite" })).toThrow(
        'dataport/sqlite: driver "bun:sqlite" runs on Bun only',
      );
  });

  it("names better-sqlite3 in src/ only where it is loaded (drivers.ts): every other module speaks the driver interface", () => {
    const src = new URL("../../src/", import.meta.url);
    const naming = (readdirSync(src, { recursive: true }) as string[])
      .filter((file) => file.endsWith(".ts"))
      .filter((file) =>
        /from\s+["']better-sqlite3["']|import\(["']better-sqlite3["']\)/.test(readFileSync(new URL(file, src), "utf8")),
      );
    expect(naming).toEqual([]);
  });
});
