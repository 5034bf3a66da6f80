import { afterAll } from "vitest";
import { createPostgresStorage } from "../../src/postgres/index.js";
import { runStorageConformance } from "../../src/testing/index.js";
import { dropSchemas, POSTGRES_URL, postgresSkipReason, testSchema } from "../support/services.js";

// Each factory call gets its own schema, dropped after the file.
const skip = await postgresSkipReason();
const schemas: string[] = [];
afterAll(() => dropSchemas(schemas));

runStorageConformance(
  "postgres",
  async () => {
    const schema = testSchema();
    schemas.push(schema);
    // The audit feed's xid gate waits for every transaction open on the cluster, and other test files run
    // beside this one (bulk writes, held locks): give them time to finish rather than read a page short.
    return createPostgresStorage({ connectionString: POSTGRES_URL, schema, maxConnections: 4, auditVisibilityWaitMs: 3000 });
  },
  skip ? { skip } : {},
);
