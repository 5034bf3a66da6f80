import pg from "../peers/pg.js";
import { quoteIdent } from "../sql/literals.js";

/**
 * A store's one listening connection: a dedicated client (not taken from
 * the pool) that LISTENs on every channel it was made with, shared by what
 * needs notifications (the catalog's version, the change feeds' wake-ups).
 *
 * It connects on first use. A connection lost (a fault, a terminated
 * backend, a stall given up with `lose`) never crashes the process: the
 * users are told (`lost`), and a new connection is opened on a later use,
 * at most once per RETRY_MS, or by itself after RETRY_MS while someone
 * `hold`s it. Once listening again the users are told (`listening`):
 * notifications sent meanwhile were not heard.
 *
 * Nothing but LISTEN is ever sent on it through the client (the catalog's
 * barrier is a bare protocol Sync), so notifications arrive in between
 * nothing else.
 */
export interface SchemaListener {
  /** The client while it listens on every channel; null otherwise (nothing is asked). */
  listening(): pg.Client | null;
  /** Open a connection if there is none and none is on its way, unless the last one was lost under RETRY_MS ago. */
  start(): void;
  /**
   * Keep the connection open until the returned function is called: a lost one is reconnected every RETRY_MS until
   * one listens, whether used or not.
   */
  hold(): () => void;
  /** Be told of notifications and of the connection's state, from now on. */
  on(events: ListenerEvents): void;
  /** Give `client` up (a stalled one): its socket is closed at once, and it counts as lost. */
  lose(client: pg.Client): void;
  close(): Promise<void>;
}

export interface ListenerEvents {
  notification?(channel: string, payload: string): void;
  /** Listening on every channel (again): what was notified before this was not heard. */
  listening?(): void;
  /** The connection that listened was lost: nothing is heard until `listening`. */
  lost?(): void;
}

/** A lost listener is reconnected at most this often, in ms. */
export const RETRY_MS = 1000;

/** Emitted on a listening client that is given up, so a round trip waiting on it ends. */
export const LOST = "dataport:lost";

export function schemaListener(pool: pg.Pool, name: string, channels: readonly string[]): SchemaListener {
  const users: ListenerEvents[] = [];
  let client: pg.Client | null = null;
  let connecting = false;
  let retryAt = 0;
  let closed = false;
  let holds = 0;
  let retry: ReturnType<typeof setTimeout> | null = null;
  const given = new WeakSet<pg.Client>();

  const tell = (event: "listening" | "lost") => {
    for (const user of users) user[event]?.();
  };

  /** Reconnect by itself after RETRY_MS while held. */
  const retryLater = () => {
    if (closed || holds === 0 || retry !== null) return;
    retry = setTimeout(() => {
      retry = null;
      start();
      if (!client) retryLater();
    }, RETRY_MS);
    retry.unref?.();
  };

  const lose = (lost: pg.Client) => {
    if (given.has(lost)) return;
    given.add(lost);
    const wasListening = client === lost;
    if (wasListening) client = null;
    lost.emit(LOST);
    lost.removeAllListeners("notification");
    // A stalled connection would not answer a polite goodbye: its socket is closed at once.
    (lost as unknown as { connection?: { stream?: { destroy?: () => void } } }).connection?.stream?.destroy?.();
    lost.end().catch(() => {});
    retryAt = Date.now() + RETRY_MS;
    if (wasListening && !closed) tell("lost");
    retryLater();
  };

  const start = () => {
    if (closed || connecting || client || Date.now() < retryAt) return;
    connecting = true;
    // Named so operators (and tests) can tell it apart: one per store, idle but for the catalog's round trips.
    const candidate = new pg.Client(listenerConfig(pool.options, name));
    candidate.on("notification", (message) => {
      for (const user of users) user.notification?.(message.channel, message.payload ?? "");
    });
    // A dropped connection must not crash the process; it only stops the hearing.
    candidate.on("error", () => lose(candidate));
    candidate.on("end", () => lose(candidate));
    candidate
      .connect()
      .then(() => candidate.query(channels.map((channel) => `listen ${quoteIdent(channel)}`).join("; ")))
      .then(
        () => {
          connecting = false;
          if (closed) {
            candidate.end().catch(() => {});
            return;
          }
          if (given.has(candidate)) return;
          client = candidate;
          tell("listening");
        },
        () => {
          connecting = false;
          lose(candidate);
        },
      );
  };

  return {
    listening: () => client,
    start,
    hold() {
      holds++;
      start();
      if (!client) retryLater();
      let held = true;
      return () => {
        if (!held) return;
        held = false;
        holds--;
        if (holds === 0 && retry !== null) {
          clearTimeout(retry);
          retry = null;
        }
      };
    },
    on(events) {
      users.push(events);
    },
    lose,
    async close() {
      closed = true;
      if (retry !== null) clearTimeout(retry);
      retry = null;
      const open = client;
      client = null;
      if (open) {
        open.removeAllListeners("end");
        await open.end().catch(() => {});
      }
    },
  };
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
