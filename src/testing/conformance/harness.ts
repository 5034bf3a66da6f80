import { afterEach } from "vitest";
import { parseFixture } from "../../fixture/load.js";
import type { Storage } from "../../ports/storage.js";
import { conformanceFixture } from "./fixture.js";

/** Returns a fresh, empty store each call. */
export type StorageFactory = () => Promise<Storage>;

/** Capability flags where a store legitimately differs. */
export interface ConformanceOptions {
  /** Skip the whole suite (e.g. a service is unavailable), with this reason shown. */
  skip?: string;
}

/**
 * A store seeded with the conformance fixture, closed after the test.
 * Use inside `it(...)`.
 */
export function seededStore(factory: StorageFactory): () => Promise<Storage> {
  const open: Storage[] = [];
  afterEach(async () => {
    await Promise.all(open.splice(0).map((s) => s.close()));
  });
  return async () => {
    const store = await factory();
    open.push(store);
    await store.seed(parseFixture(conformanceFixture()));
    return store;
  };
}

/** A fresh empty store, closed after the test. */
export function emptyStore(factory: StorageFactory): () => Promise<Storage> {
  const open: Storage[] = [];
  afterEach(async () => {
    await Promise.all(open.splice(0).map((s) => s.close()));
  });
  return async () => {
    const store = await factory();
    open.push(store);
    return store;
  };
}
