import type { Cache } from "../ports/cache.js";
import type { Clock } from "../base/clock.js";
import type { ConnectorRegistry } from "../ports/connector.js";
import type { RateLimiter } from "../ports/rate-limiter.js";
import type { Storage } from "../ports/storage.js";

/** The ports every handler receives. */
export interface Ports {
  storage: Storage;
  cache: Cache;
  clock: Clock;
  rateLimiter: RateLimiter;
  connectors: ConnectorRegistry;
}
