import { DataportError, type ResponseMeta } from "./errors.js";
import { collect, type CollectOptions, paged, type Paged } from "./paging.js";
import { query, seg } from "./url.js";
import {
  type Answer,
  call,
  type CallOptions,
  callStream,
  createTransport,
  lowerCased,
  type TransportConfig,
} from "./transport.js";
import type {
  AuditEvent,
  AuditFeedEvent,
  AuditPage,
  AuditQuery,
  ConnectionQuery,
  ConnectionQueryGeoJson,
  ConnectionQueryResult,
  ConnectionQueryRows,
  Dashboard,
  DashboardViews,
  DashboardViewsByDay,
  DashboardViewsByViewer,
  Dataset,
  DatasetDetail,
  AggregateOptions,
  AggregatePage,
  DatasetRowsPage,
  DatasetRowsQuery,
  ExportFormat,
  Me,
  OcsfApiActivity,
  Row,
  RowQueryOptions,
  SpaceObject,
  SpaceObjectName,
  TableRow,
  TableRowsPage,
  ChangesPage,
  ChangesQuery,
  FollowOptions,
} from "./types.js";

export interface ClientOptions extends TransportConfig {
  /** Sent as `teamId` where an endpoint takes one (needed for session tokens). */
  teamId?: string;
}

/** What every method takes besides its own arguments. */
export interface RequestOptions {
  signal?: AbortSignal;
  /** Overrides the client's `timeoutMs` for this call. */
  timeoutMs?: number;
  /** Overrides the client's `retry.retries` for this call (0: one attempt). */
  retries?: number;
  /** Extra headers for this call, over the client's. */
  headers?: Record<string, string>;
}

export interface PageOptions extends RequestOptions {
  /** Rows per request (default 1000, the most the server sends). */
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

type TabularQuery = ConnectionQuery & { format?: "json" };
type GeoJsonQuery = ConnectionQuery & { format: "geojson" };

/** The largest page the server sends (`limit` of connection queries and input tables). */
const MAX_PAGE = 1000;

export type DataportClient = ReturnType<typeof createClient>;

/**
 * A typed client for the Data Access API. Fetch-based, no runtime-specific
 * APIs: it runs in browsers, Node, Bun and Deno.
 *
 *   const dp = createClient({ baseUrl: "https://bi.example.com/api/v1", token });
 *   for await (const row of dp.datasets.iterateRows("ds_orders")) …
 *   dp.meta(await dp.me())?.requestId
 */
export function createClient(options: ClientOptions) {
  const transport = createTransport(options);
  /** Metadata of the answers this client returned, by result object. */
  const metas = new WeakMap<object, ResponseMeta>();
  const remember = <T>({ body, meta }: Answer<T>): T => {
    if (body !== null && typeof body === "object") metas.set(body, meta);
    return body;
  };
  /** Keeps the metadata of the answer on a value made from its body (`{ datasets }` → the array). */
  const carry = <T extends object>(from: object, value: T): T => {
    const meta = metas.get(from);
    if (meta) metas.set(value, meta);
    return value;
  };
  const send = <T>(method: string, path: string, extra: CallOptions = {}) =>
    call<T>(transport, method, path, extra).then(remember);
  const get = <T>(path: string, query?: URLSearchParams, extra: Omit<CallOptions, "query"> = {}) =>
    send<T>("GET", path, { ...extra, query });
  const team = (teamId: string | undefined) => query({ teamId: teamId ?? options.teamId });
  const at = (opts: RequestOptions): CallOptions => ({
    signal: opts.signal,
    timeoutMs: opts.timeoutMs,
    retries: opts.retries,
    headers: lowerCased(opts.headers),
  });

  const datasets = {
    /** One page of the dataset's changes after `cursor` (docs/changes.md). */
    changes: (id: string, q: ChangesQuery & RequestOptions = {}) => readChanges("datasets", id, q),
    /** The dataset's changes for ever, from a rows read's `changesCursor` (see `follow`). */
    follow: (id: string, opts: FollowOptions = {}) => follow("datasets", id, opts),
    list: (opts: { teamId?: string } & RequestOptions = {}) =>
      get<{ datasets: Dataset[] }>("/datasets", team(opts.teamId), at(opts)).then((r) => carry(r, r.datasets)),
    get: (id: string, opts: RequestOptions = {}) => get<DatasetDetail>(`/datasets/${seg(id)}`, undefined, at(opts)),
    /** One page of rows. */
    rows: <R extends Row = Row>(id: string, q: DatasetRowsQuery<R> & RequestOptions = {}) =>
      get<DatasetRowsPage<R>>(`/datasets/${seg(id)}/rows`, datasetRowsQuery(q), at(q)),
    /**
     * Every row, page by page with cursors (keyset paging: each page costs
     * what the first does) until `hasMore` is false; `.collect({ max })` for an array.
     */
    iterateRows: <R extends Row = Row>(
      id: string,
      q: Omit<DatasetRowsQuery<R>, "maxRows"> & PageOptions = {},
    ): Paged<R> =>
      paged(() => {
        const { offset: _offset, ...rest } = q;
        return pages(q.offset ?? 0, (at) =>
          datasets.rows<R>(id, { ...(at.cursor === undefined ? q : rest), ...at, maxRows: q.pageSize ?? MAX_PAGE }),
        );
      }),
    /**
     * The rows as a CSV or NDJSON download, streamed: the body's bytes as
     * they arrive (pipe them to a file; nothing is held whole).
     */
    export: <R extends Row = Row>(id: string, q: DatasetRowsQuery<R> & { format: ExportFormat } & RequestOptions) =>
      callStream(transport, `/datasets/${seg(id)}/rows`, datasetRowsQuery(q), { ...at(q), accept: ACCEPT[q.format] }),
    /**
     * Groups of the rows with their metrics, computed in the store, and the
     * totals over every matching row; each group typed by the keys and
     * metrics asked for (`count` a number, `sum(c)` a number or null).
     */
    aggregate: <const K extends string = never, const M extends string = "count">(
      id: string,
      q: AggregateOptions<K, M> & RequestOptions = {},
    ) => get<AggregatePage<K, M>>(`/datasets/${seg(id)}/aggregate`, aggregateQuery(q), at(q)),
  };

  /** One page of a connection query: rows by default, GeoJSON with `format: "geojson"`. */
  function queryConnection<R extends Row = Row>(
    id: string,
    q?: TabularQuery & RequestOptions,
  ): Promise<ConnectionQueryRows<R>>;
  function queryConnection(id: string, q: GeoJsonQuery & RequestOptions): Promise<ConnectionQueryGeoJson>;
  function queryConnection(id: string, q?: ConnectionQuery & RequestOptions): Promise<ConnectionQueryResult>;
  function queryConnection(id: string, q: ConnectionQuery & RequestOptions = {}): Promise<ConnectionQueryResult> {
    return get<ConnectionQueryResult>(
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
      { ...at(q), ...(q.noCache && { headers: { "cache-control": "no-cache" } }) },
    );
  }

  const connections = {
    query: queryConnection,
    /**
     * Every row of a tabular query, page by page (`offset` advancing by the
     * rows returned) until `hasMore` is false. Each page is a query of its own
     * (cached, rate-limited like any other).
     */
    iterateRows: <R extends Row = Row>(
      id: string,
      q: Omit<ConnectionQuery, "limit" | "format" | "params"> & PageOptions = {},
    ): Paged<R> =>
      paged(async function* () {
        const { pageSize, ...rest } = q;
        let offset = q.offset ?? 0;
        for (;;) {
          const page = await queryConnection<R>(id, { ...rest, offset, limit: pageSize ?? MAX_PAGE });
          yield* page.data;
          if (!page.metadata.hasMore || page.data.length === 0) return;
          offset += page.data.length;
        }
      }),
  };

  function dashboardViews(id: string, q?: { days?: number; by?: "day" } & RequestOptions): Promise<DashboardViewsByDay>;
  function dashboardViews(
    id: string,
    q: { days?: number; by: "viewer" } & RequestOptions,
  ): Promise<DashboardViewsByViewer>;
  function dashboardViews(
    id: string,
    q?: { days?: number; by?: "day" | "viewer" } & RequestOptions,
  ): Promise<DashboardViews>;
  function dashboardViews(
    id: string,
    q: { days?: number; by?: "day" | "viewer" } & RequestOptions = {},
  ): Promise<DashboardViews> {
    return get<DashboardViews>(`/dashboards/${seg(id)}/views`, query({ days: q.days, by: q.by }), at(q));
  }

  const tables = {
    /** One page of rows. */
    rows: (id: string, q: TableRowsOptions & RequestOptions = {}) =>
      get<TableRowsPage>(`/tables/${seg(id)}/rows`, tableRowsQuery(q), at(q)),
    /** Every row, page by page with cursors until `hasMore` is false. */
    iterateRows: (id: string, q: Omit<TableRowsOptions, "limit"> & PageOptions = {}): Paged<TableRow> =>
      paged(() => {
        const { offset: _offset, ...rest } = q;
        return pages(q.offset ?? 0, (at) =>
          tables.rows(id, { ...(at.cursor === undefined ? q : rest), ...at, limit: q.pageSize ?? MAX_PAGE }),
        );
      }),
    /** The rows as a CSV or NDJSON download, streamed (every row unless `limit` says otherwise). */
    export: (id: string, q: TableRowsOptions & { format: ExportFormat } & RequestOptions) =>
      callStream(transport, `/tables/${seg(id)}/rows`, tableRowsQuery(q), { ...at(q), accept: ACCEPT[q.format] }),
    /** One page of the table's changes after `cursor` (docs/changes.md). */
    changes: (id: string, q: ChangesQuery & RequestOptions = {}) => readChanges("tables", id, q),
    /** The table's changes for ever, from a rows read's `changesCursor` (see `follow`). */
    follow: (id: string, opts: FollowOptions = {}) => follow("tables", id, opts),
    /** Groups of the rows with their metrics (`_createdAt`, `_updatedAt` too), as `datasets.aggregate`. */
    aggregate: <const K extends string = never, const M extends string = "count">(
      id: string,
      q: AggregateOptions<K, M> & RequestOptions = {},
    ) => get<AggregatePage<K, M>>(`/tables/${seg(id)}/aggregate`, aggregateQuery(q), at(q)),
    /** Adds a row (201). Retries reuse one `Idempotency-Key`, so a retried insert is stored once. */
    insert: (id: string, values: Row, opts: { idempotencyKey?: string } & RequestOptions = {}) =>
      send<TableRow>("POST", `/tables/${seg(id)}/rows`, {
        ...at(opts),
        idempotencyKey: opts.idempotencyKey,
        body: values,
      }),
    /**
     * Changes columns; with `expectedUpdatedAt` a row changed since then is refused with 409 `conflict`.
     * Retries reuse one `Idempotency-Key`, so a retry whose first attempt succeeded gets that answer, not a 409.
     */
    update: (
      id: string,
      rowId: string,
      values: Row,
      opts: { expectedUpdatedAt?: string; idempotencyKey?: string } & RequestOptions = {},
    ) =>
      send<TableRow>("PATCH", `/tables/${seg(id)}/rows/${seg(rowId)}`, {
        ...at(opts),
        idempotencyKey: opts.idempotencyKey,
        body: opts.expectedUpdatedAt === undefined ? values : { ...values, expectedUpdatedAt: opts.expectedUpdatedAt },
      }),
    delete: (id: string, rowId: string, opts: RequestOptions = {}) =>
      send<{ deleted: true }>("DELETE", `/tables/${seg(id)}/rows/${seg(rowId)}`, at(opts)),
  };

  function readChanges(
    kind: "tables" | "datasets",
    id: string,
    q: ChangesQuery & RequestOptions,
  ): Promise<ChangesPage> {
    const params = query({ cursor: q.cursor, limit: q.limit, wait: q.wait });
    // A long-poll is held up to `wait` seconds: the attempt may take that much longer than a plain call.
    const waitMs = (q.wait ?? 0) * 1000;
    const timeoutMs = q.timeoutMs ?? (transport.timeoutMs === 0 ? 0 : transport.timeoutMs + waitMs);
    return get<ChangesPage>(`/${kind}/${seg(id)}/changes`, params, { ...at(q), timeoutMs });
  }

  /**
   * Follows a feed for ever (until `signal` aborts), long-polling: yields
   * each non-empty page; store `page.cursor` once its changes are applied to
   * resume exactly there. After a failure it tries again with backoff
   * (doubling to `maxDelayMs`), from the same cursor, so nothing is missed or
   * repeated. Rethrows what retrying cannot mend: 410 `cursor_expired`
   * (re-read the rows and follow from their `changesCursor`), and any other
   * 4xx (the token, the id, the cursor).
   */
  async function* follow(kind: "tables" | "datasets", id: string, opts: FollowOptions): AsyncGenerator<ChangesPage> {
    const { signal } = opts;
    const wait = opts.wait ?? 25;
    let cursor = opts.cursor;
    for (let failures = 0; ;) {
      let page: ChangesPage;
      try {
        page = await readChanges(kind, id, { cursor, limit: opts.limit, wait, signal });
        failures = 0;
      } catch (error) {
        if (signal?.aborted) return;
        const status = error instanceof DataportError ? error.status : 0;
        if (status >= 400 && status < 500 && status !== 408 && status !== 429) throw error;
        try {
          await transport.sleep(
            Math.round(
              Math.min(transport.retry.maxDelayMs, transport.retry.baseDelayMs * 2 ** failures++) *
                (0.5 + transport.random() / 2),
            ),
            signal,
          );
        } catch {
          return;
        }
        continue;
      }
      cursor = page.cursor;
      if (page.changes.length > 0) yield page;
      if (signal?.aborted) return;
    }
  }

  /** One page of the feed: OCSF events by default, raw events with `format: "raw"`. */
  function readAudit<E = OcsfApiActivity>(q?: AuditQuery & { format?: "ocsf" } & RequestOptions): Promise<AuditPage<E>>;
  function readAudit<E = AuditEvent>(q: AuditQuery & { format: "raw" } & RequestOptions): Promise<AuditPage<E>>;
  function readAudit<E = AuditFeedEvent>(q?: AuditQuery & RequestOptions): Promise<AuditPage<E>>;
  function readAudit<E>(q: AuditQuery & RequestOptions = {}): Promise<AuditPage<E>> {
    const params = query({
      cursor: q.cursor,
      limit: q.limit,
      format: q.format,
      since: q.since,
      teamId: q.teamId ?? options.teamId,
    });
    for (const category of q.category ?? []) params.append("category", category);
    return get<AuditPage<E>>("/audit", params, at(q));
  }

  /**
   * Follows the feed for ever (until `signal` aborts): reads on at once while
   * `hasMore`, then waits `max(intervalMs, lagSeconds)` between polls. Yields
   * each non-empty page; store `page.cursor` once its events are handled to
   * resume exactly there.
   */
  function pollAudit<E = OcsfApiActivity>(opts?: PollOptions & { format?: "ocsf" }): AsyncGenerator<AuditPage<E>>;
  function pollAudit<E = AuditEvent>(opts: PollOptions & { format: "raw" }): AsyncGenerator<AuditPage<E>>;
  function pollAudit<E = AuditFeedEvent>(opts?: PollOptions): AsyncGenerator<AuditPage<E>>;
  async function* pollAudit<E>(opts: PollOptions = {}): AsyncGenerator<AuditPage<E>> {
    const { signal, intervalMs, ...q } = opts;
    let cursor = q.cursor;
    for (;;) {
      let page: AuditPage<E>;
      try {
        page = await readAudit<E>({ ...q, cursor, ...(cursor !== undefined && { since: undefined }), signal });
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
  }

  return {
    /** What the token belongs to. */
    me: (opts: RequestOptions = {}) => get<Me>("/me", undefined, at(opts)),
    datasets,
    connections,
    dashboards: {
      list: (opts: { teamId?: string } & RequestOptions = {}) =>
        get<{ dashboards: Dashboard[] }>("/dashboards", team(opts.teamId), at(opts)).then((r) =>
          carry(r, r.dashboards),
        ),
      views: dashboardViews,
    },
    space: (object: SpaceObjectName, q: { days?: number; teamId?: string } & RequestOptions = {}) =>
      get<SpaceObject>(`/space/${seg(object)}`, query({ days: q.days, teamId: q.teamId ?? options.teamId }), at(q)),
    tables,
    audit: { read: readAudit, poll: pollAudit },
    /** The OpenAPI 3.1 document (no token sent). */
    openapi: (opts: RequestOptions = {}) =>
      get<Record<string, unknown>>("/openapi.json", undefined, { ...at(opts), anonymous: true }),
    /**
     * The metadata of the answer a result came from: request id, rate limit,
     * status, attempts. Undefined for a value this client did not return.
     */
    meta: (result: object): ResponseMeta | undefined => metas.get(result),
    /** Up to `max` items of any iterator (`iterateRows`, your own generator), fetching no page past them. */
    collect: <T>(items: AsyncIterable<T>, opts: CollectOptions) => collect(items, opts),
  };
}

/**
 * Every page's rows until `hasMore` is false: after the first page (at
 * `offset`), by the cursor the server hands back (keyset paging), or — from
 * a server that sends no `nextCursor` (one older than cursors) — by offset.
 */
async function* pages<R>(
  offset: number,
  read: (at: {
    cursor?: string;
    offset?: number;
  }) => Promise<{ data: R[]; metadata: { hasMore: boolean; nextCursor?: string | null } }>,
): AsyncGenerator<R> {
  let page = await read(offset === 0 ? {} : { offset });
  for (;;) {
    yield* page.data;
    const { hasMore, nextCursor } = page.metadata;
    if (!hasMore || page.data.length === 0 || nextCursor === null) return;
    offset += page.data.length;
    page = await read(typeof nextCursor === "string" ? { cursor: nextCursor } : { offset });
  }
}

/** What `tables.rows` takes. */
export interface TableRowsOptions extends RowQueryOptions<TableRow> {
  /** Rows per page, 1 to 1000 (default 100). */
  limit?: number;
  offset?: number;
}

const ACCEPT: Record<ExportFormat, string> = { csv: "text/csv", ndjson: "application/x-ndjson" };

function rowQueryParams(q: RowQueryOptions<Row> & { format?: ExportFormat }) {
  return {
    where: q.where && JSON.stringify(q.where),
    sort: q.sort && q.sort.length > 0 ? q.sort.join(",") : undefined,
    cursor: q.cursor,
    format: q.format,
  };
}

function datasetRowsQuery(q: DatasetRowsQuery<Row> & { format?: ExportFormat }): URLSearchParams {
  return query({
    maxRows: q.maxRows,
    offset: q.offset,
    columns: q.columns?.join(","),
    filters: q.filters && JSON.stringify(q.filters),
    ...rowQueryParams(q),
  });
}

function aggregateQuery(q: AggregateOptions): URLSearchParams {
  return query({
    groupBy: q.groupBy && q.groupBy.length > 0 ? q.groupBy.join(",") : undefined,
    metrics: q.metrics && q.metrics.length > 0 ? q.metrics.join(",") : undefined,
    where: q.where && JSON.stringify(q.where),
    filters: q.filters && JSON.stringify(q.filters),
    having: q.having && JSON.stringify(q.having),
    sort: q.sort && q.sort.length > 0 ? q.sort.join(",") : undefined,
    maxRows: q.maxRows,
    offset: q.offset,
  });
}

function tableRowsQuery(q: TableRowsOptions & { format?: ExportFormat }): URLSearchParams {
  return query({ limit: q.limit, offset: q.offset, ...rowQueryParams(q as RowQueryOptions<Row>) });
}
