import type { DataApiOptions } from "../../src/server/api.js";
import type { Clock } from "../../src/base/clock.js";
import type { PostgresStorage } from "../../src/postgres/index.js";
import { StartError } from "./cli.js";

/** How long the start-up checks wait for PostgreSQL and Redis to answer. */
export const SERVICE_CHECK_TIMEOUT_MS = 3_000;

/**
 * `--db postgres://…[?schema=name]`: the PostgreSQL store. `schema` picks the
 * schema (default `dataport`) and is not passed on to the server.
 */
export async function openPostgres(url: string): Promise<PostgresStorage> {
  const { createPostgresStorage } = await import("../../src/postgres/index.js");
  const { url: server, schema } = postgresTarget(url);
  return createPostgresStorage({ connectionString: server, schema });
}

/**
 * `--redis redis://…[?prefix=name]`: rate limits and the connection cache
 * shared by every instance on that Redis (and prefix, default `dataport:`).
 */
export async function openRedisPorts(
  url: string,
  clock: Clock,
): Promise<{ options: Pick<DataApiOptions, "cache" | "rateLimiter">; close(): Promise<void> }> {
  const { createRedisCache, createRedisRateLimiter } = await import("../../src/redis/index.js");
  const { url: server, prefix } = redisTarget(url);
  const rateLimiter = createRedisRateLimiter({ url: server, prefix });
  const cache = createRedisCache({ url: server, prefix, clock });
  return {
    options: { rateLimiter, cache },
    async close() {
      await Promise.all([rateLimiter.close(), cache.close()]);
    },
  };
}

/** Connect to PostgreSQL once and run `SELECT 1`, or throw a StartError saying why (without the URL's password). */
export async function checkPostgres(url: string, timeoutMs = SERVICE_CHECK_TIMEOUT_MS): Promise<void> {
  const { default: pg } = await import("../../src/peers/pg.js");
  const client = new pg.Client({ connectionString: postgresTarget(url).url, connectionTimeoutMillis: timeoutMs });
  client.on("error", () => {});
  try {
    await withTimeout(
      (async () => {
        await client.connect();
        await client.query("SELECT 1");
      })(),
      timeoutMs,
    );
  } catch (error) {
    throw new StartError(`cannot reach PostgreSQL at ${safeUrl(url)} (--db): ${reason(error, timeoutMs)}`);
  } finally {
    void client.end().catch(() => {});
  }
}

/** Connect to Redis once and PING, or throw a StartError saying why (without the URL's password). */
export async function checkRedis(url: string, timeoutMs = SERVICE_CHECK_TIMEOUT_MS): Promise<void> {
  const { Redis } = await import("../../src/peers/ioredis.js");
  const client = new Redis(redisTarget(url).url, {
    lazyConnect: true,
    connectTimeout: timeoutMs,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
    enableOfflineQueue: false,
  });
  // The socket's error says why ("connect ECONNREFUSED …"); connect() itself only rejects with "Connection is closed."
  let socketError: unknown;
  client.on("error", (error) => (socketError ??= error));
  try {
    await withTimeout(
      (async () => {
        await client.connect();
        await client.ping();
      })(),
      timeoutMs,
    );
  } catch (error) {
    throw new StartError(`cannot reach Redis at ${safeUrl(url)} (--redis): ${reason(socketError ?? error, timeoutMs)}`);
  } finally {
    client.disconnect();
  }
}

/** The PostgreSQL URL without Dataport's own `schema` parameter, and the schema. */
function postgresTarget(url: string): { url: string; schema: string | undefined } {
  const parsed = new URL(url);
  const schema = parsed.searchParams.get("schema") ?? undefined;
  parsed.searchParams.delete("schema");
  return { url: parsed.toString(), schema };
}

/** The Redis URL without Dataport's own `prefix` parameter, and the prefix. */
function redisTarget(url: string): { url: string; prefix: string | undefined } {
  const parsed = new URL(url);
  const prefix = parsed.searchParams.get("prefix") ?? undefined;
  parsed.searchParams.delete("prefix");
  return { url: parsed.toString(), prefix };
}

/** A service URL fit for a message: no user, password or query. */
function safeUrl(url: string): string {
  const parsed = new URL(url);
  parsed.username = "";
  parsed.password = "";
  parsed.search = "";
  return parsed.toString();
}

/** Why a check failed, in one line. */
function reason(error: unknown, timeoutMs: number): string {
  if (error instanceof CheckTimeout || /timeout/i.test(String((error as Error)?.message)))
    return `no answer within ${timeoutMs / 1000} s`;
  // Node reports a refused "localhost" (tried on ::1 and on 127.0.0.1) as an AggregateError without a message.
  const inner: unknown = error instanceof AggregateError && error.errors.length > 0 ? error.errors[0] : error;
  const { message, code } = (inner ?? {}) as { message?: unknown; code?: unknown };
  const text =
    typeof message === "string" && message !== "" ? message : typeof code === "string" ? code : String(inner);
  return text.split("\n")[0]!;
}

class CheckTimeout extends Error {}

function withTimeout<T>(work: Promise<T>, ms: number): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new CheckTimeout()), ms);
  });
  work.catch(() => {}); // a late failure after the timeout has nobody to tell
  return Promise.race([work, timeout]).finally(() => clearTimeout(timer));
}
