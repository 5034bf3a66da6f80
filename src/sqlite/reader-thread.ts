import type * as Database from "./driver.js";
import { readlinkSync } from "node:fs";
import { getPriority, setPriority } from "node:os";
import { type MessagePort, parentPort, workerData } from "node:worker_threads";
import {
  countRows,
  firstPage,
  isPlain,
  isSmallRead,
  planRead,
  positionsOf,
  settlePlan,
  streamedBatches,
} from "./dataset-reads.js";
import { openReader, prepared } from "./db.js";
import { queriedTableRows } from "./row-query-dialect.js";
import type {
  BatchAnswer,
  CountEntry,
  Fetched,
  ReaderEnvelope,
  ReaderMessage,
  ReaderThreadData,
  RowsAnswer,
  RowsRequest,
  StreamRequest,
} from "./reader-protocol.js";
import { deadlineOf } from "./statement-deadline.js";

/*
 * A reader thread (see reader-pool.ts): a read-only connection to the
 * database file, answering one request at a time, each ended at its
 * deadline. Started by the pool with `ReaderThreadData`.
 */

/** A session's read transaction unused for this long is ended (its caller went away without ending it). */
const SESSION_IDLE_MS = 60_000;
/** Connections kept for the next sessions. */
const SPARE_CONNECTIONS = 2;

class DeadlinePassed extends Error {}

/**
 * The page cache (KiB) while a statement request runs (an aggregate: a scan
 * and a sort). A scan reads each page once, so a larger cache only fills
 * (the driver's default is 16 MB, kept by the thread once touched), and
 * SQLite's sorter sorts in memory runs of the cache's size: in runs of 2 MB
 * (merged from temporary files) it sorted faster than in 16 MB ones.
 * Measured, `groupBy=fragile,month(shippedAt)&metrics=count,sum,avg` over
 * 300,000 rows of the typed copy, the statement alone: 273–277 ms CPU and
 * ~30 MB less RSS with 2 MB, 347–427 ms with 16 MB (load 5–6 on 2 cores).
 */
const STATEMENT_CACHE_KIB = 2000;

/**
 * Helper threads SQLite's sorter may start for a statement request (`PRAGMA threads`): it sorts
 * its runs side by side and merges them. An aggregate's `GROUP BY` sorts every matching row (SQLite
 * has no hash aggregate), and sorting is most of its time. Measured, 1,000,000 rows grouped into 60
 * groups by a text column and a month, the statement alone on 2 cores (load 3): 480–540 ms with
 * none, 315–440 ms with 2, for 10–15 % more CPU in all. Row reads, which stream and hold a thread
 * for their client's pace, keep the default (none).
 */
const STATEMENT_SORTER_THREADS = 2;

/** `work` with the connection's page cache at STATEMENT_CACHE_KIB and the sorter's threads, then as they were. */
function withStatementSettings<T>(db: Database.Database, work: () => T): T {
  const cache = db.pragma("cache_size", { simple: true }) as number;
  const threads = db.pragma("threads", { simple: true }) as number;
  db.pragma(`cache_size = -${STATEMENT_CACHE_KIB}`);
  db.pragma(`threads = ${STATEMENT_SORTER_THREADS}`);
  try {
    return work();
  } finally {
    db.pragma(`cache_size = ${Number(cache)}`);
    db.pragma(`threads = ${Number(threads)}`);
  }
}

interface Session {
  db: Database.Database;
  batches: Generator<Fetched[], void, undefined> | null;
  usedAt: number;
}

function serve(port: MessagePort, data: ReaderThreadData): void {
  let primary: Database.Database | null = null;
  const spare: Database.Database[] = [];
  const sessions = new Map<number, Session>();
  const connect = () => spare.pop() ?? openReader(data.driver, data.path, data.busyTimeoutMs);

  const end = (id: number) => {
    const session = sessions.get(id);
    if (!session) return;
    sessions.delete(id);
    session.batches?.return();
    if (session.db.open && session.db.inTransaction) session.db.exec("COMMIT");
    if (spare.length < SPARE_CONNECTIONS) spare.push(session.db);
    else session.db.close();
  };

  const idle = setInterval(() => {
    const now = performance.now();
    for (const [id, session] of sessions) if (now - session.usedAt > SESSION_IDLE_MS) end(id);
  }, SESSION_IDLE_MS / 4);
  idle.unref();

  const answer = (db: Database.Database, timeoutMs: number, work: () => unknown): unknown =>
    deadlineOf(db).within(performance.now() + timeoutMs, () => new DeadlinePassed(), work);

  const batchOf = (id: number, session: Session, timeoutMs: number): BatchAnswer => {
    session.usedAt = performance.now();
    const next = () => session.batches?.next() ?? { done: true as const, value: undefined };
    const step = answer(session.db, timeoutMs, next) as IteratorResult<Fetched[]>;
    if (step.done) {
      end(id);
      return { rows: [], done: true };
    }
    return { rows: step.value, done: false };
  };

  const handle = (envelope: ReaderEnvelope): unknown => {
    const { request, timeoutMs } = envelope;
    switch (request.kind) {
      case "rows": {
        const db = (primary ??= connect());
        return answer(db, timeoutMs, () => db.transaction(() => rows(db, request))());
      }
      case "tableRows": {
        const db = (primary ??= connect());
        const page = db.transaction(() => queriedTableRows(db, request.tableId, request.query));
        return answer(db, timeoutMs, () => page());
      }
      case "statement": {
        const db = (primary ??= connect());
        const statement = prepared(db, request.text);
        const { mode, params } = request;
        const run = () => (mode === "all" ? statement.all(...params) : statement.get(...params));
        return withStatementSettings(db, () => answer(db, timeoutMs, run));
      }
      case "stream": {
        const id = envelope.session!;
        const db = connect();
        const session: Session = { db, batches: null, usedAt: performance.now() };
        sessions.set(id, session);
        db.exec("BEGIN");
        session.batches = streamOf(db, request);
        return batchOf(id, session, timeoutMs);
      }
      case "next": {
        const id = envelope.session!;
        const session = sessions.get(id);
        if (!session) throw new Error("the streamed read has ended (idle too long, or failed)");
        return batchOf(id, session, timeoutMs);
      }
      case "end":
        return undefined;
    }
  };

  port.on("message", (envelope: ReaderEnvelope) => {
    if (envelope.request.kind === "end") {
      end(envelope.session!);
      return;
    }
    let message: ReaderMessage;
    try {
      message = { id: envelope.id, value: handle(envelope) };
    } catch (error) {
      // A session whose request failed is over: its statement was ended, its snapshot is let go.
      if (envelope.session !== null) end(envelope.session);
      const e = error as { name?: string; message?: string; code?: unknown };
      message = {
        id: envelope.id,
        error: {
          name: String(e?.name ?? "Error"),
          message: String(e?.message ?? error),
          ...(typeof e?.code === "string" && { code: e.code }),
          ...(error instanceof DeadlinePassed && { deadline: true }),
        },
      };
    }
    port.postMessage(message);
  });
  port.postMessage("ready");
}

function rows(db: Database.Database, { datasetId, query, count }: RowsRequest): RowsAnswer {
  const at = positionsOf(db, datasetId);
  if (!at) return { at: null, totalRows: 0, counted: null, fetched: [] };
  const plan = planRead(db, at, query);
  const window = { first: at.first_position, next: at.next_position };
  let counted: CountEntry | null = null;
  let totalRows: number;
  if (isPlain(plan)) totalRows = countRows(db, plan);
  else if (count !== null && count.first === window.first && count.next === window.next) totalRows = count.n;
  else {
    totalRows = countRows(db, plan);
    counted = { ...window, n: totalRows };
  }
  settlePlan(plan, totalRows);
  if (query.limit !== null && query.limit <= 0) return { at, totalRows, counted, fetched: [] };
  return { at, totalRows, counted, fetched: isSmallRead(plan, query) ? firstPage(db, plan, query) : null };
}

function* streamOf(db: Database.Database, request: StreamRequest): Generator<Fetched[], void, undefined> {
  const { datasetId, seq, query, totalRows } = request;
  const at = positionsOf(db, datasetId);
  if (!at || at.seq !== seq) return;
  const plan = planRead(db, at, query);
  settlePlan(plan, totalRows);
  yield* streamedBatches(db, plan, query);
}

/**
 * A reader thread yields the CPU to the event loop: on Linux a thread's nice
 * value is its own (NPTL), so this thread alone runs at a lower priority,
 * and a long scan takes the cores the event loop leaves idle. Elsewhere (or
 * without /proc) it keeps the process's priority.
 */
function yieldToEventLoop(): void {
  try {
    const tid = Number(/task\/(\d+)$/.exec(readlinkSync("/proc/thread-self"))?.[1]);
    if (Number.isSafeInteger(tid) && tid > 0) setPriority(tid, Math.min(19, getPriority(tid) + READER_NICENESS));
  } catch {
    // Not Linux, or not allowed: the same priority as the event loop.
  }
}

/** How much lower than the process a reader thread runs (nice steps). */
const READER_NICENESS = 10;

if (parentPort !== null && (workerData as ReaderThreadData | null)?.path !== undefined) {
  yieldToEventLoop();
  serve(parentPort, workerData as ReaderThreadData);
}
