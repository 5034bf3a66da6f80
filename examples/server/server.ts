import { createServer, type Server } from "node:http";
import { toNodeHandler } from "../../adapters/node.js";
import { createDataApi, type DataApi } from "../../src/server/api.js";
import { createJsonLogger } from "../../src/server/logging.js";
import { type FixtureFs, readFixtureFile } from "../../src/fixture/load.js";
import { systemClock } from "../../src/base/clock.js";
import { createOffsetClock } from "../../src/memory/fixed-clock.js";
import type { Metrics } from "../../src/ports/metrics.js";
import type { Storage } from "../../src/ports/storage.js";
import { type ServerConfig, StartError } from "./cli.js";
import { openStorage } from "./storage.js";

/**
 * How long a client may take, so a slow one cannot hold sockets (Node's
 * defaults allow 60 s for headers and 5 minutes for a request, checked only
 * every 30 s). README, "The example server", says the same.
 */
export const SERVER_TIMEOUTS = {
  /** The whole header block, from the first byte of the request. */
  headersMs: 15_000,
  /** The whole request, headers and body (a large bulk upload included). */
  requestMs: 120_000,
  /**
   * An idle keep-alive connection: longer than a load balancer's usual 60 s idle timeout, so the balancer closes first.
   */
  keepAliveMs: 65_000,
  /** A socket with no traffic either way (a client that stops reading its response). */
  idleMs: 60_000,
  /** How often unfinished requests are checked against the first two (Node's default: 30 s). */
  checkEveryMs: 1_000,
} as const;

export interface RunningServer {
  api: DataApi;
  server: Server;
  url: string;
  storage: Storage;
  /**
   * Graceful drain: readiness turns 503, the server stops accepting
   * connections, in-flight requests get `drainTimeoutSeconds` to finish
   * (then their connections are cut), and the store is closed.
   */
  close(): Promise<void>;
}

/**
 * Start the example server: open the store, load the fixture into it when it
 * is empty, listen. Throws FixtureError for a bad fixture (nothing loaded),
 * StartError when a service or the address is not usable (the message names
 * the flag to change).
 */
export async function startServer(
  config: ServerConfig,
  io: {
    fs: FixtureFs & { mkdirSync(path: string, options: { recursive: true }): unknown };
    env: Record<string, string | undefined>;
  },
): Promise<RunningServer> {
  const clock = config.now === null ? systemClock : createOffsetClock(config.now);
  // The demo's times are relative: resolved against the clock the API will run on (so `--now` shows a recent demo).
  const space = readFixtureFile(io.fs, config.fixture, { env: io.env, clock });
  const metrics = config.metrics ? await prometheusMetrics() : undefined;
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
    inboxSize: config.inboxSize,
    inboxDays: config.inboxDays,
    inboxBodyBytes: config.inboxBodyBytes,
    apiRatePerSecond: config.apiRatePerSecond,
    storageTimeoutMs: config.storageTimeoutSeconds * 1000,
    rateLimitFailOpen: config.rateLimitFailOpen,
    upstreamTimeoutMs: config.upstreamTimeoutSeconds * 1000,
    metricsToken: config.metricsToken,
    adminToken: config.adminToken,
    ...(config.log === "json" && { logger: createJsonLogger({ now: () => clock.now() }) }),
    ...(metrics && { metrics }),
  });
  const server = createServer(
    {
      headersTimeout: SERVER_TIMEOUTS.headersMs,
      requestTimeout: SERVER_TIMEOUTS.requestMs,
      connectionsCheckingInterval: SERVER_TIMEOUTS.checkEveryMs,
    },
    toNodeHandler(api),
  );
  server.keepAliveTimeout = SERVER_TIMEOUTS.keepAliveMs;
  server.timeout = SERVER_TIMEOUTS.idleMs;
  try {
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(config.port, config.host, () => resolve());
    });
  } catch (error) {
    await ports.close();
    throw listenError(error, config);
  }
  const address = server.address();
  const port = typeof address === "object" && address ? address.port : config.port;
  const host = config.host.includes(":") ? `[${config.host}]` : config.host;
  return {
    api,
    server,
    url: `http://${host}:${port}`,
    storage: ports.storage,
    async close() {
      api.drain();
      await drainServer(server, config.drainTimeoutSeconds * 1000);
      await ports.close();
    },
  };
}

/** `--metrics` loads prom-client, an optional peer dependency, only when asked for. */
async function prometheusMetrics(): Promise<Metrics> {
  try {
    const { createPrometheusMetrics } = await import("../../src/metrics/index.js");
    return createPrometheusMetrics({ processMetrics: true });
  } catch (error) {
    throw new StartError(`--metrics: ${(error as Error).message}`);
  }
}

/** A failed listen, told as the flag to change. */
function listenError(error: unknown, config: ServerConfig): unknown {
  const code = (error as { code?: unknown })?.code;
  const hostHelp = "pass --host (127.0.0.1: this machine only, 0.0.0.0: every interface)";
  switch (code) {
    case "EADDRINUSE":
      return new StartError(`port ${config.port} is in use; pass --port (another port, or 0 for any free one)`);
    case "EACCES":
      return new StartError(
        `no permission to listen on port ${config.port}; pass --port (above 1023 needs no privileges)`,
      );
    case "EADDRNOTAVAIL":
      return new StartError(`${config.host} is not an address of this machine; ${hostHelp}`);
    case "ENOTFOUND":
    case "EAI_AGAIN":
    case "EAI_NONAME":
      return new StartError(`the host name ${config.host} does not resolve; ${hostHelp}`);
    default:
      return error;
  }
}

/**
 * Stop accepting connections and wait for the open ones to finish their
 * requests. An idle keep-alive connection is closed at once, a busy one as
 * soon as its response is written; whatever is still running after
 * `timeoutMs` has its connection cut.
 */
async function drainServer(server: Server, timeoutMs: number): Promise<void> {
  const closed = new Promise<void>((resolve) => server.close(() => resolve()));
  server.closeIdleConnections();
  const sweep = setInterval(() => server.closeIdleConnections(), 25);
  const cut = setTimeout(() => server.closeAllConnections(), timeoutMs);
  try {
    await closed;
  } finally {
    clearInterval(sweep);
    clearTimeout(cut);
  }
}
