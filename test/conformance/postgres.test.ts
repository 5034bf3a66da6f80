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
    return createPostgresStorage({ connectionString: POSTGRES_URL, schema, maxConnections: 4 });
  },
  skip ? { skip } : {},
);
