import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll } from "vitest";
import type { Storage } from "../../src/ports/storage.js";
import { createSqliteStorage, type SqliteStorage, type SqliteStorageOptions } from "../../src/sqlite/index.js";
import { runStorageConformance } from "../../src/testing/index.js";

// A fresh database file per store: the file path exercises WAL and the read-only
// snapshot connections that `:memory:` cannot have.
const dir = mkdtempSync(join(tmpdir(), "dataport-sqlite-conformance-"));
let n = 0;
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/**
 * The binding under test: the runtime's default, or the one named by
 * DATAPORT_TEST_SQLITE_DRIVER (test/sqlite/drivers.test.ts runs this file on
 * Node 22 with node:sqlite and on Bun with bun:sqlite).
 */
const driver = process.env.DATAPORT_TEST_SQLITE_DRIVER as SqliteStorageOptions["driver"];
const label = driver === undefined ? "sqlite" : `sqlite ${driver}`;

/** The faults suite's outage: the store's connection to its file closed under it. */
const closeFile = (store: Storage) => {
  (store as SqliteStorage).db.close();
};

/** Each file store's path, so a second instance can open the same file. */
const paths = new WeakMap<Storage, string>();
const fileStore =
  (options: { loopBudgetMs?: number } = {}) =>
  async () => {
    const path = join(dir, `store-${++n}.db`);
    const store = createSqliteStorage({ path, driver, ...options });
    paths.set(store, path);
    return store;
  };
const sameFile = async (store: Storage) => createSqliteStorage({ path: paths.get(store)!, driver });

runStorageConformance(`${label} (file)`, fileStore(), { makeUnavailable: closeFile, sameDatabase: sameFile });
runStorageConformance(`${label} (:memory:)`, async () => createSqliteStorage({ path: ":memory:", driver }), {
  makeUnavailable: closeFile,
});
// Every read with conditions, filters or a sort on a reader thread (see src/sqlite/row-reads.ts).
runStorageConformance(`${label} (file, reads on reader threads)`, fileStore({ loopBudgetMs: 0 }), {
  makeUnavailable: closeFile,
  sameDatabase: sameFile,
});
