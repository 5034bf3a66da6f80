import type { Credential } from "../core/auth.js";
import type { ChangeRetention } from "../core/change-retention.js";
import type { ChangeWatch } from "../core/change-watch.js";
import type { Caches } from "../core/caches.js";
import type { AuditEvent } from "../domain/model.js";
import type { Guard } from "../core/guard.js";
import type { WebhookInbox } from "../core/webhook-inbox.js";
import type { Metrics } from "../ports/metrics.js";
import type { Ports } from "./ports.js";
import type { ApiSettings } from "./settings.js";

/** The running API's own state, read by the operations routes (health, metrics) and the instrumented code. */
export interface Operations {
  /** True once `api.drain()` was called: readiness answers 503 `draining`. */
  readonly draining: boolean;
  /** Where measurements go, or null when metrics are off. */
  readonly metrics: Metrics | null;
  /** The instance's one watcher of the store's change signals (long-polls and streams wait on it). */
  readonly changeWatch?: ChangeWatch;
  /** Trims the change log now and then (`changeRetentionDays`); the requests that read or write it call `due()`. */
  readonly changeRetention?: ChangeRetention;
}

/** Per-request context handed to a handler alongside its parsed input. */
export interface HandlerContext extends Ports {
  settings: ApiSettings;
  requestId: string;
  /** The client address (after trusted-proxy resolution). */
  clientAddress: string | null;
  userAgent: string | null;
  /**
   * The request's signal, aborted when the client goes away before the
   * answer (a long-poll then frees its place); undefined when the adapter
   * cannot tell. A function: the signal is made only when asked for.
   */
  signal?: () => AbortSignal | undefined;
  /** Log an error without failing the request. */
  log: (message: string, error?: unknown) => void;
  /** Tell the logger what is going on (`Logger.info`), when it listens; absent otherwise. */
  info?: (message: string, fields: Record<string, unknown>) => void;
  operations: Operations;
  /**
   * Record an audit event without failing the request: resolves once the
   * store has it, or once its write failed (logged); never rejects. A
   * handler that serves data awaits it before answering, so an answered
   * read is on record even if the process dies right after.
   */
  audit: (event: Omit<AuditEvent, "id" | "time"> & { time?: string }) => Promise<void>;
  /** This API instance's caches (src/core/caches.ts). */
  caches: Caches;
  /** This API instance's connection guard: cached answers, single-flight, upstream rate limits (src/core/guard.ts). */
  guard: Guard;
  /** This API instance's webhook delivery log writer: where refused deliveries go (src/core/webhook-inbox.ts). */
  inbox: WebhookInbox;
}

/** Context of a route that requires a bearer credential. */
export interface AuthedContext extends HandlerContext {
  credential: Credential;
}
