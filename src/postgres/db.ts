import { createHash } from "node:crypto";
import type { Pool, PoolClient, QueryResultRow } from "pg";
import type { IdPage, PutResult } from "../ports/storage/identity.js";

/**
 * What every area module gets: the pool, the schema-qualified name of each
 * table, and helpers for one-shot queries and transactions.
 */
export interface Db {
  pool: Pool;
  /** The quoted schema, e.g. `"dataport"`. */
  schema: string;
  /** A schema-qualified table name: `t("teams")` → `"dataport".teams`. */
  t(table: string): string;
  query<R extends QueryResultRow = QueryResultRow>(sql: string | Statement, params?: readonly unknown[]): Promise<R[]>;
  /** Runs `work` in one transaction (READ COMMITTED), committing on success and rolling back on a throw. */
  transaction<T>(work: (client: PoolClient) => Promise<T>): Promise<T>;
}

export function createDb(pool: Pool, schemaName: string): Db {
  const schema = quoteIdent(schemaName);
  return {
    pool,
    schema,
    t: (table) => `${schema}.${table}`,
    async query<R extends QueryResultRow>(sql: string | Statement, params: readonly unknown[] = []) {
      // pg copies a config object before adding the values to it, so a shared Statement goes as it is.
      const result = await pool.query<R>(sql, params as unknown[]);
      return result.rows;
    },
    async transaction(work) {
      const client = await pool.connect();
      try {
        await client.query("BEGIN");
        const result = await work(client);
        await client.query("COMMIT");
        return result;
      } catch (error) {
        await client.query("ROLLBACK").catch(() => {});
        throw error;
      } finally {
        client.release();
      }
    },
  };
}

/**
 * A statement of a hot path (every request or delivery runs it), parsed and
 * planned once per pooled connection instead of at every call: `pg` prepares
 * a named statement on first use on each connection. Named by a hash of its
 * text, so the same text shares a name and different texts (other schemas)
 * never do. Only for fixed texts: each one stays prepared for the
 * connection's life.
 */
export interface Statement {
  readonly name: string;
  readonly text: string;
}

export function statement(text: string): Statement {
  return { name: `dataport_${createHash("sha256").update(text).digest("hex").slice(0, 32)}`, text };
}

/** A PostgreSQL identifier in double quotes. */
export function quoteIdent(name: string): string {
  return `"${name.replaceAll('"', '""')}"`;
}

/**
 * A JSON text for a `json`/`jsonb` parameter. `pg` would turn a JS array into
 * a PostgreSQL array literal, so every JSON value is stringified here.
 */
export function json(value: unknown): string {
  return JSON.stringify(value ?? null);
}

/** int8/numeric columns arrive as strings; counts fit in a double. */
export function num(value: unknown): number {
  return value === null || value === undefined ? 0 : Number(value);
}

/**
 * The tail of an admin listing: ids after `page.after` in binary order, at
 * most `page.limit` (an index on `id collate "C"` makes it a range scan).
 * Appends its parameters to `params`.
 */
export function idPageSql(page: IdPage, params: unknown[]): string {
  const after = page.after === null ? "" : ` where id collate "C" > $${params.push(page.after)}`;
  return `${after} order by id collate "C" limit $${params.push(Math.max(1, Math.floor(page.limit)))}`;
}

/**
 * `returning ${PUT_RESULT}` on an upsert says whether it inserted: a row an
 * `on conflict do update` replaced carries the updating transaction in xmax,
 * a freshly inserted one carries none.
 */
export const PUT_RESULT = "(xmax = 0) as created";

export function putResult(rows: ReadonlyArray<{ created: boolean }>): PutResult {
  return rows[0]?.created ? "created" : "updated";
}
