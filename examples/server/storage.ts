import { dirname } from "node:path";
import type { DataApiOptions } from "../../src/api.js";
import { createMemoryStorage } from "../../src/memory/storage.js";
import type { Clock } from "../../src/ports/clock.js";
import type { Storage } from "../../src/ports/storage.js";
import { createSqliteStorage } from "../../src/sqlite/index.js";
import type { ServerConfig } from "./cli.js";
import { UsageError } from "./cli.js";
import { openPostgres, openRedisPorts } from "./shared.js";

export interface OpenedPorts {
  storage: Storage;
  /** Ports beyond storage (a shared cache and rate limiter with --redis). */
  options: DataApiOptions;
  close(): Promise<void>;
}

/** `--db`: `:memory:`, a postgres:// URL, or a SQLite file (its folder is created). */
export async function openStorage(
  config: ServerConfig,
  fs: { mkdirSync(path: string, options: { recursive: true }): unknown },
  clock: Clock,
): Promise<OpenedPorts> {
  let storage: Storage;
  if (config.db === ":memory:") {
    storage = createMemoryStorage();
  } else if (/^postgres(ql)?:\/\//.test(config.db)) {
    storage = await openPostgres(config.db);
  } else {
    fs.mkdirSync(dirname(config.db), { recursive: true });
    storage = createSqliteStorage({ path: config.db });
  }
  const shared = config.redis ? openRedisPorts(config.redis, clock) : null;
  return {
    storage,
    options: { storage, ...shared?.options },
    async close() {
      await storage.close();
      await shared?.close();
    },
  };
}
