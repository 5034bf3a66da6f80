import { call, type CallOptions, type FetchLike, type RetryOptions, sleep, type TransportOptions } from "./transport.js";
import type {
  AuditPage,
  AuditQuery,
  ConnectionQuery,
  ConnectionQueryResult,
  Dashboard,
  DashboardViews,
  Dataset,
  DatasetDetail,
  DatasetRowsPage,
  DatasetRowsQuery,
  Me,
  Row,
  SpaceObject,
  SpaceObjectName,
  TableRow,
  TableRowsPage,
} from "./types.js";

export interface ClientOptions {
  /** The API base, ending in the version prefix: `https://bi.example.com/api/v1`. */
  baseUrl: string;
  /** An API key or a session token. */
  token: string;
  /** Sent as `teamId` where an endpoint takes one (needed for session tokens). */
  teamId?: string;
  /** Default: the global `fetch`. Any `(Request) => Promise<Response>` works, `api.fetch` included. */
  fetch?: FetchLike;
  retry?: RetryOptions;
  /** Extra headers on every request. */
  headers?: Record<string, string>;
  /** For tests: replaces timers (backoff and poll waits). */
  sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
  /** For tests: the jitter source, in [0, 1). */
  random?: () => number;
}

export interface RequestOptions {
  signal?: AbortSignal;
}

export interface PageOptions extends RequestOptions {
  /** Rows per request (default 1000). */
  pageSize?: number;
}

export interface PollOptions extends Omit<AuditQuery, "cursor"> {
  /** Where to start (a cursor saved from an earlier page); default the beginning, or `since`. */
  cursor?: string;
  /** Wait between polls once caught up, in ms; never shorter than the feed's `lagSeconds` (default: `lagSeconds`). */
  intervalMs?: number;
  /** Stops the poller: the loop ends without an error. */
  signal?: AbortSignal;
}

export type DataportClient = ReturnType<typeof createClient>;

/**
 * A typed client for the Data Access API. Fetch-based, no runtime-specific
 * APIs: it runs in browsers, Node, Bun and Deno.
 *
 *   const dp = createClient({ baseUrl: "https://bi.example.com/api/v1", token });
 *   for await (const row of dp.datasets.iterateRows("ds_orders")) …
 */
export function createClient(options: ClientOptions) {
  const transport: TransportOptions = {
    baseUrl: options.baseUrl.replace(/\/+$/, ""),
    token: options.token,
    fetch: options.fetch ?? ((request) => globalThis.fetch(request)),
    retry: { retries: 3, baseDelayMs: 250, maxDelayMs: 8000, maxRetryAfterMs: 60_000, ...options.retry },
    headers: { ...options.headers },
    sleep: options.sleep ?? sleep,
    random: options.random ?? Math.random,
    newIdempotencyKey: () => globalThis.crypto.randomUUID(),
  };
  const get = <T>(path: string, query?: URLSearchParams, extra: Pick<CallOptions, "signal" | "headers" | "anonymous"> = {}) =>
    call<T>(transport, "GET", path, { signal: extra.signal, headers: extra.headers, anonymous: extra.anonymous, query });
  const team = (teamId: string | undefined) => query({ teamId: teamId ?? options.teamId });

  const datasets = {
    list: (opts: { teamId?: string } & RequestOptions = {}) =>
      get<{ datasets: Dataset[] }>("/datasets", team(opts.teamId), opts).then((r) => r.datasets),
    get: (id: string, opts: RequestOptions = {}) => get<DatasetDetail>(`/datasets/${seg(id)}`, undefined, opts),
    /** One page of rows. */
    rows: <R extends Row = Row>(id: string, q: DatasetRowsQuery & RequestOptions = {}) =>
      get<DatasetRowsPage<R>>(
        `/datasets/${seg(id)}/rows`,
        query({
          maxRows: q.maxRows,
          offset: q.offset,
          columns: q.columns?.join(","),
          filters: q.filters && JSON.stringify(q.filters),
        }),
        q,
      ),
    /** Every row, page by page (`offset` advancing) until `hasMore` is false. */
    async *iterateRows<R extends Row = Row>(id: string, q: Omit<DatasetRowsQuery, "maxRows"> & PageOptions = {}): AsyncGenerator<R> {
      let offset = q.offset ?? 0;
      for (;;) {
        const page = await datasets.rows<R>(id, { ...q, offset, maxRows: q.pageSize ?? 1000 });
        yield* page.data;
        if (!page.metadata.hasMore || page.data.length === 0) return;
        offset += page.data.length;
      }
    },
  };

  const tables = {
    /** One page of rows. */
    rows: (id: string, q: { limit?: number; offset?: number } & RequestOptions = {}) =>
      get<TableRowsPage>(`/tables/${seg(id)}/rows`, query({ limit: q.limit, offset: q.offset }), q),
    /** Every row, page by page until `hasMore` is false. */
    async *iterateRows(id: string, q: { offset?: number } & PageOptions = {}): AsyncGenerator<TableRow> {
      let offset = q.offset ?? 0;
      for (;;) {
        const page = await tables.rows(id, { ...q, offset, limit: q.pageSize ?? 1000 });
        yield* page.data;
        if (!page.metadata.hasMore || page.data.length === 0) return;
        offset += page.data.length;
      }
    },
    /** Adds a row (201). Retries reuse one `Idempotency-Key`, so a retried insert is stored once. */
    insert: (id: string, values: Row, opts: { idempotencyKey?: string } & RequestOptions = {}) =>
      call<TableRow>(transport, "POST", `/tables/${seg(id)}/rows`, { signal: opts.signal, idempotencyKey: opts.idempotencyKey, body: values }),
    /** Changes columns; with `expectedUpdatedAt` a row changed since then is refused with 409 `conflict`. */
    update: (id: string, rowId: string, values: Row, opts: { expectedUpdatedAt?: string } & RequestOptions = {}) =>
      call<TableRow>(transport, "PATCH", `/tables/${seg(id)}/rows/${seg(rowId)}`, {
        signal: opts.signal,
        body: opts.expectedUpdatedAt === undefined ? values : { ...values, expectedUpdatedAt: opts.expectedUpdatedAt },
      }),
    delete: (id: string, rowId: string, opts: RequestOptions = {}) =>
      call<{ deleted: true }>(transport, "DELETE", `/tables/${seg(id)}/rows/${seg(rowId)}`, { signal: opts.signal }),
  };

  const audit = {
    /** One page of the feed. */
    read: <E = Record<string, unknown>>(q: AuditQuery & RequestOptions = {}) => {
      const params = query({ cursor: q.cursor, limit: q.limit, format: q.format, since: q.since, teamId: q.teamId ?? options.teamId });
      for (const category of q.category ?? []) params.append("category", category);
      return get<AuditPage<E>>("/audit", params, q);
    },
    /**
     * Follows the feed for ever (until `signal` aborts): reads on at once while
     * `hasMore`, then waits `max(intervalMs, lagSeconds)` between polls. Yields
     * each non-empty page; store `page.cursor` once its events are handled to
     * resume exactly there.
     */
    async *poll<E = Record<string, unknown>>(opts: PollOptions = {}): AsyncGenerator<AuditPage<E>> {
      const { signal, intervalMs, ...q } = opts;
      let cursor = q.cursor;
      for (;;) {
        let page: AuditPage<E>;
        try {
          page = await audit.read<E>({ ...q, cursor, ...(cursor !== undefined && { since: undefined }), signal });
        } catch (error) {
          if (signal?.aborted) return;
          throw error;
        }
        cursor = page.cursor;
        if (page.events.length > 0) yield page;
        if (page.hasMore) continue;
        try {
          await transport.sleep(Math.max(intervalMs ?? 0, page.lagSeconds * 1000), signal);
        } catch (error) {
          if (signal?.aborted) return;
          throw error;
        }
      }
    },
  };

  return {
    /** What the token belongs to. */
    me: (opts: RequestOptions = {}) => get<Me>("/me", undefined, opts),
    datasets,
    connections: {
      query: (id: string, q: ConnectionQuery & RequestOptions = {}) =>
        get<ConnectionQueryResult>(
          `/connections/${seg(id)}/query`,
          query({
            limit: q.limit,
            offset: q.offset,
            filters: q.filters && JSON.stringify(q.filters),
            orderBy: q.orderBy,
            orderDirection: q.orderDirection,
            datasetId: q.datasetId,
            format: q.format,
            params: q.params && JSON.stringify(q.params),
          }),
          { signal: q.signal, ...(q.noCache && { headers: { "cache-control": "no-cache" } }) },
        ),
    },
    dashboards: {
      list: (opts: { teamId?: string } & RequestOptions = {}) =>
        get<{ dashboards: Dashboard[] }>("/dashboards", team(opts.teamId), opts).then((r) => r.dashboards),
      views: (id: string, q: { days?: number; by?: "day" | "viewer" } & RequestOptions = {}) =>
        get<DashboardViews>(`/dashboards/${seg(id)}/views`, query({ days: q.days, by: q.by }), q),
    },
    space: (object: SpaceObjectName, q: { days?: number; teamId?: string } & RequestOptions = {}) =>
      get<SpaceObject>(`/space/${seg(object)}`, query({ days: q.days, teamId: q.teamId ?? options.teamId }), q),
    tables,
    audit,
    /** The OpenAPI 3.1 document (no token sent). */
    openapi: (opts: RequestOptions = {}) => get<Record<string, unknown>>("/openapi.json", undefined, { signal: opts.signal, anonymous: true }),
  };
}

function seg(value: string): string {
  return encodeURIComponent(value);
}

function query(values: Record<string, string | number | undefined>): URLSearchParams {
  const params = new URLSearchParams();
  for (const [key, value] of Object.entries(values)) if (value !== undefined) params.set(key, String(value));
  return params;
}
