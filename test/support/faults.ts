import { type ChildProcess, spawn } from "node:child_process";
import { rmSync } from "node:fs";
import { createServer, type Server, Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { POSTGRES_URL } from "./services.js";

/**
 * The faults the fault suite (test/faults.test.ts) causes, on the machine's
 * real services but never disturbing other test files: a Redis server of
 * its own to stop and start, a TCP proxy in front of PostgreSQL that can
 * hold a connection silent, and terminating only the backends of one
 * application name.
 */

/** A free TCP port on 127.0.0.1 (asked of the kernel, then released). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once("error", reject);
    probe.listen(0, "127.0.0.1", () => {
      const { port } = probe.address() as { port: number };
      probe.close(() => resolve(port));
    });
  });
}

/** Whether `redis-server` can be started here (the CI machine has it; a laptop may not). */
export function hasRedisServer(): Promise<boolean> {
  return new Promise((resolve) => {
    const child = spawn("redis-server", ["--version"], { stdio: "ignore" });
    child.once("error", () => resolve(false));
    child.once("exit", (code) => resolve(code === 0));
  });
}

/** A Redis server of the test's own on a fixed port, stopped and started again like an outage. */
export interface PrivateRedis {
  readonly url: string;
  stop(): Promise<void>;
  start(): Promise<void>;
}

export async function startPrivateRedis(): Promise<PrivateRedis> {
  const port = await freePort();
  let child: ChildProcess | null = null;
  const start = async () => {
    const server = spawn(
      "redis-server",
      ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
      {
        stdio: ["ignore", "pipe", "pipe"],
      },
    );
    child = server;
    await new Promise<void>((resolve, reject) => {
      let out = "";
      const timer = setTimeout(() => reject(new Error(`redis-server did not start:\n${out}`)), 15_000);
      server.stdout!.on("data", (d: Buffer) => {
        out += d.toString();
        if (out.includes("Ready to accept connections")) {
          clearTimeout(timer);
          resolve();
        }
      });
      server.once("exit", (code) => {
        clearTimeout(timer);
        reject(new Error(`redis-server exited with ${code}:\n${out}`));
      });
    });
  };
  await start();
  return {
    url: `redis://127.0.0.1:${port}`,
    start,
    async stop() {
      const running = child;
      child = null;
      if (!running || running.exitCode !== null) return;
      const exited = new Promise((resolve) => running.once("exit", resolve));
      running.kill("SIGKILL");
      await exited;
    },
  };
}

/**
 * A TCP proxy to PostgreSQL. It reads each connection's startup message for
 * its `application_name`, so a test can hold silent just the connections
 * it names (a NAT dropping a flow without a reset): bytes stop flowing both
 * ways, the sockets stay open.
 */
export interface PostgresProxy {
  /** `POSTGRES_URL` through the proxy. */
  readonly url: string;
  /** Hold every open connection whose application name matches `pattern` silent; how many were. */
  stall(pattern: RegExp): number;
  /**
   * On every open connection whose application name matches `pattern`: the
   * next answer the server completes (its chunk ending in ReadyForQuery) is
   * followed, in the same write, by the FATAL a terminated backend sends,
   * and the connection is closed — so the client reads both in one socket
   * read, as it does when a backend is terminated just as it answers. How
   * many connections were armed.
   */
  terminateAfterNextAnswer(pattern: RegExp): number;
  /**
   * Once: the first message a client whose application name matches
   * `pattern` sends containing `text` (on a connection open now or opened
   * later) is forwarded — and then `more` further messages of that client
   * (1: the COMMIT after the statement) — and then that connection is held
   * silent as `stall` holds it: the server got them, nothing more moves.
   * Resolves with the connection's application name when it happened.
   */
  stallAfterSending(pattern: RegExp, text: string, more?: number): Promise<string>;
  /** Application names of the open connections. */
  names(): string[];
  close(): Promise<void>;
}

export async function startPostgresProxy(server: string = POSTGRES_URL): Promise<PostgresProxy> {
  const target = new URL(server);
  const targetPort = Number(target.port || 5432);
  interface Link {
    client: Socket;
    server: Socket;
    name: string | null;
    stalled: boolean;
    terminating: boolean;
    /** Client messages still forwarded before the link stalls (-1: not armed). */
    stallIn: number;
  }
  const links = new Set<Link>();
  const triggers = new Set<{ pattern: RegExp; text: Buffer; more: number; fired: (name: string) => void }>();
  const proxy: Server = createServer((client) => {
    const server = new Socket();
    const link: Link = { client, server, name: null, stalled: false, terminating: false, stallIn: -1 };
    links.add(link);
    const end = () => {
      links.delete(link);
      client.destroy();
      server.destroy();
    };
    client.on("error", end).on("close", end);
    server.on("error", end).on("close", end);
    server.connect(targetPort, target.hostname, () => {
      client.on("data", (chunk: Buffer) => {
        if (link.name === null) link.name = applicationName(chunk) ?? "";
        if (link.stalled) return;
        server.write(chunk);
        if (link.stallIn > 0 && --link.stallIn === 0) link.stalled = true;
        for (const trigger of triggers) {
          if (link.stallIn < 0 && trigger.pattern.test(link.name) && chunk.includes(trigger.text)) {
            triggers.delete(trigger);
            link.stallIn = trigger.more;
            if (trigger.more === 0) link.stalled = true;
            trigger.fired(link.name);
            break;
          }
        }
      });
      server.on("data", (chunk: Buffer) => {
        if (link.stalled) return;
        if (link.terminating && endsWithReadyForQuery(chunk)) {
          link.terminating = false;
          client.end(Buffer.concat([chunk, TERMINATED]));
          server.destroy();
          return;
        }
        client.write(chunk);
      });
    });
  });
  await new Promise<void>((resolve) => proxy.listen(0, "127.0.0.1", resolve));
  const { port } = proxy.address() as { port: number };
  const url = new URL(server);
  url.hostname = "127.0.0.1";
  url.port = String(port);
  return {
    url: url.toString(),
    stall(pattern) {
      let n = 0;
      for (const link of links) {
        if (link.name !== null && pattern.test(link.name)) {
          link.stalled = true;
          n++;
        }
      }
      return n;
    },
    stallAfterSending(pattern, text, more = 0) {
      return new Promise((resolve) => triggers.add({ pattern, text: Buffer.from(text), more, fired: resolve }));
    },
    terminateAfterNextAnswer(pattern) {
      let n = 0;
      for (const link of links) {
        if (link.name !== null && pattern.test(link.name)) {
          link.terminating = true;
          n++;
        }
      }
      return n;
    },
    names: () => [...links].map((l) => l.name ?? ""),
    async close() {
      for (const link of links) {
        link.client.destroy();
        link.server.destroy();
      }
      await new Promise<void>((resolve) => proxy.close(() => resolve()));
    },
  };
}

/**
 * The `application_name` of a PostgreSQL startup message (int32 length,
 * int32 protocol 3.0, then NUL-terminated key/value pairs), or null when the
 * chunk is not one (an SSL request, say).
 */
function applicationName(chunk: Buffer): string | null {
  if (chunk.length < 8 || chunk.readInt32BE(4) !== 196608) return null;
  const fields = chunk.subarray(8, chunk.readInt32BE(0)).toString("utf8").split("\0");
  for (let i = 0; i + 1 < fields.length; i += 2) if (fields[i] === "application_name") return fields[i + 1]!;
  return null;
}

/** Whether a chunk from the server ends with ReadyForQuery ('Z', length 5, a status byte): an answer is complete. */
function endsWithReadyForQuery(chunk: Buffer): boolean {
  return chunk.length >= 6 && chunk[chunk.length - 6] === 0x5a && chunk.readInt32BE(chunk.length - 5) === 5;
}

/** The ErrorResponse a backend sends as `pg_terminate_backend` ends it (FATAL 57P01). */
const TERMINATED = errorResponse({
  S: "FATAL",
  V: "FATAL",
  C: "57P01",
  M: "terminating connection due to administrator command",
});

function errorResponse(fields: Record<string, string>): Buffer {
  const body = Buffer.from(
    `${Object.entries(fields)
      .map(([k, v]) => `${k}${v}\0`)
      .join("")}\0`,
    "utf8",
  );
  const head = Buffer.alloc(5);
  head.write("E", 0, "latin1");
  head.writeInt32BE(body.length + 4, 1);
  return Buffer.concat([head, body]);
}

/**
 * A PostgreSQL server of the test's own: a new cluster (`initdb`) in a
 * temporary directory, trust authentication, 127.0.0.1 on a free port,
 * without fsync. For tests that hold write transactions open for seconds
 * on purpose (a stalled connection, a held lock): on the shared server
 * such a transaction would hold back every other test's audit feed, whose
 * horizon (`pg_snapshot_xmin`) is the oldest transaction of the whole
 * cluster. Run as the `postgres` user when this process is root (the
 * server refuses to run as root). Null when this machine cannot start one
 * (no `initdb` on the PATH); with CI=true that is an error.
 */
export interface PrivatePostgres {
  /** `postgres://postgres@127.0.0.1:<port>/postgres`. */
  readonly url: string;
  stop(): Promise<void>;
}

export async function startPrivatePostgres(): Promise<PrivatePostgres | null> {
  const asPostgres = process.getuid?.() === 0 ? ["runuser", "-u", "postgres", "--"] : [];
  const run = (args: string[]) => {
    const [command, ...rest] = [...asPostgres, ...args];
    return spawn(command!, rest, { stdio: ["ignore", "pipe", "pipe"] });
  };
  const finished = (child: ChildProcess): Promise<{ code: number | null; output: string }> =>
    new Promise((resolve) => {
      let output = "";
      child.stdout!.on("data", (d: Buffer) => (output += d.toString()));
      child.stderr!.on("data", (d: Buffer) => (output += d.toString()));
      child.once("error", (error) => resolve({ code: -1, output: error.message }));
      child.once("close", (code) => resolve({ code, output }));
    });
  const made = await finished(run(["mktemp", "-d", join(tmpdir(), "dataport-pg-XXXXXX")]));
  const dir = made.output.trim();
  const data = join(dir, "data");
  const initdb = ["initdb", "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync"];
  const init = made.code === 0 ? await finished(run(initdb)) : made;
  if (init.code !== 0) {
    if (dir !== "") rmSync(dir, { recursive: true, force: true });
    const reason = `cannot start a PostgreSQL server of the test's own (initdb): ${init.output.trim().split("\n").at(-1)}`;
    if (process.env.CI === "true") throw new Error(reason);
    console.warn(`\n  ⚠ ${reason}; skipping\n`);
    return null;
  }
  const port = await freePort();
  const settings = ["-c", "listen_addresses=127.0.0.1", "-c", "fsync=off"];
  const server = run(["postgres", "-D", data, "-p", String(port), "-k", dir, ...settings]);
  const exited = finished(server);
  const url = `postgres://postgres@127.0.0.1:${port}/postgres`;
  for (let tries = 0; ; tries++) {
    const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 1000 });
    client.on("error", () => {});
    try {
      await client.connect();
      await client.end();
      break;
    } catch (error) {
      await client.end().catch(() => {});
      if (tries >= 150 || server.exitCode !== null) {
        server.kill("SIGKILL");
        throw new Error(`the private PostgreSQL server did not start: ${(await exited).output}`, { cause: error });
      }
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
  return {
    url,
    async stop() {
      await finished(run(["pg_ctl", "stop", "-D", data, "-m", "immediate", "-s"]));
      await exited;
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Terminate the backends of every connection named `applicationName` (as a failover or a restart would); how many. */
export async function terminateBackends(pattern: string, server: string = POSTGRES_URL): Promise<number> {
  const client = new pg.Client({ connectionString: server });
  await client.connect();
  try {
    const { rows } = await client.query<{ n: string }>(
      "select count(pg_terminate_backend(pid)) as n from pg_stat_activity where application_name like $1 and pid <> pg_backend_pid()",
      [pattern],
    );
    return Number(rows[0]?.n ?? 0);
  } finally {
    await client.end();
  }
}

/**
 * A `pg` pool whose server can be taken away, as an outage would: `cut()`
 * closes every connection the pool has and points every new one at a closed
 * port (ECONNREFUSED), for good. The pool connects through a socket factory
 * (`stream`), so nothing of `pg`'s internals is touched.
 */
export async function cuttablePool(connectionString: string, max: number): Promise<{ pool: pg.Pool; cut(): void }> {
  const closedPort = await freePort();
  const sockets = new Set<Socket>();
  let cut = false;
  const stream = () => {
    const socket = new Socket();
    if (cut) {
      const connect = socket.connect.bind(socket) as (port: number, host: string) => Socket;
      socket.connect = (() => connect(closedPort, "127.0.0.1")) as unknown as Socket["connect"];
    }
    sockets.add(socket);
    socket.once("close", () => sockets.delete(socket));
    return socket;
  };
  const pool = new pg.Pool({ connectionString, max, connectionTimeoutMillis: 2000, stream });
  return {
    pool,
    cut() {
      cut = true;
      for (const socket of sockets) socket.destroy();
    },
  };
}
