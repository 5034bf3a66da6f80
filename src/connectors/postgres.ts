import type pg from "pg";
import type { ConnectionRecord, Row } from "../domain/model.js";
import { emptyRow } from "../domain/rows.js";
import { checkout, guardClients, type Lease } from "../postgres/db.js";
import { quoteIdent as quoteSqlIdent } from "../sql/literals.js";
import type { Resolver } from "../domain/addresses.js";
import { ForbiddenAddressError, guardedSocketFactory } from "./dial-guard.js";
import {
  type Connector,
  type ConnectorQuery,
  type ConnectorResult,
  InvalidQueryError,
  UpstreamThrottledError,
  UpstreamUnavailableError,
} from "../ports/connector.js";

export interface PostgresConnectorOptions {
  /** Connections per pool (one pool per connection). Default 4. */
  poolSize?: number;
  /** Statement timeout when the connection's config sets none, ms. Default 5000. */
  statementTimeoutMs?: number;
  /**
   * Whether databases on loopback and private networks (and local sockets)
   * may be reached. Default true: a host's warehouse is often internal. Set
   * false when the people who write connection URLs are not trusted with
   * the host's network (`createDataApi` passes its `allowPrivateUpstreams`).
   * Link-local (cloud metadata), unspecified and multicast addresses are
   * never reached either way.
   */
  allowPrivateAddresses?: boolean;
  /** How a database host name becomes addresses (default `dns.lookup`); each is judged before it is dialled. */
  resolve?: Resolver;
}

interface SourceColumn {
  name: string;
  dataType: string;
}

/**
 * A PostgreSQL table or view as a source. `config.url` is the connection
 * string; `config.statementTimeoutMs` bounds each query. A dataset's source
 * is `table` (in the connection's current schema) or `schema.table`.
 *
 * Safety: the source and every column named by `filters` or `orderBy` are
 * checked against `information_schema.columns` and quoted; values travel as
 * bind parameters; each query runs in a READ ONLY transaction with a
 * statement timeout. Nothing from the request is ever spliced into SQL.
 *
 * Addresses: every socket the pool opens is judged as it is dialled, after
 * the host name (wherever the URL puts it: its host, `?host=`) is resolved,
 * so a name that resolves to a forbidden address is refused however it is
 * spelled, and DNS cannot answer one address to the check and another to
 * the connect.
 */
export function postgresConnector(options: PostgresConnectorOptions = {}): Connector {
  const pools = new Map<string, pg.Pool>();
  const allowPrivate = options.allowPrivateAddresses ?? true;
  const stream = guardedSocketFactory({ allowPrivate, resolve: options.resolve });
  // pg is an optional peer: loaded at the first query of a postgres connection, so
  // `import "dataport"` (which registers this connector by default) never loads it.
  let driver: Promise<PgDriver> | undefined;
  const loadDriver = () =>
    (driver ??= import("../peers/pg.js").then(({ default: pgModule }) => ({ pgModule, types: jsonTypes(pgModule) })));

  function poolOf(pgModule: PgModule, connection: ConnectionRecord): pg.Pool {
    const url = connection.config.url;
    if (typeof url !== "string" || url === "") throw new UpstreamUnavailableError("the connection has no database url");
    const key = `${connection.id}\n${url}`;
    let pool = pools.get(key);
    if (!pool) {
      pool = new pgModule.Pool({
        connectionString: url,
        max: options.poolSize ?? 4,
        connectionTimeoutMillis: 5_000,
        idleTimeoutMillis: 10_000,
        allowExitOnIdle: true,
        application_name: "dataport",
        stream,
      });
      // A client losing its server, idle or checked out, must not crash the host.
      pool.on("error", () => {});
      guardClients(pool);
      pools.set(key, pool);
    }
    return pool;
  }

  return {
    isSpatial: () => false,
    async query(connection, query) {
      if (query.format === "geojson")
        throw new InvalidQueryError("format", "postgres sources answer tabular queries only");
      if (query.source === null) throw new UpstreamUnavailableError("the dataset names no source table");
      const timeout = statementTimeout(connection.config.statementTimeoutMs, options.statementTimeoutMs ?? 5_000);
      // A missing pg is the host's to fix: it fails the request as an unexpected error, logged with the package to
      // install.
      const { pgModule, types } = await loadDriver();
      let lease: Lease;
      try {
        lease = await checkout(poolOf(pgModule, connection));
      } catch (error) {
        throw translate(error);
      }
      const { client } = lease;
      try {
        await client.query("BEGIN TRANSACTION READ ONLY");
        await client.query(`SET LOCAL statement_timeout = ${timeout}`);
        const result = await selectPage(client, query.source, query, types);
        await client.query("COMMIT");
        return result;
      } catch (error) {
        await client.query("ROLLBACK").catch(() => lease.spoil());
        throw translate(error);
      } finally {
        lease.release();
      }
    },
    async close() {
      const all = [...pools.values()];
      pools.clear();
      await Promise.all(all.map((pool) => pool.end()));
    },
  };
}

type PgModule = typeof import("pg");

interface PgDriver {
  pgModule: PgModule;
  types: pg.CustomTypesConfig;
}

async function selectPage(
  client: pg.PoolClient,
  source: string,
  query: ConnectorQuery,
  types: pg.CustomTypesConfig,
): Promise<ConnectorResult> {
  const { schema, table } = splitSource(source);
  const columns = await sourceColumns(client, schema, table);
  if (columns.length === 0) throw new UpstreamUnavailableError(`source ${source} does not exist`);
  const byName = new Map(columns.map((c) => [c.name, c]));
  const values: unknown[] = [];
  const conditions: string[] = [];
  for (const [name, value] of Object.entries(query.filters ?? {})) {
    const column = byName.get(name);
    if (!column) throw new InvalidQueryError("filters", `unknown column ${name} in filters`);
    conditions.push(condition(column, value, values));
  }
  let order = "";
  if (query.orderBy !== null) {
    if (!byName.has(query.orderBy)) throw new InvalidQueryError("orderBy", `orderBy names no column: ${query.orderBy}`);
    order = ` ORDER BY ${quoteIdent(query.orderBy)} ${query.orderDirection === "DESC" ? "DESC" : "ASC"} NULLS LAST`;
  }
  values.push(query.limit + 1, query.offset);
  const text =
    `SELECT * FROM ${schema === null ? "" : `${quoteIdent(schema)}.`}${quoteIdent(table)}` +
    (conditions.length > 0 ? ` WHERE ${conditions.join(" AND ")}` : "") +
    `${order} LIMIT $${values.length - 1} OFFSET $${values.length}`;
  const result = await client.query<unknown[]>({ text, values, rowMode: "array", types });
  const names = result.fields.map((f) => f.name);
  const rows = result.rows.slice(0, query.limit).map((cells) => {
    // Null-prototype rows: a column named __proto__ is plain data.
    const row: Row = emptyRow();
    names.forEach((name, i) => (row[name] = jsonValue(cells[i])));
    return row;
  });
  return { kind: "rows", rows, hasMore: result.rows.length > query.limit };
}

const DATE_OID = 1082;
const TIMESTAMP_OID = 1114;

/**
 * pg's parsers, except for values JSON cannot carry: a `date` stays
 * `YYYY-MM-DD` and a `timestamp` (no zone) stays wall-clock time
 * `YYYY-MM-DDTHH:MM:SS`, instead of Dates shifted by the server's zone.
 */
function jsonTypes(pgModule: PgModule): pg.CustomTypesConfig {
  return {
    getTypeParser(oid: number, format?: "text" | "binary") {
      if (oid === DATE_OID) return (value: string) => value;
      if (oid === TIMESTAMP_OID) return (value: string) => value.replace(" ", "T");
      return pgModule.types.getTypeParser(oid, format as "text");
    },
  } as pg.CustomTypesConfig;
}

/** A cell as JSON: an instant (`timestamptz`) as ISO 8601 UTC, bytes (`bytea`) as base64. */
function jsonValue(cell: unknown): unknown {
  if (cell === undefined || cell === null) return null;
  if (cell instanceof Date) return Number.isNaN(cell.getTime()) ? null : cell.toISOString();
  if (Buffer.isBuffer(cell)) return cell.toString("base64");
  return cell;
}

/** JSON equality pushed down: json columns compare as jsonb, others let PostgreSQL cast the parameter. */
function condition(column: SourceColumn, value: unknown, values: unknown[]): string {
  const ident = quoteIdent(column.name);
  if (value === null) return `${ident} IS NULL`;
  const isJson = column.dataType === "json" || column.dataType === "jsonb";
  if (isJson) {
    values.push(JSON.stringify(value));
    return `${ident}::jsonb = $${values.length}::jsonb`;
  }
  // An object or array never equals a scalar column.
  if (typeof value === "object") return "FALSE";
  values.push(value);
  return `${ident} = $${values.length}`;
}

async function sourceColumns(client: pg.PoolClient, schema: string | null, table: string): Promise<SourceColumn[]> {
  const result = await client.query<{ column_name: string; data_type: string }>(
    `SELECT column_name, data_type FROM information_schema.columns
      WHERE table_schema = COALESCE($1, current_schema()) AND table_name = $2
      ORDER BY ordinal_position`,
    [schema, table],
  );
  return result.rows.map((r) => ({ name: r.column_name, dataType: r.data_type }));
}

/** `schema.table` or `table`. Quoting happens later; these names were checked to exist first. */
function splitSource(source: string): { schema: string | null; table: string } {
  const dot = source.indexOf(".");
  return dot < 0 ? { schema: null, table: source } : { schema: source.slice(0, dot), table: source.slice(dot + 1) };
}

/** A PostgreSQL quoted identifier of the upstream's (a NUL is refused: PostgreSQL text cannot hold one). */
export function quoteIdent(name: string): string {
  if (name.includes("\u0000")) throw new InvalidQueryError("orderBy", "a column name cannot contain NUL");
  return quoteSqlIdent(name);
}

function statementTimeout(configured: unknown, fallback: number): number {
  return typeof configured === "number" && Number.isInteger(configured) && configured > 0 && configured <= 600_000
    ? configured
    : fallback;
}

/** A pg or socket failure as a typed connector error; the message never carries the connection string. */
function translate(error: unknown): Error {
  if (
    error instanceof InvalidQueryError ||
    error instanceof UpstreamUnavailableError ||
    error instanceof UpstreamThrottledError
  ) {
    return error;
  }
  if (error instanceof ForbiddenAddressError) return new UpstreamUnavailableError(error.message);
  const code = typeof (error as { code?: unknown })?.code === "string" ? (error as { code: string }).code : "";
  if (code.startsWith("22") || code === "42883") {
    return new InvalidQueryError("filters", "a filter value does not fit its column's type");
  }
  if (code === "53300" || code === "53400") return new UpstreamThrottledError("the database has too many connections");
  if (code === "57014") return new UpstreamUnavailableError("the query ran past the statement timeout");
  if (code === "42P01") return new UpstreamUnavailableError("the source table does not exist");
  if (code === "28P01" || code === "28000") return new UpstreamUnavailableError("the database refused the credentials");
  if (/^[0-9A-Z]{5}$/.test(code))
    return new UpstreamUnavailableError(`the database refused the query (SQLSTATE ${code})`);
  return new UpstreamUnavailableError("cannot reach the database");
}
