import { describe, expect, it } from "vitest";
import { storageUnavailable } from "../../src/base/api-error.js";
import { createMemoryStorage } from "../../src/memory/index.js";
import type { Metrics, StorageOutcome } from "../../src/ports/metrics.js";
import { reportsOwnFaults, UNBOUNDED_CALLS, wrapStoreCalls } from "../../src/sql/store-calls.js";

const never = () => new Promise<never>(() => {});

/** Metrics that keep only the storage calls. */
function storageCalls(): { metrics: Metrics; calls: Array<[string, StorageOutcome]> } {
  const calls: Array<[string, StorageOutcome]> = [];
  const metrics = {
    storageOperation: (name: string, outcome: StorageOutcome) => calls.push([name, outcome]),
  } as unknown as Metrics;
  return { metrics, calls };
}

describe("the store-call wrapper (sql/store-calls.ts)", () => {
  it("returns the store itself when there is no deadline, fault mapping or metrics", () => {
    const store = createMemoryStorage();
    expect(wrapStoreCalls(store, { timeoutMs: 0 })).toBe(store);
    expect(wrapStoreCalls(store, { timeoutMs: Number.POSITIVE_INFINITY, metrics: null })).toBe(store);
  });

  it("has one list of unbounded calls: the bulk row writes", () => {
    expect([...UNBOUNDED_CALLS].sort()).toEqual(["replaceDatasetRows", "writeDatasetRows"]);
  });

  it("bounds every other call with 503 storage_unavailable and Retry-After, and leaves the bulk row writes unbounded", async () => {
    const store = createMemoryStorage();
    store.catalog.getDataset = never;
    store.rows.replaceDatasetRows = never;
    store.rows.writeDatasetRows = never;
    const wrapped = wrapStoreCalls(store, { timeoutMs: 40, subject: "the database" });
    await expect(wrapped.catalog.getDataset("ds_x")).rejects.toMatchObject({
      status: 503,
      code: "storage_unavailable",
      message: "the database did not answer within 40 ms; retry later",
      headers: { "retry-after": "1" },
    });
    const bulk = [
      wrapped.rows.replaceDatasetRows("ds_x", { rows: [], columns: [], refreshedAt: "2026-01-01T00:00:00.000Z" }),
      wrapped.rows.writeDatasetRows({
        datasetId: "ds_x",
        mode: "append",
        rows: (async function* () {})(),
        columns: () => [],
        updatedAt: "",
      }),
    ].map((p) =>
      p.then(
        () => "settled",
        () => "settled",
      ),
    );
    const waited = await Promise.race([
      Promise.all(bulk),
      new Promise((resolve) => setTimeout(() => resolve("still running"), 300)),
    ]);
    expect(waited).toBe("still running");
  });

  it("reports a call's failure as the store's fault mapping says, and leaves other errors as they are", async () => {
    const store = createMemoryStorage();
    const lost = Object.assign(new Error("Connection terminated unexpectedly"), { code: "ECONNRESET" });
    store.identity.getTeam = () => Promise.reject(lost);
    store.identity.getUser = () => Promise.reject(new TypeError("a bug"));
    const reported = (error: unknown) =>
      (error as { code?: string }).code === "ECONNRESET" ? storageUnavailable(undefined, { cause: error }) : error;
    const wrapped = wrapStoreCalls(store, { timeoutMs: 0, reported });
    await expect(wrapped.identity.getTeam("team_x")).rejects.toMatchObject({
      status: 503,
      code: "storage_unavailable",
      cause: lost,
    });
    await expect(wrapped.identity.getUser("usr_x")).rejects.toThrow(TypeError);
    // The lifecycle is not wrapped.
    await expect(wrapped.ping()).resolves.toBeUndefined();
  });

  it("leaves a method that reports its own faults as it is when only the fault mapping is asked, and wraps it for anything more", async () => {
    const store = createMemoryStorage();
    const own = reportsOwnFaults(async (id: string) => {
      throw new Error(`raw ${id}`);
    });
    store.catalog.getDataset = own;
    const mapped = wrapStoreCalls(store, { timeoutMs: 0, reported: () => storageUnavailable() });
    // The area's own method, read through the wrapper (no promise of the wrapper's on a hot path).
    expect(mapped.catalog.getDataset).toBe(own);
    await expect(mapped.catalog.getDataset("ds_x")).rejects.toThrow("raw ds_x");
    expect(mapped.catalog.listConnections).not.toBe(store.catalog.listConnections);
    // A deadline or metrics still wrap it.
    const { metrics, calls } = storageCalls();
    const measured = wrapStoreCalls(store, { timeoutMs: 0, reported: () => storageUnavailable(), metrics });
    expect(measured.catalog.getDataset).not.toBe(own);
    await expect(measured.catalog.getDataset("ds_x")).rejects.toMatchObject({ code: "storage_unavailable" });
    expect(calls).toEqual([["getDataset", "timeout"]]);
  });

  it("measures each call under its own name: ok, error, or timeout for a 503", async () => {
    const store = createMemoryStorage();
    store.identity.getUser = () => Promise.reject(new Error("no"));
    store.identity.getBusiness = never;
    const { metrics, calls } = storageCalls();
    const wrapped = wrapStoreCalls(store, { timeoutMs: 30, metrics });
    await wrapped.identity.getTeam("team_x");
    await wrapped.identity.getUser("usr_x").catch(() => {});
    await wrapped.identity.getBusiness("biz_x").catch(() => {});
    expect(calls).toEqual([
      ["getTeam", "ok"],
      ["getUser", "error"],
      ["getBusiness", "timeout"],
    ]);
  });
});
