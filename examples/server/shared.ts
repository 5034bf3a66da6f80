import type { Clock } from "../../src/ports/clock.js";
import { createPostgresStorage, type PostgresStorage } from "../../src/postgres/index.js";
import { createRedisCache, createRedisRateLimiter } from "../../src/redis/index.js";
import type { DataApiOptions } from "../../src/api.js";

/**
 * `--db postgres://…[?schema=name]`: the PostgreSQL store. `schema` picks the
 * schema (default `dataport`) and is not passed on to the server.
 */
export function openPostgres(url: string): Promise<PostgresStorage> {
  const parsed = new URL(url);
  const schema = parsed.searchParams.get("schema") ?? undefined;
  parsed.searchParams.delete("schema");
  return createPostgresStorage({ connectionString: parsed.toString(), schema });
}

/**
 * `--redis redis://…[?prefix=name]`: rate limits and the connection cache
 * shared by every instance on that Redis (and prefix, default `dataport:`).
 */
export function openRedisPorts(url: string, clock: Clock): { options: Pick<DataApiOptions, "cache" | "rateLimiter">; close(): Promise<void> } {
  const parsed = new URL(url);
  const prefix = parsed.searchParams.get("prefix") ?? undefined;
  parsed.searchParams.delete("prefix");
  const rateLimiter = createRedisRateLimiter({ url: parsed.toString(), prefix });
  const cache = createRedisCache({ url: parsed.toString(), prefix, clock });
  return {
    options: { rateLimiter, cache },
    async close() {
      await Promise.all([rateLimiter.close(), cache.close()]);
    },
  };
}
