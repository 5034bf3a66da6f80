import { afterEach } from "vitest";
import type { SeedSpace } from "../../domain/seed-space.js";
import { parseFixture } from "../../fixture/load.js";
import type { Storage } from "../../ports/storage.js";
import type { IdPage } from "../../ports/storage/identity.js";
import { conformanceFixture } from "./fixture.js";

/** Returns a fresh, empty store each call. */
export type StorageFactory = () => Promise<Storage>;

/** Capability flags where a store legitimately differs. */
export interface ConformanceOptions {
  /** Skip the whole suite (e.g. a service is unavailable), with this reason shown. */
  skip?: string;
  /**
   * How a suite puts its fixture into a fresh store; `store.seed(space)`
   * when absent. The identity and credentials suites never seed: they write
   * their data through the area's own methods. The other suites seed; a host
   * checking an area it supplies through `mountStorage` (where seeding fills
   * only the base store) loads that area's part of the space here itself.
   */
  load?: (store: Storage, space: SeedSpace) => Promise<void>;
  /**
   * Cut a store the factory made (seeded, nothing read yet) off its backend,
   * as an outage would: SQLite, its file's connection closed; PostgreSQL,
   * its pool's server gone. The faults suite then checks the fault clause of
   * `Storage`: every area's reads and writes reject with 503
   * `storage_unavailable` and `Retry-After`. Absent, the store cannot fail
   * (memory) and the faults suite is skipped.
   */
  makeUnavailable?: (store: Storage) => Promise<void> | void;
  /**
   * A second store on the same database as `store` (another instance of the
   * application, or another process), closed by the suite. Suites that
   * check what instances share use it; absent (memory), they are skipped.
   */
  sameDatabase?: (store: Storage) => Promise<Storage>;
}

/** Put a space into a fresh store the way the options say. */
export async function loadSpace(store: Storage, space: SeedSpace, options: ConformanceOptions): Promise<void> {
  if (options.load) await options.load(store, space);
  else await store.seed(space);
}

/**
 * A store seeded with the conformance fixture (or `fixture` when given),
 * closed after the test. Use inside `it(...)`.
 */
export function seededStore(
  factory: StorageFactory,
  options: ConformanceOptions = {},
  fixture: () => unknown = conformanceFixture,
): () => Promise<Storage> {
  const fresh = emptyStore(factory);
  return async () => {
    const store = await fresh();
    await loadSpace(store, parseFixture(fixture()), options);
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

/**
 * Every item of an id-paged listing, read `limit` at a time from the start;
 * also checks each page's size and that ids strictly increase.
 */
export async function readAllPages<T extends { id: string }>(
  list: (page: IdPage) => Promise<T[]>,
  limit: number,
): Promise<T[]> {
  const out: T[] = [];
  let after: string | null = null;
  for (let pages = 0; pages < 1000; pages++) {
    const page: T[] = await list({ after, limit });
    if (page.length > limit) throw new Error(`a page of limit ${limit} held ${page.length} items`);
    out.push(...page);
    if (page.length < limit) break;
    after = page.at(-1)!.id;
  }
  for (let i = 1; i < out.length; i++) {
    if (!(out[i - 1]!.id < out[i]!.id)) throw new Error(`ids out of order: ${out[i - 1]!.id} before ${out[i]!.id}`);
  }
  return out;
}

/** Lets other pending work (promises, I/O callbacks) run. */
export const tick = () => new Promise<void>((resolve) => setImmediate(resolve));
