import { dirname } from "node:path";
import type { DataApiOptions } from "../../src/server/api.js";
import { createMemoryStorage } from "../../src/memory/memory-storage.js";
import type { Clock } from "../../src/base/clock.js";
import type { Storage } from "../../src/ports/storage.js";
import type { ServerConfig } from "./cli.js";
import { checkPostgres, checkRedis, openPostgres, openRedisPorts } from "./shared.js";

export interface OpenedPorts {
  storage: Storage;
  /** Ports beyond storage (a shared cache and rate limiter with --redis). */
  options: DataApiOptions;
  close(): Promise<void>;
}

/**
 * `--db`: `:memory:`, a postgres:// URL, or a SQLite file (its folder is
 * created). PostgreSQL and Redis are reached once, with a short timeout,
 * before anything is opened: an unreachable one stops the start with a
 * StartError naming the flag, instead of requests that hang later. The
 * SQLite, PostgreSQL and Redis modules are loaded only when chosen (pg and
 * ioredis are optional peer dependencies of the package).
 */
export async function openStorage(
  config: ServerConfig,
  fs: { mkdirSync(path: string, options: { recursive: true }): unknown },
  clock: Clock,
): Promise<OpenedPorts> {
  const postgres = /^postgres(ql)?:\/\//.test(config.db);
  if (postgres) await checkPostgres(config.db);
  if (config.redis) await checkRedis(config.redis);
  let storage: Storage;
  if (config.db === ":memory:") {
    storage = createMemoryStorage();
  } else if (postgres) {
    storage = await openPostgres(config.db);
  } else {
    fs.mkdirSync(dirname(config.db), { recursive: true });
    const { createSqliteStorage } = await import("../../src/sqlite/index.js");
    storage = createSqliteStorage({ path: config.db });
  }
  const shared = config.redis ? await openRedisPorts(config.redis, clock) : null;
  return {
    storage,
    options: { storage, ...shared?.options },
    async close() {
      await storage.close();
      await shared?.close();
    },
  };
}
