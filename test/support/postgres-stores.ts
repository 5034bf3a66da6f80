import { afterAll, afterEach } from "vitest";
import { parseFixture } from "../../src/fixture/load.js";
import { createPostgresStorage, type PostgresStorage } from "../../src/postgres/index.js";
import { conformanceFixture } from "../../src/testing/conformance/fixture.js";
import { dropSchemas, POSTGRES_URL, testSchema } from "./services.js";

/**
 * The PostgreSQL stores of one test file: each in a schema of its own
 * (`testSchema(prefix)` unless given), closed after each test; every schema
 * the file used is dropped after it. Call once, at the top of the file.
 */
export function postgresStores(options: { prefix?: string; maxConnections: number; fixture?: () => unknown }) {
  const schemas: string[] = [];
  const open: PostgresStorage[] = [];
  afterEach(async () => {
    await Promise.all(open.splice(0).map((s) => s.close()));
  });
  afterAll(() => dropSchemas(schemas));
  /** A schema the file uses (a new one unless named), dropped after the file. */
  const schemaOf = (name = testSchema(options.prefix)): string => {
    if (!schemas.includes(name)) schemas.push(name);
    return name;
  };
  return {
    schema: schemaOf,
    /** Stores the test opened itself, closed after it. */
    closeAfterTest(...stores: PostgresStorage[]): void {
      open.push(...stores);
    },
    /** A store on `schema` (a new one by default), seeded with the file's fixture unless `seed` is false. */
    async store(schema = schemaOf(), seed = true): Promise<PostgresStorage> {
      const made = await createPostgresStorage({
        connectionString: POSTGRES_URL,
        schema: schemaOf(schema),
        maxConnections: options.maxConnections,
      });
      open.push(made);
      if (seed) await made.seed(parseFixture((options.fixture ?? conformanceFixture)()));
      return made;
    },
  };
}
