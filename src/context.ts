import type { Credential } from "./auth.js";
import type { AuditEvent } from "./domain/model.js";
import type { TableSchemas } from "./domain/validation.js";
import type { Cache } from "./ports/cache.js";
import type { Clock } from "./ports/clock.js";
import type { ConnectorRegistry } from "./ports/connector.js";
import type { RateLimiter } from "./ports/rate-limiter.js";
import type { Storage } from "./ports/storage.js";

/** Limits and addresses, every one with a default (see `createDataApi`). */
export interface ApiSettings {
  /** Application origin, e.g. `https://bi.example.com`; webhook URLs are built on it. */
  appUrl: string;
  /** Origin of published dashboards: `{viewUrl}/d/{id}`. */
  viewUrl: string;
  /** Largest request body in bytes, API and webhooks (default 1 MiB). */
  maxBodyBytes: number;
  /** Audit feed horizon in seconds (default 5). */
  auditLagSeconds: number;
  /** Per-connection webhook rate limit, requests per second; burst is twice this (default 50). */
  webhookRatePerSecond: number;
  /** Rows kept per webhook connection unless the connection says otherwise (default 10,000). */
  webhookRetainRows: number;
  /**
   * Client addresses of proxies whose `X-Forwarded-For` is believed. Empty
   * (the default) means the adapter's peer address is used as is.
   */
  trustedProxies: readonly string[];
  /**
   * Standard Schema validators (zod, valibot, arktype…) by input-table id,
   * per column and/or for the whole row; their issues answer 422
   * `validation_failed`. Default: none.
   */
  tableSchemas: Readonly<Record<string, TableSchemas>>;
  /**
   * How long a POST whose `Idempotency-Key` is held by a request still
   * running waits for that request to finish (and replays its response)
   * before answering 409 `idempotency_key_in_use`, in ms (default 2000).
   */
  idempotencyWaitMs: number;
}

/** The ports every handler receives. */
export interface Ports {
  storage: Storage;
  cache: Cache;
  clock: Clock;
  rateLimiter: RateLimiter;
  connectors: ConnectorRegistry;
}

/** Per-request context handed to a handler alongside its parsed input. */
export interface HandlerContext extends Ports {
  settings: ApiSettings;
  requestId: string;
  /** The client address (after trusted-proxy resolution). */
  clientAddress: string | null;
  userAgent: string | null;
  /** Log an error without failing the request. */
  log: (message: string, error?: unknown) => void;
  /** Record an audit event without failing the request. */
  audit: (event: Omit<AuditEvent, "id" | "time"> & { time?: string }) => void;
}

/** Context of a route that requires a bearer credential. */
export interface AuthedContext extends HandlerContext {
  credential: Credential;
}
