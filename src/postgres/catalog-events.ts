import { createHash } from "node:crypto";
import pg from "../peers/pg.js";
import { withTimeout } from "../base/timeout.js";
import { quoteIdent } from "../sql/literals.js";

/**
 * Whether the catalog (connections, and which datasets exist and belong to
 * which connection) may have changed, so answers derived from it (webhook
 * endpoints) can be remembered between changes.
 *
 * Migration 4's triggers notify the schema's channel on every such change,
 * whoever makes it. One dedicated client per store LISTENs there (opened on
 * first use, not taken from the pool); a notification, this process's own
 * catalog write, or losing the listening connection changes `version()`.
 *
 * A notification reaches the listener a little after its writer hears
 * COMMIT succeed (a few hundred µs here), so a change made just before a
 * request may not have arrived yet when the request does. `sync()` closes
 * that gap: PostgreSQL signals the listeners as the writer commits, and the
 * listening backend sends every notification it was signalled for before it
 * answers on that connection; one round trip there, made after the
 * request arrived, therefore delivers every change committed before it.
 * Callers waiting at once share one round trip, a bare protocol Sync that
 * starts no transaction (so it costs the database no commit).
 */
export interface CatalogWatch {
  /**
   * A number that changes whenever the catalog may have changed; null while
   * changes cannot be heard (not listening yet, or the connection was lost):
   * remember nothing then. The first call starts listening.
   */
  version(): number | null;
  /**
   * Resolves once every change committed before the call has been heard
   * (one round trip on the listening connection, shared by the callers that
   * came while the previous one was on its way). Resolves at once when not
   * listening (`version()` is null then: nothing may be remembered anyway).
   * A listening connection that does not answer within `syncTimeoutMs` (a
   * stalled network) is given up: the call resolves with `version()` null,
   * so the caller reads from the database, and a new listener is opened on
   * a later use.
   */
  sync(): Promise<void>;
  /** This process committed a catalog change (heard again later through the channel; this is at once). */
  changed(): void;
  close(): Promise<void>;
}

/** A lost listener is reconnected on use, at most this often. */
const RETRY_MS = 1000;

export function watchCatalog(pool: pg.Pool, schemaName: string, options: { syncTimeoutMs: number }): CatalogWatch {
  const channel = catalogChannel(schemaName);
  let counter = 0;
  let client: pg.Client | null = null;
  let connecting = false;
  let retryAt = 0;
  let closed = false;
  /** The round trip on its way, and the one the callers that came meanwhile wait for. */
  let syncing: Promise<void> | null = null;
  let nextSync: Promise<void> | null = null;

  const lose = (lost: pg.Client) => {
    counter++;
    lost.emit(LOST);
    if (client === lost) client = null;
    lost.removeAllListeners("notification");
    // A stalled connection would not answer a polite goodbye: its socket is closed at once.
    (lost as unknown as { connection?: { stream?: { destroy?: () => void } } }).connection?.stream?.destroy?.();
    lost.end().catch(() => {});
    retryAt = Date.now() + RETRY_MS;
  };

  const listen = () => {
    if (closed || connecting || client || Date.now() < retryAt) return;
    connecting = true;
    // Named so operators (and tests) can tell it apart: one per store, idle but for `select 1`.
    const candidate = new pg.Client(listenerConfig(pool.options, listenerName(schemaName)));
    candidate.on("notification", (message) => {
      if (message.channel === channel) counter++;
    });
    // A dropped connection must not crash the process; it only stops the remembering.
    candidate.on("error", () => lose(candidate));
    candidate.on("end", () => lose(candidate));
    candidate
      .connect()
      .then(() => candidate.query(`listen ${quoteIdent(channel)}`))
      .then(
        () => {
          connecting = false;
          if (closed) {
            candidate.end().catch(() => {});
            return;
          }
          counter++;
          client = candidate;
        },
        () => {
          connecting = false;
          lose(candidate);
        },
      );
  };

  return {
    version() {
      if (client) return counter;
      listen();
      return null;
    },
    sync() {
      const listener = client;
      if (!listener) return Promise.resolve();
      if (syncing) {
        // The round trip on its way may have been sent before the caller's change: wait for the next.
        return (nextSync ??= syncing.then(() => {
          nextSync = null;
          return this.sync();
        }));
      }
      const confirmed = withTimeout(
        barrier(listener),
        options.syncTimeoutMs,
        () => new Error("the listening connection did not answer"),
      );
      syncing = confirmed.then(
        () => {
          syncing = null;
        },
        () => {
          syncing = null;
          lose(listener);
        },
      );
      return syncing;
    },
    changed() {
      counter++;
    },
    async close() {
      closed = true;
      const open = client;
      client = null;
      if (open) {
        open.removeAllListeners("end");
        await open.end().catch(() => {});
      }
    },
  };
}

/** Emitted on a listening client that is given up, so a barrier waiting on it ends. */
const LOST = "dataport:lost";

/** The part of `pg`'s connection a barrier uses (not in its public types). */
interface ProtocolConnection {
  sync(): void;
  once(event: "readyForQuery", listener: () => void): unknown;
  off(event: "readyForQuery", listener: () => void): unknown;
}

/**
 * A round trip on the listening connection: a protocol Sync, answered by
 * ReadyForQuery once the backend has sent the notifications it was
 * signalled for. Falls back to `select 1` (a transaction) if this `pg` has
 * no such connection method.
 */
function barrier(listener: pg.Client): Promise<void> {
  const connection = (listener as unknown as { connection?: Partial<ProtocolConnection> }).connection;
  if (
    typeof connection?.sync !== "function" ||
    typeof connection.once !== "function" ||
    typeof connection.off !== "function"
  ) {
    return listener.query("select 1").then(() => {});
  }
  const protocol = connection as ProtocolConnection;
  return new Promise<void>((resolve, reject) => {
    const answered = () => {
      listener.off(LOST, lost);
      resolve();
    };
    const lost = () => {
      protocol.off("readyForQuery", answered);
      reject(new Error("the listening connection was lost"));
    };
    protocol.once("readyForQuery", answered);
    listener.once(LOST, lost);
    protocol.sync();
  });
}

/** The application_name of a store's listening connection. */
export function listenerName(schemaName: string): string {
  return `dataport listener ${catalogChannel(schemaName).slice(-16)}`;
}

/**
 * The channel `notify_catalog_changed` (migration 4) notifies for a schema: its name's md5, so any schema name fits in
 * 63 bytes.
 */
export function catalogChannel(schemaName: string): string {
  return `dataport_catalog_${createHash("md5").update(schemaName).digest("hex")}`;
}

/**
 * The pool's connection settings with the listener's own application name.
 * `pg` lets a connection string's parameters win over the config's fields,
 * so a name given in the URL (`?application_name=…`) is replaced there too.
 */
function listenerConfig(options: pg.PoolConfig, name: string): pg.ClientConfig {
  const config: pg.ClientConfig = { ...options, application_name: name };
  if (typeof options.connectionString === "string" && /^postgres(ql)?:\/\//i.test(options.connectionString)) {
    try {
      const url = new URL(options.connectionString);
      if (url.searchParams.has("application_name")) {
        url.searchParams.set("application_name", name);
        config.connectionString = url.toString();
      }
    } catch {
      // Not a URL pg would parse either: the config's name stands.
    }
  }
  return config;
}
