import { createServer, type Server } from "node:http";
import { toNodeHandler } from "../../adapters/node.js";
import { createDataApi, type DataApi } from "../../src/api.js";
import { type FixtureFs, readFixtureFile } from "../../src/fixture/load.js";
import { createOffsetClock, systemClock } from "../../src/memory/clock.js";
import type { Storage } from "../../src/ports/storage.js";
import type { ServerConfig } from "./cli.js";
import { openStorage } from "./storage.js";

export interface RunningServer {
  api: DataApi;
  server: Server;
  url: string;
  storage: Storage;
  close(): Promise<void>;
}

/**
 * Start the example server: open the store, load the fixture into it when it
 * is empty, listen. Throws FixtureError for a bad fixture (nothing loaded).
 */
export async function startServer(config: ServerConfig, io: { fs: FixtureFs & { mkdirSync(path: string, options: { recursive: true }): unknown }; env: Record<string, string | undefined> }): Promise<RunningServer> {
  const space = readFixtureFile(io.fs, config.fixture, { env: io.env });
  const clock = config.now === null ? systemClock : createOffsetClock(config.now);
  const ports = await openStorage(config, io.fs, clock);
  try {
    await ports.storage.seed(space);
  } catch (error) {
    await ports.close();
    throw error;
  }
  const api = createDataApi({
    ...ports.options,
    clock,
    appUrl: config.appUrl,
    viewUrl: config.viewUrl,
    auditLagSeconds: config.auditLagSeconds,
    webhookRatePerSecond: config.webhookRatePerSecond,
  });
  const server = createServer(toNodeHandler(api));
  server.keepAliveTimeout = 65_000;
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(config.port, config.host, () => resolve());
  });
  const address = server.address();
  const port = typeof address === "object" && address ? address.port : config.port;
  const host = config.host.includes(":") ? `[${config.host}]` : config.host;
  return {
    api,
    server,
    url: `http://${host}:${port}`,
    storage: ports.storage,
    async close() {
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeIdleConnections();
      });
      await ports.close();
    },
  };
}
