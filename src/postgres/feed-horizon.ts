import type { Db } from "./db.js";

/**
 * Positions of a feed (the audit log; the change log next) and the horizon
 * below which a reader may return them, on PostgreSQL.
 *
 * Transactions commit out of order: a position drawn early may commit after
 * a later one was read, and a cursor past it would skip it for good. So a
 * writer registers under its feed before it draws a position
 * (`{schema}.feed_register(sequence, part)`, then `nextval`; or both in one
 * call, `{schema}.feed_position`, a column's default; migration 9): a shared
 * advisory lock held until its transaction ends, keyed by the feed and the
 * value the sequence had just before, a bound below every position the
 * transaction takes. Once per transaction and feed: about 15 µs of server
 * time per transaction, a few µs per further position. A reader (`{schema}.feed_horizon`) reads the sequence, then the
 * registrations in `pg_locks`; every position below the smallest bound (or
 * past the sequence's value) that will ever commit has committed, since a
 * writer that registers later draws above the value read, and a lock is
 * released only after its transaction's rows are visible.
 *
 * Only the feed's own open writes hold it back: not transactions elsewhere on
 * the server, nor Dataport's writes to other schemas or feeds. A writer that
 * dies takes its lock with it. A feed is a sequence, or a part of one (one
 * sequence, a horizon per `part`, e.g. per dataset): the key is a hash of
 * both, and a collision only holds a reader back longer.
 */
export interface FeedHorizon {
  /** Every position below this one (decimal) that will ever commit has committed. */
  below: string;
  /** Whether a write still open on the feed holds `below` back. */
  held: boolean;
  /**
   * How long the oldest open write holding `below` back has been in its
   * transaction, in ms by the database's clock; 0 when none does (or when
   * the database does not show another role's sessions).
   */
  heldBackMs: number;
}

export interface FeedPositions {
  /**
   * SQL for a writer's next position (register, then draw), for an insert
   * whose column has no such default; `partSql` is the SQL of the part
   * (a parameter such as `$3`), or none for the whole sequence.
   */
  nextPositionSql(partSql?: string): string;
  /**
   * SQL that registers the transaction under the feed (of `partSql`), for a
   * writer that then draws many positions with plain `nextval` (cheaper per
   * row): it MUST run, in the same transaction, before the first draw, as
   * an earlier statement (or a CTE the drawing rows are joined to).
   */
  registerSql(partSql?: string): string;
  /** SQL of a plain draw, after `registerSql`. */
  drawSql(): string;
  /**
   * The horizon now. A read bounded by it MUST be a statement issued after
   * this call returned (a later snapshot), never the same statement.
   */
  horizon(part?: string | null): Promise<FeedHorizon>;
}

/** The feed drawing from `sequence` (unqualified; it lives in the store's schema). */
export function feedPositions(db: Db, sequence: string): FeedPositions {
  const qualified = db.t(sequence);
  const sequenceLiteral = `'${qualified.replaceAll("'", "''")}'::regclass`;
  const args = (partSql?: string) => `${sequenceLiteral}${partSql ? `, ${partSql}` : ""}`;
  const sql = `select below::text as below, held, held_ms from ${db.schema}.feed_horizon($1::regclass, $2)`;
  return {
    nextPositionSql(partSql) {
      return `${db.schema}.feed_position(${args(partSql)})`;
    },
    registerSql(partSql) {
      return `${db.schema}.feed_register(${args(partSql)})`;
    },
    drawSql() {
      return `nextval(${sequenceLiteral})`;
    },
    async horizon(part = null) {
      const [row] = await db.query<{ below: string; held: boolean; held_ms: string }>(sql, [qualified, part]);
      if (!row) throw new Error("feed_horizon returned no row");
      return { below: row.below, held: row.held, heldBackMs: Number(row.held_ms) };
    },
  };
}

/**
 * A page of a feed bounded by its horizon: the horizon first, then the page
 * in a later statement (`read(below)`), whose snapshot sees every write the
 * horizon passed. A committed position can sit behind a write still open;
 * while the page is not full and such a write holds it back, this waits
 * briefly for short ones to finish (polling until `waitMs` has passed), then
 * answers with how long it held the read back (0: nothing did).
 */
export async function readToHorizon<P extends { full: boolean }>(
  feed: FeedPositions,
  part: string | null,
  waitMs: number,
  read: (below: string) => Promise<P>,
): Promise<{ page: P; heldBackMs: number }> {
  const deadline = Date.now() + waitMs;
  for (;;) {
    const horizon = await feed.horizon(part);
    const page = await read(horizon.below);
    if (page.full || !horizon.held || Date.now() >= deadline)
      return { page, heldBackMs: horizon.held ? horizon.heldBackMs : 0 };
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}
