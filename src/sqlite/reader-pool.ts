import { existsSync } from "node:fs";
import { createRequire } from "node:module";
import { fileURLToPath, pathToFileURL } from "node:url";
import { Worker } from "node:worker_threads";
import { type ApiError, storageUnavailable } from "../base/api-error.js";
import { callTimedOut } from "../sql/store-calls.js";
import type { SqliteDriverName } from "./driver.js";
import type { ReaderAnswer, ReaderMessage, ReaderRequest, ReaderThreadData } from "./reader-protocol.js";

/**
 * Reader threads: work that may take long (a scan for a sort or a condition
 * without an index, a count, a large read with conditions, and any other
 * read-only statement a caller sends) runs on a worker thread with a
 * read-only connection of its own to the same file (WAL: it reads a snapshot
 * while the writer goes on), so the event loop never waits for it.
 *
 * - At most `size` threads, started when first needed and kept (idle ones
 *   do not keep the process alive). Each runs one request at a time; more
 *   wait here, in order.
 * - Every request has a deadline (`timeoutMs` from the call, waiting
 *   included). The thread ends the statement when it passes (see
 *   statement-deadline.ts) and the call rejects with 503
 *   `storage_unavailable` and `Retry-After`. A statement that cannot be
 *   ended that way (a sorter's last merge) is given `GRACE_MS` more; then
 *   the call rejects all the same, and the thread is stopped and replaced
 *   (it exits once its statement returns).
 * - A session keeps one snapshot across calls: its calls run on one thread,
 *   in one read transaction there, until `end()`.
 */
export interface ReaderPool {
  /** `request` answered by a reader thread (see reader-thread.ts for what each kind answers). */
  call<R extends ReaderRequest>(request: R): Promise<ReaderAnswer<R>>;
  session(): ReaderSession;
  /** Stops every thread (waiting at most a second for them to exit); calls still waiting reject. */
  close(): Promise<void>;
}

export interface ReaderSession {
  call<R extends ReaderRequest>(request: R): Promise<ReaderAnswer<R>>;
  /** Ends the session's read transaction (nothing to wait for). */
  end(): void;
}

export interface ReaderPoolOptions {
  /** The database file. */
  path: string;
  /** The binding each thread opens its connections with. */
  driver: SqliteDriverName;
  /** Threads at most, 1 or more. */
  size: number;
  /** How long a request may take, waiting included, in ms (Infinity: no limit). */
  timeoutMs: number;
  /** The reader connections' busy timeout (a reader thread may block; the event loop does not). */
  busyTimeoutMs: number;
}

/** How long a thread may stay in a statement past its deadline before it is stopped and replaced. */
const GRACE_MS = 1000;
/** How long `close()` waits for the threads to exit (one inside a statement exits once it returns). */
const CLOSE_WAIT_MS = 1000;

interface Call {
  id: number;
  request: ReaderRequest;
  session: Session | null;
  endsAt: number;
  resolve(value: unknown): void;
  reject(error: unknown): void;
  thread: Thread | null;
  timer: ReturnType<typeof setTimeout> | null;
}

interface Session {
  id: number;
  thread: Thread | null;
  ended: boolean;
}

interface Thread {
  worker: Worker;
  /** The thread has started (loaded its modules): calls are sent to it from then on. */
  ready: boolean;
  running: Call | null;
  /** Calls of this thread's sessions, waiting for it. */
  waiting: Call[];
  sessions: Set<Session>;
  gone: boolean;
}

export function readerPool(options: ReaderPoolOptions): ReaderPool {
  const threads: Thread[] = [];
  const queue: Call[] = [];
  let nextId = 1;
  let closed = false;
  const script = threadScript();

  const call = (request: ReaderRequest, session: Session | null): Promise<never> =>
    new Promise((resolve, reject) => {
      if (closed) return reject(unavailable("the store is closed"));
      if (session?.ended) return reject(new Error("the reader session has ended"));
      const endsAt = performance.now() + options.timeoutMs;
      const pending: Call = { id: nextId++, request, session, endsAt, resolve, reject, thread: null, timer: null };
      if (Number.isFinite(options.timeoutMs)) pending.timer = setTimeout(() => expire(pending), options.timeoutMs);
      const bound = session?.thread;
      if (bound) {
        if (bound.gone) return settle(pending, unavailable("the reader thread of this read was stopped"));
        bound.waiting.push(pending);
        dispatch(bound);
      } else {
        queue.push(pending);
        const idle = threads.find((t) => t.ready && t.running === null && !t.gone);
        if (idle) dispatch(idle);
        else if (threads.length < options.size && threads.every((t) => t.ready)) start();
      }
    });

  const start = (): Thread => {
    const data: ReaderThreadData = { path: options.path, driver: options.driver, busyTimeoutMs: options.busyTimeoutMs };
    const worker = spawn(script, data);
    worker.unref();
    const thread: Thread = { worker, ready: false, running: null, waiting: [], sessions: new Set(), gone: false };
    worker.on("message", (answer: ReaderMessage | "ready") => {
      if (answer === "ready") {
        thread.ready = true;
        dispatch(thread);
        // More waiting than threads: the next one starts.
        if (queue.length > 0 && threads.length < options.size) start();
        return;
      }
      const pending = thread.running;
      if (!pending || pending.id !== answer.id) return;
      thread.running = null;
      worker.unref();
      if ("error" in answer) {
        settle(pending, answer.error.deadline ? timedOut(options.timeoutMs, ENDED) : sqliteError(answer.error));
      } else {
        settle(pending, null, answer.value);
      }
      dispatch(thread);
    });
    const lost = (error: unknown) => {
      if (thread.gone) return;
      // A thread that failed to start takes the calls waiting for it along: they would wait for nothing.
      if (!thread.ready && threads.every((t) => t === thread || !t.ready)) {
        const failed = unavailable(`a reader thread could not start: ${String(error)}`);
        for (const pending of queue.splice(0)) settle(pending, failed);
      }
      stop(thread);
    };
    worker.on("error", lost);
    worker.on("exit", lost);
    threads.push(thread);
    return thread;
  };

  /** Sends the thread its next call: one of its sessions' first, else the oldest waiting. */
  const dispatch = (thread: Thread) => {
    while (thread.ready && thread.running === null && !thread.gone) {
      const next = thread.waiting.shift() ?? queue.shift();
      if (!next) return;
      const left = next.endsAt - performance.now();
      if (left <= 0) {
        settle(next, timedOut(options.timeoutMs, WAITED));
        continue;
      }
      if (next.session && next.session.thread === null) {
        next.session.thread = thread;
        thread.sessions.add(next.session);
      }
      next.thread = thread;
      thread.running = next;
      thread.worker.ref();
      const message = { id: next.id, session: next.session?.id ?? null, timeoutMs: left, request: next.request };
      try {
        thread.worker.postMessage(message);
      } catch (error) {
        // A value the thread cannot receive (a function in a query): a caller's mistake, not the store's.
        thread.running = null;
        thread.worker.unref();
        settle(next, error);
      }
    }
  };

  /** The deadline has passed: a waiting call fails now; a running one once its thread has had GRACE_MS to end it. */
  const expire = (pending: Call) => {
    pending.timer = null;
    const thread = pending.thread;
    if (thread === null) {
      const waiting = pending.session?.thread?.waiting ?? queue;
      const at = waiting.indexOf(pending);
      if (at >= 0) waiting.splice(at, 1);
      settle(pending, timedOut(options.timeoutMs, WAITED));
      return;
    }
    if (thread.running !== pending) return;
    pending.timer = setTimeout(() => {
      pending.timer = null;
      if (thread.running !== pending) return;
      settle(pending, timedOut(options.timeoutMs, STOPPED));
      stop(thread);
    }, GRACE_MS);
  };

  /** The thread is given up: its running call and its sessions' calls fail, and it exits once its statement returns. */
  const stop = (thread: Thread) => {
    if (thread.gone) return;
    thread.gone = true;
    const at = threads.indexOf(thread);
    if (at >= 0) threads.splice(at, 1);
    const lost = unavailable("the reader thread was stopped");
    if (thread.running) settle(thread.running, lost);
    thread.running = null;
    for (const waiting of thread.waiting.splice(0)) settle(waiting, lost);
    void thread.worker.terminate();
    // Its replacement, when calls are waiting.
    if (!closed && queue.length > 0 && threads.length < options.size) start();
  };

  function settle(pending: Call, error: unknown, value?: unknown): void {
    if (pending.timer !== null) clearTimeout(pending.timer);
    pending.timer = null;
    if (error) pending.reject(error);
    else pending.resolve(value);
  }

  let nextSession = 1;
  return {
    call: (request) => call(request, null),
    session() {
      const session: Session = { id: nextSession++, thread: null, ended: false };
      return {
        call: (request) => call(request, session),
        end() {
          if (session.ended) return;
          session.ended = true;
          const thread = session.thread;
          if (!thread) return;
          thread.sessions.delete(session);
          if (thread.gone) return;
          thread.worker.postMessage({ id: 0, session: session.id, timeoutMs: 0, request: { kind: "end" } });
        },
      };
    },
    async close() {
      closed = true;
      for (const pending of queue.splice(0)) settle(pending, unavailable("the store is closed"));
      const exits = threads.splice(0).map((thread) => {
        thread.gone = true;
        if (thread.running) settle(thread.running, unavailable("the store is closed"));
        for (const waiting of thread.waiting.splice(0)) settle(waiting, unavailable("the store is closed"));
        // A thread inside a statement exits once it returns; it does not keep the process alive meanwhile.
        thread.worker.unref();
        return thread.worker.terminate();
      });
      await Promise.race([Promise.all(exits), new Promise((resolve) => setTimeout(resolve, CLOSE_WAIT_MS).unref())]);
    },
  };
}

/** Why a call timed out, for the log (the cause of its 503). */
const ENDED = "the statement was ended at its deadline";
const STOPPED = "the statement did not end at its deadline: its reader thread was stopped";
const WAITED = "no reader thread was free before the deadline";

function timedOut(timeoutMs: number, why: string): ApiError {
  return callTimedOut("the database", timeoutMs, new Error(why));
}

function unavailable(reason: string): ApiError {
  return storageUnavailable(undefined, { cause: new Error(reason) });
}

/** A SQLite error from a reader thread, with its code, as the writer connection would have thrown it. */
function sqliteError(error: { name: string; message: string; code?: string }): Error {
  const copy = Object.assign(new Error(error.message), { name: error.name });
  return error.code === undefined ? copy : Object.assign(copy, { code: error.code });
}

/**
 * reader-thread.js beside this module; in the built package, a chunk at the
 * root of dist/ finds it under sqlite/. From the sources (tests, tsx) it is
 * reader-thread.ts, loaded through tsx's loader in the thread.
 */
function threadScript(): URL {
  const here = import.meta.url;
  if (/\.ts$/.test(new URL(here).pathname)) return new URL("./reader-thread.ts", here);
  const beside = new URL("./reader-thread.js", here);
  return existsSync(fileURLToPath(beside)) ? beside : new URL("./sqlite/reader-thread.js", here);
}

function spawn(script: URL, workerData: ReaderThreadData): Worker {
  // Bun and Deno run TypeScript themselves.
  if (!script.pathname.endsWith(".ts") || "Bun" in globalThis || "Deno" in globalThis)
    return new Worker(script, { workerData });
  // tsx's ESM entry registers its loader in this thread, then the TypeScript source is imported.
  const tsx = pathToFileURL(createRequire(import.meta.url).resolve("tsx/esm/api")).href.replace(/\.cjs$/, ".mjs");
  const bootstrap = `import(${JSON.stringify(tsx)})
    .then((api) => { api.register(); return import(${JSON.stringify(script.href)}); })`;
  return new Worker(bootstrap, { eval: true, workerData });
}
