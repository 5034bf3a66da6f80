import type { Storage } from "../ports/storage.js";
import { describeAnalyticsConformance } from "./conformance/analytics.js";
import { describeAuditConformance } from "./conformance/audit.js";
import { describeCatalogConformance } from "./conformance/catalog.js";
import { describeIdentityConformance } from "./conformance/identity.js";
import { describeLifecycleConformance } from "./conformance/lifecycle.js";
import { describeTablesConformance } from "./conformance/tables.js";
import { describeWebhookConformance } from "./conformance/webhooks.js";

export type { ConformanceOptions, StorageFactory } from "./conformance/harness.js";
import type { ConformanceOptions, StorageFactory } from "./conformance/harness.js";

/**
 * The storage conformance suite, for vitest. Every store Dataport ships runs
 * it; a host that writes its own store runs it too:
 *
 *   runStorageConformance("my store", async () => createMyStore());
 *
 * The factory must return a fresh, EMPTY store on every call.
 */
export function runStorageConformance(name: string, factory: StorageFactory, options: ConformanceOptions = {}): void {
  describeIdentityConformance(name, factory, options);
  describeCatalogConformance(name, factory, options);
  describeAnalyticsConformance(name, factory, options);
  describeTablesConformance(name, factory, options);
  describeWebhookConformance(name, factory, options);
  describeAuditConformance(name, factory, options);
  describeLifecycleConformance(name, factory, options);
}

export type { Storage };

export { runCacheConformance, type CacheConformanceOptions, type CacheFactory } from "./conformance/cache.js";
export { runRateLimiterConformance, type RateLimiterConformanceOptions, type RateLimiterFactory } from "./conformance/rate-limiter.js";
