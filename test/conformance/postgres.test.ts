import pg from "pg";
import { afterEach } from "vitest";
import { createPostgresStorage, type PostgresStorage } from "../../src/postgres/index.js";
import type { Storage } from "../../src/ports/storage.js";
import { runStorageConformance } from "../../src/testing/index.js";
import { cuttablePool } from "../support/faults.js";
import { dropSchemas, POSTGRES_URL, postgresSkipReason, testSchema } from "../support/services.js";

// Each factory call gets its own schema, dropped after its test (once the suite has closed the test's stores:
// this file's afterEach runs after the suites'). Dropped after the file, the 138 of them took over 30 s.
const skip = await postgresSkipReason();
const schemas: string[] = [];
afterEach(() => dropSchemas(schemas));

/** How to take each store's server away (the faults suite): its pool, which the test made. */
const outages = new WeakMap<Storage, () => void>();
/** Each store's schema, so a second instance can open the same one. */
const schemaOf = new WeakMap<Storage, string>();

/** A second instance on the store's schema, with a pool of its own that ends with it. */
async function sameSchema(store: Storage): Promise<Storage> {
  const pool = new pg.Pool({ connectionString: POSTGRES_URL, max: 4 });
  const other = await createPostgresStorage({ pool, schema: schemaOf.get(store)! });
  const close = other.close;
  return Object.assign(other, { close: () => close().then(() => pool.end().catch(() => {})) });
}

runStorageConformance(
  "postgres",
  async () => {
    const schema = testSchema();
    schemas.push(schema);
    const { pool, cut } = await cuttablePool(POSTGRES_URL, 4);
    let store: PostgresStorage;
    try {
      store = await createPostgresStorage({ pool, schema });
    } catch (error) {
      await pool.end();
      throw error;
    }
    // The pool is the test's: it ends with the store.
    const close = store.close;
    store = Object.assign(store, { close: () => close().then(() => pool.end().catch(() => {})) });
    outages.set(store, cut);
    schemaOf.set(store, schema);
    return store;
  },
  { ...(skip ? { skip } : {}), makeUnavailable: (store) => outages.get(store)!(), sameDatabase: sameSchema },
);
