import type { ConnectionInput, ConnectionView, DatasetInput, SigningSecretInput } from "../admin/catalog.js";
import type { ChangeOptions, ListOptions, ListPage, Put } from "../admin/change.js";
import type { RefreshResult } from "../admin/connections.js";
import type { DashboardVersionInput } from "../admin/dashboards.js";
import type { AuditEventInput, CreditUsageInput, DashboardViewInput, RefreshRunInput } from "../admin/history.js";
import type {
  BusinessInput,
  MembershipInput,
  SessionInfo,
  SessionInput,
  TeamInput,
  UserInput,
} from "../admin/identity.js";
import type { ApiKeyInfo, KeyAdmin } from "../admin/keys.js";
import type { TableInput } from "../admin/tables.js";
import type {
  WebhookDeliveryQuery,
  WebhookDeliveryRecord,
  WebhookDeliverySummary,
  WebhookReplayFilter,
  WebhookReplaySummary,
} from "../admin/webhook-deliveries.js";
import type { RequestOptions } from "../client/client.js";
import type { ResponseMeta } from "../client/errors.js";
import { paged, type Paged } from "../client/paging.js";
import {
  type Answer,
  call,
  type CallOptions,
  createTransport,
  lowerCased,
  type TransportConfig,
} from "../client/transport.js";
import { query, seg } from "../client/url.js";
import type {
  Business,
  DashboardRecord,
  Membership,
  TableRecord,
  Team,
  UploadOrConnectionDataset,
  User,
} from "../domain/model.js";
import { type RowsUpload, uploadBody, type UploadProgressOptions } from "./rows.js";

export interface AdminClientOptions extends TransportConfig {
  /**
   * Who makes the changes, sent as `X-Actor-User-Id` (a known host user) and
   * recorded as the actor of their audit events; a call's own `actorUserId`
   * wins. Without it, changes are the host's (`{ type: "system", id: "host" }`).
   */
  actorUserId?: string;
}

/** What every change takes: who makes it, and the call's own transport options. */
export type ChangeRequestOptions = ChangeOptions & RequestOptions;

/** What an upload takes: a change's options, and who hears of its progress (`onProgress`). */
export type UploadRequestOptions = ChangeRequestOptions & UploadProgressOptions;

/** A listing's page options. */
export type ListRequestOptions = ListOptions & RequestOptions;

/** Options of `iterate`: every object of a collection, page by page. */
export interface IterateOptions extends RequestOptions {
  /** Objects per request (default 100, at most 1000). */
  pageSize?: number;
}

export type AdminClient = ReturnType<typeof createAdminClient>;

/**
 * A typed client for the admin HTTP API (`/api/admin/v1`): the admin
 * functions of `createAdmin(api)`, over HTTP, with the same arguments and
 * results (a type test holds each method to its function). Fetch-based like
 * `dataport/client`, whose transport it shares: retries, timeouts, hooks and
 * errors behave the same.
 *
 *   const admin = createAdminClient({ baseUrl: "https://bi.example.com/api/admin/v1", token: adminToken });
 *   const { created } = await admin.teams.put("team_ops", { name: "Ops", plan: "pro", businessId: null, isPersonal:
 * false });
 */
export function createAdminClient(options: AdminClientOptions) {
  const transport = createTransport(options);
  const metas = new WeakMap<object, ResponseMeta>();
  const remember = <T>({ body, meta }: Answer<T>): T => {
    if (body !== null && typeof body === "object") metas.set(body, meta);
    return body;
  };
  const keep = <T extends object>(meta: ResponseMeta, value: T): T => {
    metas.set(value, meta);
    return value;
  };

  /** The call options of a request: the transport's own, and the actor of a change. */
  const at = (opts: ChangeRequestOptions = {}): CallOptions => {
    const actor = opts.actorUserId === undefined ? options.actorUserId : opts.actorUserId;
    const headers = { ...(typeof actor === "string" && { "x-actor-user-id": actor }), ...lowerCased(opts.headers) };
    return { signal: opts.signal, timeoutMs: opts.timeoutMs, retries: opts.retries, headers };
  };
  const send = <T>(method: string, path: string, extra: CallOptions = {}) =>
    call<T>(transport, method, path, extra).then(remember);
  const get = <T>(path: string, opts: RequestOptions = {}) => send<T>("GET", path, at(opts));
  const remove = async (path: string, opts: ChangeRequestOptions = {}): Promise<void> => {
    await send<null>("DELETE", path, at(opts));
  };
  /** A PUT: 201 means created, 200 replaced, as the admin functions' `Put` says. */
  const put = async <T>(path: string, body: unknown, opts: ChangeRequestOptions = {}): Promise<Put<T>> => {
    const { body: value, meta } = await call<T>(transport, "PUT", path, { ...at(opts), body });
    if (value !== null && typeof value === "object") metas.set(value, meta);
    return keep(meta, { created: meta.status === 201, value });
  };
  /** A POST the server would apply again if sent twice: retried only when refused (429). */
  const create = <T>(path: string, body: unknown, opts: ChangeRequestOptions = {}) =>
    send<T>("POST", path, { ...at(opts), body, retryOn: "refused" });
  const list = <T>(path: string, opts: ListRequestOptions = {}) =>
    send<ListPage<T>>("GET", path, {
      ...at(opts),
      query: query({ limit: opts.limit, cursor: opts.cursor ?? undefined }),
    });
  /** Every object, following `nextCursor` until the last page. */
  const iterate = <T>(path: string, opts: IterateOptions = {}): Paged<T> =>
    paged(async function* () {
      const { pageSize, ...rest } = opts;
      let cursor: string | null = null;
      do {
        const page: ListPage<T> = await list<T>(path, { ...rest, limit: pageSize ?? 100, cursor });
        yield* page.data;
        cursor = page.nextCursor;
      } while (cursor !== null);
    });

  /** GET and DELETE of one collection's members, a listing and an iterator. */
  function members<T>(path: string) {
    return {
      get: (id: string, opts?: RequestOptions): Promise<T> => get<T>(`${path}/${seg(id)}`, opts),
      list: (opts?: ListRequestOptions): Promise<ListPage<T>> => list<T>(path, opts),
      iterate: (opts?: IterateOptions): Paged<T> => iterate<T>(path, opts),
      delete: (id: string, opts?: ChangeRequestOptions): Promise<void> => remove(`${path}/${seg(id)}`, opts),
    };
  }

  /** The same and PUT: create or replace by id (`created` when nothing had the id). */
  function collection<T, Input>(path: string) {
    return {
      put: (id: string, input: Input, opts?: ChangeRequestOptions): Promise<Put<T>> =>
        put<T>(`${path}/${seg(id)}`, input, opts),
      ...members<T>(path),
    };
  }

  const memberships = {
    /** A user's memberships (the API's `{ data }`, unwrapped). */
    list: (userId: string, opts?: RequestOptions): Promise<Membership[]> =>
      get<{ data: Membership[] }>(`/users/${seg(userId)}/memberships`, opts).then((r) => carry(r, r.data)),
    get: (userId: string, teamId: string, opts?: RequestOptions): Promise<Membership> =>
      get<Membership>(`/users/${seg(userId)}/memberships/${seg(teamId)}`, opts),
    /** Adds the user to the team or changes the role; `created` when added. */
    put: (
      userId: string,
      teamId: string,
      input: MembershipInput,
      opts?: ChangeRequestOptions,
    ): Promise<Put<Membership>> => put<Membership>(`/users/${seg(userId)}/memberships/${seg(teamId)}`, input, opts),
    delete: (userId: string, teamId: string, opts?: ChangeRequestOptions): Promise<void> =>
      remove(`/users/${seg(userId)}/memberships/${seg(teamId)}`, opts),
  };

  const sessions = {
    /**
     * Issues a session token; the plaintext is in this answer only. Sent once (a retry would issue a second session).
     */
    create: (input: SessionInput, opts?: ChangeRequestOptions): Promise<SessionInfo & { token: string }> =>
      create<SessionInfo & { token: string }>("/sessions", input, opts),
    /** The session, never its token. */
    get: (id: string, opts?: RequestOptions): Promise<SessionInfo> => get<SessionInfo>(`/sessions/${seg(id)}`, opts),
    /** Ends the session: its token answers 401 at once. */
    delete: (id: string, opts?: ChangeRequestOptions): Promise<void> => remove(`/sessions/${seg(id)}`, opts),
  };

  const apiKeys = {
    /**
     * Creates a key of `input.teamId`; the token is in this answer only (as
     * `createApiKey` answers: `{ key, token }`). Sent once (a retry would create a second key).
     */
    async create(
      input: Parameters<KeyAdmin["createApiKey"]>[0],
      opts?: RequestOptions,
    ): Promise<{ key: ApiKeyInfo; token: string }> {
      const { teamId, ...body } = input;
      const { token, ...key } = await create<ApiKeyInfo & { token: string }>(
        `/teams/${seg(teamId)}/api-keys`,
        body,
        opts,
      );
      return { key, token };
    },
    /** A team's keys, newest first, without tokens (the API's `{ data }`, unwrapped). */
    list: (teamId: string, opts?: RequestOptions): Promise<ApiKeyInfo[]> =>
      get<{ data: ApiKeyInfo[] }>(`/teams/${seg(teamId)}/api-keys`, opts).then((r) => carry(r, r.data)),
    get: (id: string, opts?: RequestOptions): Promise<ApiKeyInfo> => get<ApiKeyInfo>(`/api-keys/${seg(id)}`, opts),
    /** Revokes the key: 401 at once. */
    revoke: (id: string, opts?: ChangeRequestOptions): Promise<void> => remove(`/api-keys/${seg(id)}`, opts),
  };

  const connections = {
    ...collection<ConnectionView, ConnectionInput>("/connections"),
    /**
     * A webhook connection's signing secret; `{ secret: null }` removes every secret. With
     * `overlapSeconds` (at most 7 days) the secret it replaces is accepted too until the overlap ends.
     */
    setSigningSecret: (id: string, input: SigningSecretInput, opts?: ChangeRequestOptions): Promise<ConnectionView> =>
      send<ConnectionView>("PUT", `/connections/${seg(id)}/signing-secret`, { ...at(opts), body: input }),
    /** A webhook connection's delivery log, newest first (outcome, reason, since; limit and cursor). */
    listDeliveries: (
      id: string,
      opts: WebhookDeliveryQuery & RequestOptions = {},
    ): Promise<ListPage<WebhookDeliverySummary>> => {
      const { outcome, reason, since, limit, cursor, ...rest } = opts;
      return send<ListPage<WebhookDeliverySummary>>("GET", `/connections/${seg(id)}/deliveries`, {
        ...at(rest),
        query: query({ outcome, reason, since, limit, cursor: cursor ?? undefined }),
      });
    },
    /** One delivery, with its headers (credentials redacted) and kept body. */
    getDelivery: (id: string, deliveryId: string, opts?: RequestOptions): Promise<WebhookDeliveryRecord> =>
      get<WebhookDeliveryRecord>(`/connections/${seg(id)}/deliveries/${seg(deliveryId)}`, opts),
    /** Ingests a delivery's kept body again as a new delivery (no signature check, no rate limit). Sent once. */
    replayDelivery: (id: string, deliveryId: string, opts?: ChangeRequestOptions): Promise<WebhookDeliveryRecord> =>
      create<WebhookDeliveryRecord>(`/connections/${seg(id)}/deliveries/${seg(deliveryId)}/replay`, undefined, opts),
    /** Replays every kept delivery matching `filter`, oldest first. Sent once. */
    replayDeliveries: (
      id: string,
      filter: WebhookReplayFilter = {},
      opts?: ChangeRequestOptions,
    ): Promise<WebhookReplaySummary> =>
      create<WebhookReplaySummary>(`/connections/${seg(id)}/deliveries/replay`, filter, opts),
  };

  const datasets = {
    ...collection<UploadOrConnectionDataset, DatasetInput>("/datasets"),
    /**
     * Replaces the dataset's rows, atomically. Row objects go as NDJSON while
     * they are iterated; an encoded body (`{ format: "csv", body }`) as it is.
     * Answers the dataset as stored. A stream or iterable is sent once (no retry).
     */
    replaceRows: (id: string, rows: RowsUpload, opts?: UploadRequestOptions): Promise<UploadOrConnectionDataset> =>
      upload("PUT", id, rows, opts),
    /** Appends rows, atomically (the same bodies as `replaceRows`). Sent once (a retry would append twice). */
    appendRows: (id: string, rows: RowsUpload, opts?: UploadRequestOptions): Promise<UploadOrConnectionDataset> =>
      upload("POST", id, rows, opts),
    /**
     * Pulls a connection dataset from its upstream and records the run. Sent once (a retry would pull and record
     * again).
     */
    refresh: (id: string, opts: { maxRows?: number } & RequestOptions = {}): Promise<RefreshResult> => {
      const { maxRows, ...rest } = opts;
      return create<RefreshResult>(`/datasets/${seg(id)}/refresh`, maxRows === undefined ? {} : { maxRows }, rest);
    },
  };

  /**
   * A rows upload; when the rows' source throws while they are sent, that error is the one raised (the server stored
   * nothing).
   */
  async function upload(
    method: "PUT" | "POST",
    id: string,
    rows: RowsUpload,
    opts?: UploadRequestOptions,
  ): Promise<UploadOrConnectionDataset> {
    const body = uploadBody(rows, opts);
    try {
      return await send<UploadOrConnectionDataset>(method, `/datasets/${seg(id)}/rows`, {
        ...at(opts),
        raw: body,
        retryOn: method === "PUT" ? "any" : "refused",
      });
    } catch (error) {
      const failed = body.failure();
      throw failed === null ? error : failed.error;
    }
  }

  const dashboards = {
    ...members<DashboardRecord>("/dashboards"),
    /** Creates or replaces one version; `created` when the version is new. `/dashboards` lists the highest version. */
    putVersion: (
      id: string,
      version: number,
      input: DashboardVersionInput,
      opts?: ChangeRequestOptions,
    ): Promise<Put<DashboardRecord>> =>
      put<DashboardRecord>(`/dashboards/${seg(id)}/versions/${seg(String(version))}`, input, opts),
  };

  /** Batches of history, up to 10,000 items a call, all stored or none. */
  const history = {
    /** Sent once (a retry would count the views twice). */
    recordDashboardViews: (items: DashboardViewInput[], opts?: ChangeRequestOptions): Promise<{ stored: number }> =>
      create("/dashboard-views", items, opts),
    /** Sent once. */
    recordRefreshRuns: (items: RefreshRunInput[], opts?: ChangeRequestOptions): Promise<{ stored: number }> =>
      create("/refresh-runs", items, opts),
    /** Sent once. */
    recordCreditUsage: (items: CreditUsageInput[], opts?: ChangeRequestOptions): Promise<{ stored: number }> =>
      create("/credit-usage", items, opts),
    /**
     * Host audit events; one whose id is already stored is skipped. Retried
     * like any safe call when every event has an `id` (a retry then stores
     * nothing twice), sent once otherwise.
     */
    recordAuditEvents: (
      items: AuditEventInput[],
      opts?: RequestOptions,
    ): Promise<{ stored: number; skipped: number }> =>
      send("POST", "/audit-events", {
        ...at(opts),
        body: items,
        retryOn: items.every((item) => typeof item.id === "string") ? "any" : "refused",
      }),
  };

  /** Keeps the metadata of the answer on a value made from its body (`{ data }` → the array). */
  function carry<T extends object>(from: object, value: T): T {
    const meta = metas.get(from);
    if (meta) metas.set(value, meta);
    return value;
  }

  return {
    businesses: collection<Business, BusinessInput>("/businesses"),
    teams: collection<Team, TeamInput>("/teams"),
    users: collection<User, UserInput>("/users"),
    memberships,
    sessions,
    apiKeys,
    connections,
    datasets,
    tables: collection<TableRecord, TableInput>("/tables"),
    dashboards,
    history,
    /** The admin API's OpenAPI 3.1 document (sent with the admin token). */
    openapi: (opts?: RequestOptions) => get<Record<string, unknown>>("/openapi.json", opts),
    /** The metadata of the answer a result came from (for a put, of its `{ created, value }` and of `value`). */
    meta: (result: object): ResponseMeta | undefined => metas.get(result),
  };
}
