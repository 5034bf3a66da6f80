import { createHash } from "node:crypto";
import type pg from "../peers/pg.js";
import { withTimeout } from "../base/timeout.js";
import { LOST, type SchemaListener } from "./listener.js";

/**
 * Whether the catalog (connections, and which datasets exist and belong to
 * which connection) may have changed, so answers derived from it (webhook
 * endpoints) can be remembered between changes.
 *
 * Migration 4's triggers notify the schema's channel on every such change,
 * whoever makes it. The store's listening connection (listener.ts, shared
 * with the change feeds) LISTENs there; a notification, this process's own
 * catalog write, or losing or regaining that connection changes `version()`.
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
}

export function watchCatalog(
  listener: SchemaListener,
  schemaName: string,
  options: { syncTimeoutMs: number },
): CatalogWatch {
  const channel = catalogChannel(schemaName);
  let counter = 0;
  /** The round trip on its way, and the one the callers that came meanwhile wait for. */
  let syncing: Promise<void> | null = null;
  let nextSync: Promise<void> | null = null;
  listener.on({
    notification(name) {
      if (name === channel) counter++;
    },
    listening: () => counter++,
    lost: () => counter++,
  });

  return {
    version() {
      if (listener.listening()) return counter;
      listener.start();
      return null;
    },
    sync() {
      const client = listener.listening();
      if (!client) return Promise.resolve();
      if (syncing) {
        // The round trip on its way may have been sent before the caller's change: wait for the next.
        return (nextSync ??= syncing.then(() => {
          nextSync = null;
          return this.sync();
        }));
      }
      const confirmed = withTimeout(
        barrier(client),
        options.syncTimeoutMs,
        () => new Error("the listening connection did not answer"),
      );
      syncing = confirmed.then(
        () => {
          syncing = null;
        },
        () => {
          syncing = null;
          listener.lose(client);
        },
      );
      return syncing;
    },
    changed() {
      counter++;
    },
  };
}

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
