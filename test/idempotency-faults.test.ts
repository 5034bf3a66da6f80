import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createDataApi } from "../src/server/api.js";
import { parseFixture } from "../src/fixture/load.js";
import { createPostgresStorage, type PostgresStorage, type PostgresStorageOptions } from "../src/postgres/index.js";
import type { Storage } from "../src/ports/storage.js";
import { createSqliteStorage } from "../src/sqlite/index.js";
import { conformanceFixture, TOKENS } from "../src/testing/conformance/fixture.js";
import { type PostgresProxy, startPostgresProxy, startPrivatePostgres, terminateBackends } from "./support/faults.js";

/**
 * Issue 37: a table write under an Idempotency-Key stores one row whatever
 * happens to the first attempt — a lock held by another connection, a
 * connection that stalls before or after COMMIT, a terminated backend —
 * and the retry learns the outcome: the first answer once the write
 * committed, a fresh write once it is known not to have. On PostgreSQL
 * (stores in this process, through a TCP proxy of the file's own where a
 * connection must stall) and on SQLite (a second connection holding the
 * write lock).
 *
 * The PostgreSQL part holds write transactions open for seconds on purpose,
 * so it runs on a server of its own: on the shared one they would hold back
 * every other test's audit feed (its horizon is the oldest transaction of
 * the whole cluster).
 */
const server = await startPrivatePostgres();
afterAll(() => server?.stop());

/** A refusal must come at least this quickly (slack for a loaded 2-core machine). */
const QUICK_MS = 3000;

interface Answer {
  status: number;
  code: string | null;
  retryAfter: string | null;
  replayed: boolean;
  ms: number;
  json: Record<string, unknown>;
}

type Api = ReturnType<typeof createDataApi>;

function apiOn(storage: Storage): Api {
  return createDataApi({ storage, logger: () => {} });
}

async function write(api: Api, method: "POST" | "PATCH", path: string, key: string, body: unknown): Promise<Answer> {
  const started = performance.now();
  const res = await api.fetch(
    new Request(`http://dataport.test/api/v1/tables/tbl_targets/rows${path}`, {
      method,
      headers: { authorization: `Bearer ${TOKENS.sync}`, "content-type": "application/json", "idempotency-key": key },
      body: JSON.stringify(body),
    }),
  );
  const json = (await res.json()) as Record<string, unknown>;
  return {
    status: res.status,
    code: (json.error as { code?: string } | undefined)?.code ?? null,
    retryAfter: res.headers.get("retry-after"),
    replayed: res.headers.get("idempotent-replayed") === "true",
    ms: performance.now() - started,
    json,
  };
}

const post = (api: Api, key: string, region: string) => write(api, "POST", "", key, { region, target: 1 });

/** `attempt` again (after a 503 or a 409 idempotency_key_in_use, as a client would) until it is answered otherwise. */
async function retried(attempt: () => Promise<Answer>, tries = 40): Promise<Answer> {
  let answer = await attempt();
  for (let i = 0; (answer.status === 503 || answer.code === "idempotency_key_in_use") && i < tries; i++) {
    await new Promise((resolve) => setTimeout(resolve, 200));
    answer = await attempt();
  }
  return answer;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe.skipIf(!server)("an Idempotency-Key under faults (PostgreSQL)", () => {
  const url = server?.url ?? "";
  const schema = "dp_idem_faults";
  const app = `dp_idem_${process.pid}`;
  let proxy: PostgresProxy;
  let admin: pg.Client;
  const stores: PostgresStorage[] = [];

  beforeAll(async () => {
    proxy = await startPostgresProxy(url);
    admin = new pg.Client({ connectionString: url });
    await admin.connect();
    const seeding = await open({});
    await seeding.seed(parseFixture(conformanceFixture()));
  });

  afterAll(async () => {
    await Promise.all(stores.map((s) => s.close().catch(() => {})));
    await admin?.end();
    await proxy?.close();
  });

  /** A store on the file's schema: straight to PostgreSQL, or through the proxy under `name`. */
  async function open(options: Partial<PostgresStorageOptions>, name: string | null = null): Promise<PostgresStorage> {
    const target = new URL(name === null ? url : proxy.url);
    target.searchParams.set("application_name", name ?? `${app}_direct`);
    const connectionString = target.toString();
    const store = await createPostgresStorage({
      connectionString,
      schema,
      maxConnections: 4,
      ...options,
      log: () => {},
    });
    stores.push(store);
    return store;
  }

  /** How many rows of tbl_targets carry `region`. */
  async function rowsOf(region: string): Promise<number> {
    const { rows } = await admin.query<{ n: string }>(
      `select count(*) as n from "${schema}".table_rows where table_id = 'tbl_targets' and row->>'region' = $1`,
      [region],
    );
    return Number(rows[0]!.n);
  }

  /** Another connection holding an ACCESS EXCLUSIVE lock on the table rows until `release()`. */
  async function lockRows(): Promise<{ release(): Promise<void> }> {
    const locker = new pg.Client({ connectionString: url });
    await locker.connect();
    await locker.query(`begin; lock table "${schema}".table_rows in access exclusive mode`);
    return {
      async release() {
        await locker.query("commit");
        await locker.end();
      },
    };
  }

  it("answers a quick 503 while another connection holds the table locked; writes once after", async () => {
    const api = apiOn(await open({}));
    const lock = await lockRows();
    let during: Answer[];
    try {
      during = [await post(api, "held-1", "held-1"), await post(api, "held-1", "held-1")];
    } finally {
      await lock.release();
    }
    // The lock bound (2 s), not the 10 s call deadline, ends each wait; nothing was stored, the key is free.
    const refused = [503, "storage_unavailable", "1", true];
    expect(during.map((a) => [a.status, a.code, a.retryAfter, a.ms < QUICK_MS])).toEqual([refused, refused]);
    expect(await rowsOf("held-1")).toBe(0);
    const after = await post(api, "held-1", "held-1");
    expect([after.status, after.replayed]).toEqual([201, false]);
    const again = await post(api, "held-1", "held-1");
    expect([again.status, again.replayed, again.json._id]).toEqual([201, true, after.json._id]);
    expect(await rowsOf("held-1")).toBe(1);
  });

  it("replays to the retry a write that timed out on a lock and committed later; never writes again", async () => {
    // No lock bound: the first attempt outlives its 800 ms call deadline and commits once the lock goes.
    const api = apiOn(await open({ lockTimeoutMs: 0, callTimeoutMs: 800 }));
    const lock = await lockRows();
    let first: Answer;
    let retry: Answer;
    try {
      first = await post(api, "late-1", "late-1");
      // The first attempt's transaction holds the key, uncommitted: the retry waits on it.
      retry = await post(api, "late-1", "late-1");
    } finally {
      await lock.release();
    }
    expect([first.status, first.code]).toEqual([503, "storage_unavailable"]);
    expect([retry.status, retry.code]).toEqual([503, "storage_unavailable"]);
    const learned = await retried(() => post(api, "late-1", "late-1"));
    expect([learned.status, learned.replayed]).toEqual([201, true]);
    expect(await rowsOf("late-1")).toBe(1);
  });

  it("ends a transaction whose connection stalls before COMMIT (idle bound): the retry writes once, soon", async () => {
    const name = `${app}_stall_before`;
    const bounds = { idleTransactionTimeoutMs: 1000, callTimeoutMs: 1500, statementTimeoutMs: 4000 };
    const api = apiOn(await open(bounds, name));
    const stalled = proxy.stallAfterSending(new RegExp(`^${name}$`), "set response");
    const first = await post(api, "stall-1", "stall-1");
    expect(await stalled).toBe(name);
    expect([first.status, first.code, first.retryAfter]).toEqual([503, "storage_unavailable", "1"]);
    const started = performance.now();
    const retry = await retried(() => post(api, "stall-1", "stall-1"));
    expect([retry.status, retry.replayed]).toEqual([201, false]);
    // Not the 60 s lease of old: the server ended the silent transaction after its idle bound.
    expect(performance.now() - started).toBeLessThan(8000);
    expect(await rowsOf("stall-1")).toBe(1);
    expect((await post(api, "stall-1", "stall-1")).replayed).toBe(true);
  });

  it("replays a write whose COMMIT reached the server but whose answer was lost to a stalled connection", async () => {
    const name = `${app}_stall_after`;
    const api = apiOn(await open({ callTimeoutMs: 1500, statementTimeoutMs: 4000 }, name));
    const stalled = proxy.stallAfterSending(new RegExp(`^${name}$`), "set response", 1);
    const first = await post(api, "stall-2", "stall-2");
    await stalled;
    expect([first.status, first.code]).toEqual([503, "storage_unavailable"]);
    const retry = await retried(() => post(api, "stall-2", "stall-2"));
    expect([retry.status, retry.replayed]).toEqual([201, true]);
    expect(await rowsOf("stall-2")).toBe(1);
  });

  it("rolls back a write whose backend is terminated before COMMIT: the retry writes once, at once", async () => {
    const name = `${app}_terminated`;
    const api = apiOn(await open({ callTimeoutMs: 5000 }, name));
    const stalled = proxy.stallAfterSending(new RegExp(`^${name}$`), "set response");
    const answer = post(api, "kill-1", "kill-1");
    await stalled;
    expect(await terminateBackends(name, url)).toBeGreaterThan(0);
    const first = await answer;
    expect([first.status, first.code, first.ms < QUICK_MS]).toEqual([503, "storage_unavailable", true]);
    const retry = await post(api, "kill-1", "kill-1");
    expect([retry.status, retry.replayed]).toEqual([201, false]);
    expect(await rowsOf("kill-1")).toBe(1);
  });

  it("keeps a healthy instance's writes from queueing behind another's stalled transaction", async () => {
    const name = `${app}_stalled_instance`;
    const bounds = { idleTransactionTimeoutMs: 3000, callTimeoutMs: 1000, statementTimeoutMs: 6000 };
    const stalledApi = apiOn(await open(bounds, name));
    const healthy = apiOn(await open({ lockTimeoutMs: 500 }));
    const stalled = proxy.stallAfterSending(new RegExp(`^${name}$`), "set response");
    // The stalled instance's PATCH holds row_1's lock (and its key), its connection silent.
    const held = await write(stalledApi, "PATCH", "/row_1", "patch-stalled", { target: 5 });
    await stalled;
    expect(held.status).toBe(503);
    const blocked = await write(healthy, "PATCH", "/row_1", "patch-healthy", { target: 6 });
    expect([blocked.status, blocked.code, blocked.retryAfter]).toEqual([503, "storage_unavailable", "1"]);
    expect(blocked.ms).toBeLessThan(QUICK_MS);
    // Once the server ends the silent transaction (3 s), the healthy instance writes.
    const done = await retried(() => write(healthy, "PATCH", "/row_1", "patch-healthy", { target: 6 }));
    expect([done.status, done.json.target]).toEqual([200, 6]);
    const { rows } = await admin.query<{ n: string }>(
      "select count(*) as n from pg_stat_activity where application_name = $1 and state like 'idle in transaction%'",
      [name],
    );
    expect(rows[0]!.n).toBe("0");
  });
});

describe("an Idempotency-Key under faults (SQLite)", () => {
  const dir = mkdtempSync(join(tmpdir(), "dataport-idem-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("stores neither row nor key while another connection holds the write lock; the retry writes once", async () => {
    const path = join(dir, "held.sqlite");
    const storage = createSqliteStorage({ path, busyTimeoutMs: 100 });
    try {
      await storage.seed(parseFixture(conformanceFixture()));
      const api = apiOn(storage);
      const holder = new Database(path);
      holder.exec("BEGIN IMMEDIATE");
      let first: Answer;
      try {
        first = await post(api, "held-s", "held-s");
      } finally {
        holder.exec("COMMIT");
      }
      const held = "SELECT count(*) AS n FROM table_rows WHERE data ->> '$.region' = 'held-s'";
      const rows = holder.prepare<[], { n: number }>(held);
      const count = () => rows.get()!;
      const keys = () => holder.prepare<[], { n: number }>("SELECT count(*) AS n FROM idempotency_keys").get()!;
      expect(first.status).toBe(503);
      expect([count().n, keys().n]).toEqual([0, 0]);
      const retry = await post(api, "held-s", "held-s");
      expect([retry.status, retry.replayed]).toEqual([201, false]);
      const again = await post(api, "held-s", "held-s");
      expect([again.status, again.replayed, again.json._id]).toEqual([201, true, retry.json._id]);
      expect([count().n, keys().n]).toEqual([1, 1]);
      holder.close();
    } finally {
      await storage.close();
    }
  });
});
