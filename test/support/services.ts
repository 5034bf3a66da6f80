import pg from "pg";
import { Redis } from "ioredis";

export const POSTGRES_URL = process.env.DATAPORT_TEST_POSTGRES ?? "postgres://postgres@127.0.0.1:5432/test";
export const REDIS_URL = process.env.DATAPORT_TEST_REDIS ?? "redis://127.0.0.1:6379";

/**
 * Whether a service answers. Locally a missing service skips its suites with
 * a visible reason; with CI=true it is an error instead.
 */
async function probe(name: string, check: () => Promise<void>): Promise<string | undefined> {
  try {
    await check();
    return undefined;
  } catch (error) {
    const reason = `${name} unreachable (${(error as Error).message}); skipping`;
    if (process.env.CI === "true") throw new Error(`${name} is required when CI=true: ${(error as Error).message}`);
    console.warn(`\n  ⚠ ${reason}\n`);
    return reason;
  }
}

/** undefined when PostgreSQL answers, else the reason to skip. */
export function postgresSkipReason(): Promise<string | undefined> {
  return probe("PostgreSQL", async () => {
    const client = new pg.Client({ connectionString: POSTGRES_URL, connectionTimeoutMillis: 2000 });
    try {
      await client.connect();
      await client.query("select 1");
    } finally {
      await client.end().catch(() => {});
    }
  });
}

/** undefined when Redis answers, else the reason to skip. */
export function redisSkipReason(): Promise<string | undefined> {
  return probe("Redis", async () => {
    const redis = new Redis(REDIS_URL, {
      lazyConnect: true,
      connectTimeout: 2000,
      maxRetriesPerRequest: 0,
      retryStrategy: () => null,
    });
    redis.on("error", () => {});
    try {
      await redis.connect();
      await redis.ping();
    } finally {
      redis.disconnect();
    }
  });
}

/** A schema name unique to this process and call. */
let counter = 0;
export function testSchema(prefix = "dp_test"): string {
  return `${prefix}_${process.pid}_${Date.now().toString(36)}_${++counter}`;
}

/** Drop schemas created by a test run. */
export async function dropSchemas(schemas: string[]): Promise<void> {
  if (schemas.length === 0) return;
  const client = new pg.Client({ connectionString: POSTGRES_URL });
  await client.connect();
  try {
    for (const schema of schemas.splice(0)) await client.query(`drop schema if exists "${schema}" cascade`);
  } finally {
    await client.end();
  }
}
