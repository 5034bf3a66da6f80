/**
 * What the hostile-input suites share: the API on each store (memory, SQLite,
 * PostgreSQL) with a fixture that has a schemaless input table and an open
 * webhook endpoint, a request helper that sends the path exactly as given
 * (as the Node adapter does), the error-envelope check, and the store
 * invariants a refused write must leave intact.
 */
import { expect } from "vitest";
import { createDataApi, type DataApi } from "../../src/server/api.js";
import { parseFixture } from "../../src/fixture/load.js";
import type { ApiRequest, ReplyBody } from "../../src/http/types.js";
import { createFixedClock } from "../../src/memory/fixed-clock.js";
import { createMemoryStorage } from "../../src/memory/memory-storage.js";
import type { Storage } from "../../src/ports/storage.js";
import { createPostgresStorage } from "../../src/postgres/index.js";
import { createSqliteStorage } from "../../src/sqlite/index.js";
import { webhookFixture } from "../../src/testing/conformance/webhooks.js";
import { TOKENS } from "../support/fixture.js";
import { dropSchemas, POSTGRES_URL, postgresSkipReason, testSchema } from "../support/services.js";

export { TOKENS };
export const NOW = "2026-11-01T12:00:00.000Z";

/** A table without declared columns: any key may be written, so a body's values reach the store as sent. */
export const FREE_TABLE = "tbl_free";
/** The open webhook endpoint (no signing secret) and the dataset its deliveries land in. */
export const HOOK = "hook-open";
export const HOOK_DATASET = "ds_conn_hook_open";

export type StoreName = "memory" | "sqlite" | "postgres";

export interface Opened {
  storage: Storage;
  close(): Promise<void>;
}

export interface StoreCase {
  name: StoreName;
  /** Why this store is skipped here (PostgreSQL down, locally), else undefined. */
  skip: string | undefined;
  open(): Promise<Opened>;
}

/** The three stores. PostgreSQL is skipped with a visible message when it is down (an error when CI=true). */
export async function storeCases(): Promise<StoreCase[]> {
  const pgSkip = await postgresSkipReason();
  return [
    { name: "memory", skip: undefined, open: async () => ({ storage: createMemoryStorage(), close: async () => {} }) },
    {
      name: "sqlite",
      skip: undefined,
      open: async () => {
        const storage = createSqliteStorage({ path: ":memory:" });
        return { storage, close: () => storage.close() };
      },
    },
    {
      name: "postgres",
      skip: pgSkip,
      open: async () => {
        const schema = testSchema("dp_hostile");
        const storage = await createPostgresStorage({ connectionString: POSTGRES_URL, schema, maxConnections: 5 });
        return {
          storage,
          close: async () => {
            await storage.close();
            await dropSchemas([schema]);
          },
        };
      },
    },
  ];
}

/** The conformance fixture with webhook endpoints, plus a schemaless table the sync key may write. */
export function hostileFixture() {
  const fixture = webhookFixture();
  fixture.tables = [
    ...fixture.tables,
    {
      id: FREE_TABLE,
      teamId: "team_ops",
      name: "Free-form notes",
      columns: [],
      rows: [
        { _id: "row_free_1", note: "seed", _createdAt: "2026-10-01T00:00:00Z", _updatedAt: "2026-10-01T00:00:00Z" },
      ],
      updatedAt: "2026-10-01T00:00:00Z",
    },
  ] as typeof fixture.tables;
  fixture.apiKeys = fixture.apiKeys.map((key) =>
    key.id === "key_sync"
      ? { ...key, allowlist: { ...key.allowlist, tables: [...key.allowlist.tables, FREE_TABLE] } }
      : key,
  );
  // Refresh runs of an allowlisted dataset and of one outside the sync key's allowlist (ds_secret).
  const runs = ["ds_stores", "ds_secret"].map((datasetId) => ({
    datasetId,
    startedAt: "2026-10-21T01:00:00Z",
    durationMs: 1000,
    rowsProcessed: 1,
    error: null,
  }));
  return { ...fixture, refreshRuns: runs };
}

export type HostileFixture = ReturnType<typeof hostileFixture>;

export interface Answer {
  status: number;
  headers: Record<string, string>;
  text: string;
  json: any;
}

export interface HostileApi {
  api: DataApi;
  storage: Storage;
  /** Errors the API logged (every 500's cause, failed audit or usage writes): none is expected. */
  logged: string[];
  /**
   * One request with `path` sent as it is (percent-encoding, dot segments and
   * all), the way the Node adapter hands a request target to the core.
   */
  send(
    method: string,
    path: string,
    init?: { token?: string; body?: string | Uint8Array; headers?: Record<string, string> },
  ): Promise<Answer>;
}

/** The API over a seeded store, rate limits off (the fuzz sends many requests at one instant). */
export async function hostileApi(
  opened: Opened,
  options: Parameters<typeof createDataApi>[0] & { fixture?: (fixture: HostileFixture) => unknown } = {},
): Promise<HostileApi> {
  const { fixture: change, ...apiOptions } = options;
  const fixture = hostileFixture();
  await opened.storage.seed(parseFixture(change ? change(fixture) : fixture));
  const logged: string[] = [];
  const api = createDataApi({
    storage: opened.storage,
    clock: createFixedClock(NOW),
    webhookRatePerSecond: 0,
    apiRatePerSecond: 0,
    idempotencyWaitMs: 0,
    logger: (message, error) => logged.push(`${message}: ${error instanceof Error ? error.stack : String(error)}`),
    ...apiOptions,
  });
  async function send(
    method: string,
    path: string,
    init: { token?: string; body?: string | Uint8Array; headers?: Record<string, string> } = {},
  ) {
    const sent: Record<string, string> = {};
    for (const [name, value] of Object.entries(init.headers ?? {})) sent[name.toLowerCase()] = value;
    if (init.token) sent.authorization = `Bearer ${init.token}`;
    const bytes =
      init.body === undefined
        ? new Uint8Array(0)
        : typeof init.body === "string"
          ? new TextEncoder().encode(init.body)
          : init.body;
    if (init.body !== undefined) {
      sent["content-type"] ??= "application/json";
      sent["content-length"] = String(bytes.byteLength);
    }
    const request: ApiRequest = {
      method,
      url: `http://localhost${path}`,
      path,
      headers: { get: (name) => sent[name.toLowerCase()] ?? null, keys: () => Object.keys(sent) },
      clientAddress: "198.51.100.7",
      readBody: () => bytes,
    };
    const reply = await api.handle(request);
    const text = await bodyText(reply.body);
    let json: any = null;
    try {
      json = text === "" ? null : JSON.parse(text);
    } catch {
      json = null;
    }
    return { status: reply.status, headers: reply.headers, text, json };
  }
  // One delivery, so the webhook dataset has columns to filter on (`event`).
  const seeded = await send("POST", `/api/webhooks/${HOOK}`, { body: '{"event":"seed"}' });
  if (seeded.status !== 200) throw new Error(`the seed delivery failed: ${seeded.status} ${seeded.text}`);
  return { api, storage: opened.storage, logged, send };
}

async function bodyText(body: ReplyBody): Promise<string> {
  if (body === null) return "";
  if (typeof body === "string") return body;
  if (body instanceof Uint8Array) return new TextDecoder().decode(body);
  let out = "";
  for await (const chunk of body) out += typeof chunk === "string" ? chunk : new TextDecoder().decode(chunk);
  return out;
}

/** No 5xx, and every 4xx carries the error envelope (JSON, code, message, requestId). */
export function expectHandled(answer: Answer, what: string): void {
  if (answer.status >= 500) throw new Error(`${what} answered ${answer.status}: ${answer.text.slice(0, 300)}`);
  if (answer.status >= 400) {
    expect(answer.headers["content-type"], what).toMatch(/^application\/json/);
    const error = answer.json?.error;
    if (typeof error?.code !== "string" || typeof error?.message !== "string" || typeof error?.requestId !== "string") {
      throw new Error(`${what} answered ${answer.status} without the error envelope: ${answer.text.slice(0, 300)}`);
    }
  }
}

/** What a refused write must leave as it was: how many rows the free table and the webhook dataset hold. */
export interface Counts {
  tableRows: number;
  hookRows: number;
}

/**
 * The counts, read through the API; each read must succeed (the table and the dataset are still readable, filtered
 * too).
 */
export async function counts(h: HostileApi): Promise<Counts> {
  const table = await h.send("GET", `/api/v1/tables/${FREE_TABLE}/rows?limit=1`, { token: TOKENS.sync });
  if (table.status !== 200)
    throw new Error(`the free table is no longer readable: ${table.status} ${table.text.slice(0, 300)}`);
  const hook = await h.send("GET", `/api/v1/datasets/${HOOK_DATASET}/rows?maxRows=1`, { token: TOKENS.sessionAda });
  if (hook.status !== 200)
    throw new Error(`the webhook dataset is no longer readable: ${hook.status} ${hook.text.slice(0, 300)}`);
  const filtered = await h.send(
    "GET",
    `/api/v1/datasets/${HOOK_DATASET}/rows?maxRows=1&filters=${encodeURIComponent('{"event":"seed"}')}`,
    {
      token: TOKENS.sessionAda,
    },
  );
  if (filtered.status !== 200)
    throw new Error(`a filtered read of the webhook dataset fails: ${filtered.status} ${filtered.text.slice(0, 300)}`);
  return { tableRows: table.json.metadata.totalRows, hookRows: hook.json.metadata.totalRows };
}
