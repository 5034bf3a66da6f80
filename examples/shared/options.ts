import { parseArgs } from "node:util";
import { createDataApi, type DataApi } from "../../src/api.js";
import { parseFixture } from "../../src/fixture/load.js";
import { createOffsetClock } from "../../src/memory/clock.js";
import { createMemoryStorage } from "../../src/memory/storage.js";

/**
 * What the example servers share: the command line of
 * `shared/fixture-format.md` (less `--db` and `--redis`: these examples run
 * on the in-memory store, which needs no native module on any runtime) and
 * an API over the memory ports with the fixture loaded.
 */
export interface ExampleOptions {
  fixture: string;
  port: number;
  host: string;
  now: string | undefined;
  auditLag: number | undefined;
  webhookRate: number | undefined;
  appUrl: string | undefined;
  viewUrl: string | undefined;
}

export class UsageError extends Error {}

export function parseExampleArgs(args: string[], defaultFixture: string): ExampleOptions {
  let values: Record<string, string | undefined>;
  try {
    values = parseArgs({
      args,
      strict: true,
      options: {
        fixture: { type: "string" },
        port: { type: "string" },
        host: { type: "string" },
        now: { type: "string" },
        "audit-lag": { type: "string" },
        "webhook-rate": { type: "string" },
        "app-url": { type: "string" },
        "view-url": { type: "string" },
      },
    }).values as Record<string, string | undefined>;
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
  const number = (name: string, min: number): number | undefined => {
    const text = values[name];
    if (text === undefined) return undefined;
    const value = Number(text);
    if (!/^\d+$/.test(text) || value < min) throw new UsageError(`--${name} must be an integer of at least ${min}`);
    return value;
  };
  const now = values.now;
  if (now !== undefined && !Number.isFinite(Date.parse(now))) throw new UsageError("--now must be an ISO 8601 instant");
  return {
    fixture: values.fixture ?? defaultFixture,
    port: number("port", 0) ?? 8787,
    host: values.host ?? "127.0.0.1",
    now,
    auditLag: number("audit-lag", 0),
    webhookRate: number("webhook-rate", 1),
    appUrl: values["app-url"],
    viewUrl: values["view-url"],
  };
}

/** An API on the in-memory store with the fixture loaded. `readText` is the runtime's own file read. */
export async function createExampleApi(options: ExampleOptions, readText: (path: string) => string): Promise<DataApi> {
  let json: unknown;
  try {
    json = JSON.parse(readText(options.fixture));
  } catch (error) {
    throw new UsageError(`cannot read the fixture ${options.fixture}: ${(error as Error).message}`);
  }
  const space = parseFixture(json);
  const storage = createMemoryStorage();
  await storage.seed(space);
  return createDataApi({
    storage,
    ...(options.now !== undefined && { clock: createOffsetClock(options.now) }),
    ...(options.auditLag !== undefined && { auditLagSeconds: options.auditLag }),
    ...(options.webhookRate !== undefined && { webhookRatePerSecond: options.webhookRate }),
    appUrl: options.appUrl ?? `http://${options.host}:${options.port}`,
    ...(options.viewUrl !== undefined && { viewUrl: options.viewUrl }),
  });
}
