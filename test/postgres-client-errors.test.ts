import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { checkout, guardClients, isConnectionLost } from "../src/postgres/db.js";
import { type PostgresProxy, startPostgresProxy } from "./support/faults.js";
import { postgresSkipReason } from "./support/services.js";

/**
 * Issue 37: a client released to a waiting `connect()` can receive its
 * backend's FATAL in the same socket read, before the waiter runs; `pg`
 * emits `error` then, and without a listener the process crashes. The
 * proxy makes that read happen every time: the answer to `select 1` and
 * the FATAL of a terminated backend in one write. (Were an `error` left
 * without a listener, vitest would report the uncaught exception and fail.)
 */
const skip = await postgresSkipReason();

describe.skipIf(!!skip)("a pg client losing its backend as it is handed to a waiting connect()", () => {
  let proxy: PostgresProxy;
  const pools: pg.Pool[] = [];

  beforeAll(async () => {
    proxy = await startPostgresProxy();
  });

  afterAll(async () => {
    await Promise.all(pools.map((pool) => pool.end().catch(() => {})));
    await proxy?.close();
  });

  /** A one-connection pool through the proxy, its connection open, idle and armed to end after its next answer. */
  async function armedPool(name: string, guarded: boolean): Promise<pg.Pool> {
    const url = new URL(proxy.url);
    url.searchParams.set("application_name", name);
    const pool = new pg.Pool({ connectionString: url.toString(), max: 1 });
    pools.push(pool);
    pool.on("error", () => {});
    if (guarded) guardClients(pool);
    await pool.query("select 1");
    expect(proxy.terminateAfterNextAnswer(new RegExp(`^${name}$`))).toBe(1);
    return pool;
  }

  it("guardClients: a promise-style connect() waiting for the client gets it broken; no crash", async () => {
    const pool = await armedPool("dp_client_errors_guarded", true);
    // The query takes the one connection; connect() waits for it and is handed it as the FATAL arrives.
    const [answer, waiter] = await Promise.all([pool.query<{ one: number }>("select 1 as one"), pool.connect()]);
    expect(answer.rows).toEqual([{ one: 1 }]);
    const lost = await waiter.query("select 1").then(
      () => null,
      (error: unknown) => error,
    );
    expect(isConnectionLost(lost)).toBe(true);
    waiter.release(lost as Error);
    // The pool connects anew.
    expect((await pool.query<{ two: number }>("select 2 as two")).rows).toEqual([{ two: 2 }]);
  });

  it("checkout: a lease from a host's pool without guardClients has its listener from the first moment", async () => {
    const pool = await armedPool("dp_client_errors_host", false);
    const [answer, lease] = await Promise.all([pool.query<{ one: number }>("select 1 as one"), checkout(pool)]);
    expect(answer.rows).toEqual([{ one: 1 }]);
    const lost = await lease.client.query("select 1").then(
      () => null,
      (error: unknown) => error,
    );
    expect(isConnectionLost(lost)).toBe(true);
    lease.release();
    expect((await pool.query<{ two: number }>("select 2 as two")).rows).toEqual([{ two: 2 }]);
  });
});
