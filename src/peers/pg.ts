import type * as Pg from "pg";
import { loadPeer } from "./load.js";

/**
 * `pg`, loaded when a module that needs it is evaluated (dataport/postgres;
 * the PostgreSQL connector imports this module lazily, at its first query).
 * Used as `pg` is: `new pg.Pool(…)`, and `pg.Pool` as a type.
 */
const pg = loadPeer<typeof Pg>("pg", "dataport/postgres");

// The types travel with the value, so `pg.Pool` works in type positions as with `import pg from "pg"`.
declare namespace pg {
  export type Pool = Pg.Pool;
  export type PoolClient = Pg.PoolClient;
  export type PoolConfig = Pg.PoolConfig;
  export type Client = Pg.Client;
  export type ClientConfig = Pg.ClientConfig;
  export type Notification = Pg.Notification;
  export type QueryResult<R extends Pg.QueryResultRow = Pg.QueryResultRow> = Pg.QueryResult<R>;
  export type QueryResultRow = Pg.QueryResultRow;
  export type CustomTypesConfig = Pg.CustomTypesConfig;
}

export default pg;

// The named values too: the build routes every `import … from "pg"` here (tsup.config.ts, alias).
export const Pool = pg.Pool;
export const Client = pg.Client;
export const types = pg.types;
