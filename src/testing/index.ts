import type { Storage } from "../ports/storage.js";
import { describeAuditConformance } from "./conformance/audit.js";
import { describeCatalogConformance } from "./conformance/catalog.js";
import { describeChangesConformance } from "./conformance/changes.js";
import { describeCredentialsConformance } from "./conformance/credentials.js";
import { describeDashboardsConformance } from "./conformance/dashboards.js";
import { describeFaultConformance } from "./conformance/faults.js";
import { describeIdentityConformance } from "./conformance/identity.js";
import { describeLifecycleConformance } from "./conformance/lifecycle.js";
import { describeRowsConformance } from "./conformance/rows.js";
import { describeTablesConformance } from "./conformance/tables.js";
import { describeUsageConformance } from "./conformance/usage.js";
import { describeWebhooksConformance } from "./conformance/webhooks.js";
import { describeWebhookLogConformance } from "./conformance/webhook-log.js";

export type { ConformanceOptions, StorageFactory } from "./conformance/harness.js";
import type { ConformanceOptions, StorageFactory } from "./conformance/harness.js";

/**
 * The storage conformance suite, for vitest: every area's suite, the
 * store's lifecycle and its faults (`ConformanceOptions.makeUnavailable`:
 * a store that can fail shows how to cut it off its backend). Every store Dataport ships runs it; a host that writes
 * its own store runs it too:
 *
 *   runStorageConformance("my store", async () => createMyStore());
 *
 * The factory must return a fresh, EMPTY store on every call.
 */
export function runStorageConformance(name: string, factory: StorageFactory, options: ConformanceOptions = {}): void {
  describeIdentityConformance(name, factory, options);
  describeCredentialsConformance(name, factory, options);
  describeCatalogConformance(name, factory, options);
  describeRowsConformance(name, factory, options);
  describeDashboardsConformance(name, factory, options);
  describeUsageConformance(name, factory, options);
  describeTablesConformance(name, factory, options);
  describeWebhooksConformance(name, factory, options);
  describeChangesConformance(name, factory, options);
  describeWebhookLogConformance(name, factory, options);
  describeAuditConformance(name, factory, options);
  describeLifecycleConformance(name, factory, options);
  describeFaultConformance(name, factory, options);
}

/**
 * One suite per storage area (`StorageAreas`), for a host that supplies an
 * area itself and checks it alone through `mountStorage`:
 *
 *   describeIdentityConformance("our users", async () => mountStorage(createMemoryStorage(), { identity: ourIdentity()
 * }));
 *
 * The identity and credentials suites write their data through the area's
 * own methods; the others load a fixture (`ConformanceOptions.load`).
 */
export {
  describeAuditConformance,
  describeCatalogConformance,
  describeChangesConformance,
  describeCredentialsConformance,
  describeDashboardsConformance,
  describeFaultConformance,
  describeIdentityConformance,
  describeLifecycleConformance,
  describeRowsConformance,
  describeTablesConformance,
  describeUsageConformance,
  describeWebhooksConformance,
  describeWebhookLogConformance,
};

export type { Storage };

export { runCacheConformance, type CacheConformanceOptions, type CacheFactory } from "./conformance/cache.js";
export {
  runRateLimiterConformance,
  type RateLimiterConformanceOptions,
  type RateLimiterFactory,
} from "./conformance/rate-limiter.js";
