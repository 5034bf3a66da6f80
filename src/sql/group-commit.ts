import { ApiError } from "../base/api-error.js";
import { type Awaitable, isPromiseLike } from "../base/awaitable.js";

/**
 * Group commit, the one every SQL store uses (SQLite's audit events and
 * usage counters, SQLite's and PostgreSQL's webhook deliveries): inputs
 * added in the same turn of the event loop are committed together in one
 * transaction (one commit, one WAL sync) at the end of that turn, and each
 * promise settles only after that commit, so what was acknowledged is
 * durable.
 *
 * - **One group at a time.** While a group's commit is under way (an async
 *   transaction on a pooled PostgreSQL client, or a SQLite group waiting for
 *   another process's write lock), what arrives meanwhile waits and forms the
 *   next group once it is done: the busier the store, the larger the groups.
 *   A group that commits synchronously (SQLite) is done within its turn.
 * - **Bounded.** A group holds at most `limit` inputs; past it the next group
 *   starts, so a flood never makes one transaction unbounded.
 * - **One input's failure stays its own.** When a group's transaction fails
 *   for a reason that may be one input's (a constraint: a duplicate audit
 *   event id; a delivery to a dataset that is gone), each input is committed
 *   again alone, so only the guilty one fails. When the store itself failed
 *   (the dialect's `reported` makes the error a 503 `storage_unavailable`:
 *   the database is unreachable, locked past its timeout, full, closed),
 *   every input of the group fails with that 503 at once: alone they would
 *   meet the same fault, one timeout after another.
 */
export interface GroupCommit<I, R> {
  /**
   * Queue `input` for the current group; resolves with its outcome once the group is committed, rejects with its own
   * error.
   */
  add(input: I): Promise<R>;
  /**
   * Commits what is queued now, when the dialect commits synchronously and no
   * group is under way (SQLite: before a read that must see every write made
   * before it, and at close); otherwise the queue follows the group under way.
   */
  flush(): void;
  /** Resolves once every input added so far is settled (PostgreSQL's close). */
  settled(): Promise<void>;
}

/** One input's outcome within its group: its result, or the error that refused it alone. */
export type GroupOutcome<R> = R | Error;

/** How a dialect commits a group: what differs between SQLite and PostgreSQL. */
export interface GroupDialect<I, R> {
  /**
   * Commit `inputs` as ONE transaction, in order: one outcome per input (an
   * Error refuses that input alone, the others commit). Synchronous on SQLite
   * (better-sqlite3's IMMEDIATE transaction; a promise only while it waits for
   * another process's lock), a promise on PostgreSQL (a transaction on a
   * pooled client). Throws, or rejects, when the transaction failed and
   * committed nothing.
   */
  commit(inputs: readonly I[]): Awaitable<ReadonlyArray<GroupOutcome<R>>>;
  /**
   * A cheaper way to settle some inputs, tried first (PostgreSQL: one
   * autocommit statement for the deliveries whose dataset it knows): the
   * outcome of each input it committed or refused, undefined for those it
   * leaves to `commit`. When it fails, it committed nothing and `commit`
   * takes them all.
   */
  shortcut?(inputs: readonly I[]): Promise<ReadonlyArray<GroupOutcome<R> | undefined>>;
  /**
   * A failure as the store reports it: a fault of the store becomes its 503 `storage_unavailable` (see
   * sql/store-calls.ts).
   */
  reported(error: unknown): unknown;
  /** Inputs of one group at most. */
  limit: number;
}

interface Pending<I, R> {
  input: I;
  resolve: (value: R) => void;
  reject: (error: unknown) => void;
}

export function groupCommit<I, R>(dialect: GroupDialect<I, R>): GroupCommit<I, R> {
  const { limit, reported } = dialect;
  let queue: Pending<I, R>[] = [];
  let scheduled = false;
  let running: Promise<void> | null = null;

  const schedule = () => {
    if (scheduled || running !== null) return;
    scheduled = true;
    setImmediate(turnEnded);
  };
  const turnEnded = () => {
    scheduled = false;
    commitQueued();
  };

  /** Commits queued groups, one after the other, until one is under way (it returned a promise) or none is left. */
  const commitQueued = () => {
    while (running === null && queue.length > 0) {
      let group: Pending<I, R>[];
      if (queue.length <= limit) {
        group = queue;
        queue = [];
      } else {
        group = queue.splice(0, limit);
      }
      const underWay = settleGroup(group);
      if (underWay === undefined) continue;
      const next = () => {
        running = null;
        if (queue.length > 0) schedule();
      };
      // A group settles each of its inputs itself; the queue moves on whatever happened.
      running = underWay.then(next, next);
    }
  };

  const settleGroup = (group: readonly Pending<I, R>[]): Promise<void> | undefined => {
    if (dialect.shortcut === undefined) return commitGroup(group);
    return dialect.shortcut(group.map((p) => p.input)).then(
      (outcomes) => {
        const rest = group.filter((p, i) => {
          const outcome = outcomes[i];
          if (outcome === undefined) return true;
          settle(p, outcome);
          return false;
        });
        return rest.length === 0 ? undefined : commitGroup(rest);
      },
      // It committed nothing: the transaction decides every input.
      () => commitGroup(group),
    );
  };

  /** The group in one transaction; when that fails for one input's reason, each input alone. */
  const commitGroup = (group: readonly Pending<I, R>[]): Promise<void> | undefined => {
    const failed = (error: unknown): Promise<void> | undefined => {
      const report = reported(error);
      if (group.length === 1 || isStoreFault(report)) {
        for (const p of group) p.reject(report);
        return undefined;
      }
      return eachInTurn(group, commitAlone);
    };
    let outcomes: Awaitable<ReadonlyArray<GroupOutcome<R>>>;
    try {
      outcomes = dialect.commit(group.map((p) => p.input));
    } catch (error) {
      return failed(error);
    }
    if (!isPromiseLike(outcomes)) {
      settleAll(group, outcomes);
      return undefined;
    }
    return Promise.resolve(outcomes).then((done) => settleAll(group, done), failed);
  };

  const commitAlone = (p: Pending<I, R>): Promise<void> | undefined => {
    let outcome: Awaitable<ReadonlyArray<GroupOutcome<R>>>;
    try {
      outcome = dialect.commit([p.input]);
    } catch (error) {
      p.reject(reported(error));
      return undefined;
    }
    if (!isPromiseLike(outcome)) {
      settle(p, outcome[0]!);
      return undefined;
    }
    return Promise.resolve(outcome).then(
      (done) => settle(p, done[0]!),
      (error: unknown) => p.reject(reported(error)),
    );
  };

  return {
    add(input) {
      if (queue.length >= limit) commitQueued();
      return new Promise<R>((resolve, reject) => {
        queue.push({ input, resolve, reject });
        schedule();
      });
    },
    flush: commitQueued,
    async settled() {
      while (running !== null || queue.length > 0 || scheduled) {
        if (running !== null) await running;
        else await new Promise((resolve) => setImmediate(resolve));
      }
    },
  };
}

function settle<R>(pending: Pending<unknown, R>, outcome: GroupOutcome<R>): void {
  if (outcome instanceof Error) pending.reject(outcome);
  else pending.resolve(outcome);
}

function settleAll<R>(group: readonly Pending<unknown, R>[], outcomes: ReadonlyArray<GroupOutcome<R>>): void {
  group.forEach((p, i) => settle(p, outcomes[i]!));
}

/** Whether a reported failure is the store's own (its 503), not one input's. */
function isStoreFault(error: unknown): boolean {
  return error instanceof ApiError && error.code === "storage_unavailable";
}

/**
 * `step` over `items` in order: synchronously while each step is, continuing after a step's promise once it settles.
 */
function eachInTurn<T>(
  items: readonly T[],
  step: (item: T) => Promise<void> | undefined,
  from = 0,
): Promise<void> | undefined {
  for (let i = from; i < items.length; i++) {
    const underWay = step(items[i]!);
    if (underWay !== undefined) return underWay.then(() => eachInTurn(items, step, i + 1));
  }
  return undefined;
}
