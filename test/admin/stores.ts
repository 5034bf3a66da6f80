import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createMemoryStorage } from "../../src/memory/memory-storage.js";
import { createPostgresStorage } from "../../src/postgres/index.js";
import type { Storage } from "../../src/ports/storage.js";
import { createSqliteStorage } from "../../src/sqlite/index.js";
import { dropSchemas, POSTGRES_URL, postgresSkipReason, testSchema } from "../support/services.js";

/** A store the admin tests run on, and how to open a second instance on the same data. */
export interface StoreKind {
  name: string;
  skip: () => Promise<string | undefined>;
  /** A fresh, empty store; `again()` opens another instance on the same data (SQLite file, PostgreSQL schema). */
  open(): Promise<{ storage: Storage; again?: () => Promise<Storage>; cleanup(): Promise<void> }>;
}

export const STORE_KINDS: StoreKind[] = [
  {
    name: "memory",
    skip: async () => undefined,
    async open() {
      return { storage: createMemoryStorage(), cleanup: async () => {} };
    },
  },
  {
    name: "sqlite",
    skip: async () => undefined,
    async open() {
      const dir = mkdtempSync(join(tmpdir(), "dataport-admin-"));
      const path = join(dir, "store.db");
      const opened: Storage[] = [];
      const open = async () => {
        const store = createSqliteStorage({ path });
        opened.push(store);
        return store;
      };
      return {
        storage: await open(),
        again: open,
        async cleanup() {
          for (const store of opened) await store.close();
          rmSync(dir, { recursive: true, force: true });
        },
      };
    },
  },
  {
    name: "postgres",
    skip: postgresSkipReason,
    async open() {
      const schema = testSchema("dp_admin");
      const opened: Storage[] = [];
      const open = async () => {
        const store = await createPostgresStorage({ connectionString: POSTGRES_URL, schema, maxConnections: 3 });
        opened.push(store);
        return store;
      };
      return {
        storage: await open(),
        again: open,
        async cleanup() {
          for (const store of opened) await store.close();
          await dropSchemas([schema]);
        },
      };
    },
  },
];
