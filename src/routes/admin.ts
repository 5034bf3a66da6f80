import { z } from "zod";
import type { Put } from "../admin/change.js";
import * as bodies from "../admin/schemas.js";
import type { UploadOptions } from "../admin/rows.js";
import type { AdminContext } from "./admin-context.js";
import { intParam } from "../http/query.js";
import { Reply } from "../http/reply.js";
import type { RawBody, StreamBody } from "../http/types.js";
import { admin, type AdminRoute, type Method, type Responses } from "./route-def.js";
import * as answers from "../schemas/admin.js";

/**
 * The admin HTTP API (`/api/admin/v1`, see `admin-api.md`): the admin
 * functions over HTTP, for hosts in any language. Mounted only when an admin
 * token is configured; every route needs it. Kept out of the API usage log.
 */

const listQuery = z.object({
  limit: intParam({ min: 1, max: 1000 }).default(100),
  cursor: z.string().max(400).optional(),
});
type ListQuery = z.infer<typeof listQuery>;

/** Who makes the change: `X-Actor-User-Id`, else the host. */
const by = (ctx: AdminContext) => ({ actorUserId: ctx.actorUserId });

/** How often a long upload's progress is logged (`upload progress` lines); an upload shorter than this logs none. */
const UPLOAD_LOG_EVERY_MS = 5000;

/** An upload's actor, and its progress in the log (`Logger.info`) every few seconds, when the logger listens. */
function uploadOptions(ctx: AdminContext, datasetId: string, mode: "replace" | "append"): UploadOptions {
  const { info, requestId } = ctx;
  if (info === undefined) return by(ctx);
  return {
    ...by(ctx),
    onProgress: (progress) => info("upload progress", { requestId, datasetId, mode, ...progress }),
    progressEveryMs: UPLOAD_LOG_EVERY_MS,
  };
}
const putReply = <T>(put: Put<T>) => Reply.json(put.created ? 201 : 200, put.value);
const noContent = () => new Reply(204, null);
const TAG = "Admin";

/** Operation ids of the routes outside the plain collections, named for what they do. */
const OPERATION_IDS: Readonly<Record<string, string>> = {
  "GET /users/:id/memberships": "listUserMemberships",
  "GET /users/:id/memberships/:teamId": "getMembership",
  "PUT /users/:id/memberships/:teamId": "putMembership",
  "DELETE /users/:id/memberships/:teamId": "deleteMembership",
  "POST /sessions": "createSession",
  "GET /sessions/:id": "getSession",
  "DELETE /sessions/:id": "deleteSession",
  "POST /teams/:teamId/api-keys": "createApiKey",
  "GET /teams/:teamId/api-keys": "listTeamApiKeys",
  "GET /api-keys/:id": "getApiKey",
  "DELETE /api-keys/:id": "revokeApiKey",
  "PUT /connections/:id/signing-secret": "setSigningSecret",
  "GET /connections/:id/deliveries": "listWebhookDeliveries",
  "GET /connections/:id/deliveries/:deliveryId": "getWebhookDelivery",
  "POST /connections/:id/deliveries/:deliveryId/replay": "replayWebhookDelivery",
  "POST /connections/:id/deliveries/replay": "replayWebhookDeliveries",
  "PUT /datasets/:id/rows": "replaceDatasetRows",
  "POST /datasets/:id/rows": "appendDatasetRows",
  "POST /datasets/:id/refresh": "refreshDataset",
  "GET /dashboards": "listDashboards",
  "GET /dashboards/:id": "getDashboard",
  "PUT /dashboards/:id/versions/:version": "putDashboardVersion",
  "DELETE /dashboards/:id": "deleteDashboard",
  "POST /dashboard-views": "recordDashboardViews",
  "POST /refresh-runs": "recordRefreshRuns",
  "POST /credit-usage": "recordCreditUsage",
  "POST /audit-events": "recordAuditEvents",
};

/**
 * What a route adds to its method, path and handler: its query, body and responses, from which its handler's types
 * follow.
 */
type RouteExtra = Partial<Omit<AdminRoute<any, any, any>, "handle">>;
type QueryOf<E> = E extends { query: z.ZodType<infer Q> } ? Q : Record<string, never>;
type BodyOf<E> = E extends { body: { kind: "stream" } }
  ? StreamBody
  : E extends { body: { kind: "raw" } }
    ? RawBody
    : E extends { body: object }
      ? unknown
      : undefined;
type ResponsesOf<E> = E extends { responses: infer R extends Responses } ? R : Responses;
type AdminRouteOf<E> = AdminRoute<QueryOf<E>, BodyOf<E>, ResponsesOf<E>>;

function route<const E extends RouteExtra = {}>(
  method: Method,
  path: string,
  summary: string,
  handle: AdminRouteOf<E>["handle"],
  extra?: E,
): AdminRouteOf<E> {
  const operationId = OPERATION_IDS[`${method} ${path}`];
  return admin<QueryOf<E>, BodyOf<E>, ResponsesOf<E>>({
    method,
    path,
    summary,
    tag: TAG,
    auth: "admin",
    logged: false,
    handle,
    ...(operationId && { operationId }),
    ...extra,
  });
}

/** GET, PUT and DELETE of one collection's members, and its listing. */
function collection<Item extends z.ZodType, Page extends z.ZodType>(
  path: string,
  what: string,
  /** Operation ids: `list<Plural>`, `get<Name>`, `put<Name>`, `delete<Name>`. */
  name: { one: string; many: string },
  /** The PUT body, a member as answered, and a page of the listing (named OpenAPI components). */
  schemas: { input: z.ZodType; item: Item; page: Page },
  /** What the admin functions answer: the item and page schemas' types. */
  ops: {
    put: (id: string, body: unknown, ctx: AdminContext) => Promise<Put<z.output<Item>>>;
    get: (id: string, ctx: AdminContext) => Promise<z.output<Item>>;
    list: (query: ListQuery, ctx: AdminContext) => Promise<z.output<Page>>;
    remove: (id: string, ctx: AdminContext) => Promise<void>;
  },
): AdminRoute<any, any, any>[] {
  return [
    route("GET", path, `List ${what}s by id (limit, cursor)`, ({ query }, ctx) => ops.list(query, ctx), {
      query: listQuery,
      responses: { 200: schemas.page },
      operationId: `list${name.many}`,
    }),
    route("GET", `${path}/:id`, `One ${what}`, ({ params }, ctx) => ops.get(params.id!, ctx), {
      responses: { 200: schemas.item },
      operationId: `get${name.one}`,
    }),
    route(
      "PUT",
      `${path}/:id`,
      `Create or replace a ${what} (201 when created)`,
      async ({ params, body }, ctx) => putReply(await ops.put(params.id!, body, ctx)),
      {
        ...json(schemas.input),
        ...putResponses(schemas.item),
        operationId: `put${name.one}`,
      },
    ),
    route(
      "DELETE",
      `${path}/:id`,
      `Delete a ${what}`,
      async ({ params }, ctx) => {
        await ops.remove(params.id!, ctx);
        return noContent();
      },
      { ...deleted, operationId: `delete${name.one}` },
    ),
  ];
}

/** A create-or-replace answers the object as stored: 201 when it is new, 200 when it replaced one. */
const putResponses = (item: z.ZodType) => ({ responses: { 200: item, 201: item } });
const created = (item: z.ZodType) => ({ responses: { 201: item } });
const deleted = { responses: { 204: z.null() } };
/** A JSON body, described by the schema of the admin function's input (src/admin/schemas.ts). */
const json = (schema: z.ZodType) => ({ body: { kind: "json" }, bodySchema: schema }) as const;

export const adminRoutes: AdminRoute<any, any, any>[] = [
  ...collection(
    "/businesses",
    "business",
    { one: "Business", many: "Businesses" },
    { input: bodies.businessBody, item: answers.businessRecordSchema, page: answers.businessPageSchema },
    {
      put: (id, body, ctx) => ctx.admin.putBusiness(id, body as never, by(ctx)),
      get: (id, ctx) => ctx.admin.getBusiness(id),
      list: (query, ctx) => ctx.admin.listBusinesses(query),
      remove: (id, ctx) => ctx.admin.deleteBusiness(id, by(ctx)),
    },
  ),
  ...collection(
    "/teams",
    "team",
    { one: "Team", many: "Teams" },
    { input: bodies.teamBody, item: answers.teamRecordSchema, page: answers.teamPageSchema },
    {
      put: (id, body, ctx) => ctx.admin.putTeam(id, body as never, by(ctx)),
      get: (id, ctx) => ctx.admin.getTeam(id),
      list: (query, ctx) => ctx.admin.listTeams(query),
      remove: (id, ctx) => ctx.admin.deleteTeam(id, by(ctx)),
    },
  ),
  ...collection(
    "/users",
    "user",
    { one: "User", many: "Users" },
    { input: bodies.userBody, item: answers.userRecordSchema, page: answers.userPageSchema },
    {
      put: (id, body, ctx) => ctx.admin.putUser(id, body as never, by(ctx)),
      get: (id, ctx) => ctx.admin.getUser(id),
      list: (query, ctx) => ctx.admin.listUsers(query),
      remove: (id, ctx) => ctx.admin.deleteUser(id, by(ctx)),
    },
  ),
  route(
    "GET",
    "/users/:id/memberships",
    "A user's memberships",
    async ({ params }, ctx) => ({ data: await ctx.admin.listMemberships(params.id!) }),
    { responses: { 200: answers.membershipListSchema } },
  ),
  route(
    "GET",
    "/users/:id/memberships/:teamId",
    "One membership",
    ({ params }, ctx) => ctx.admin.getMembership(params.id!, params.teamId!),
    { responses: { 200: answers.membershipSchema } },
  ),
  route(
    "PUT",
    "/users/:id/memberships/:teamId",
    "Add a user to a team or change the role (201 when added)",
    async ({ params, body }, ctx) =>
      putReply(await ctx.admin.putMembership(params.id!, params.teamId!, body as never, by(ctx))),
    { ...json(bodies.membershipBody), ...putResponses(answers.membershipSchema) },
  ),
  route(
    "DELETE",
    "/users/:id/memberships/:teamId",
    "Remove a user from a team",
    async ({ params }, ctx) => {
      await ctx.admin.deleteMembership(params.id!, params.teamId!, by(ctx));
      return noContent();
    },
    deleted,
  ),
  route(
    "POST",
    "/sessions",
    "Issue a session token (shown once; only its hash is kept)",
    async ({ body }, ctx) => Reply.json(201, await ctx.admin.createSession(body as never, by(ctx))),
    { ...json(bodies.sessionBody), ...created(answers.issuedSessionSchema) },
  ),
  route(
    "GET",
    "/sessions/:id",
    "One session (never its token)",
    ({ params }, ctx) => ctx.admin.getSession(params.id!),
    { responses: { 200: answers.sessionInfoSchema } },
  ),
  route(
    "DELETE",
    "/sessions/:id",
    "End a session: its token answers 401 at once",
    async ({ params }, ctx) => {
      await ctx.admin.deleteSession(params.id!, by(ctx));
      return noContent();
    },
    deleted,
  ),
  route(
    "POST",
    "/teams/:teamId/api-keys",
    "Create an API key (its token is shown once)",
    async ({ params, body }, ctx) => {
      const { key, token } = await ctx.admin.createApiKey({ ...(body as object), teamId: params.teamId! } as never);
      return Reply.json(201, { ...key, token });
    },
    { ...json(bodies.apiKeyBody), ...created(answers.issuedApiKeySchema) },
  ),
  route(
    "GET",
    "/teams/:teamId/api-keys",
    "A team's API keys, newest first, without tokens",
    async ({ params }, ctx) => ({
      data: await ctx.admin.listApiKeys(params.teamId!),
    }),
    { responses: { 200: answers.apiKeyListSchema } },
  ),
  route(
    "GET",
    "/api-keys/:id",
    "One API key, without its token",
    ({ params }, ctx) => ctx.admin.getApiKey(params.id!),
    { responses: { 200: answers.apiKeyInfoSchema } },
  ),
  route(
    "DELETE",
    "/api-keys/:id",
    "Revoke an API key: 401 at once",
    async ({ params }, ctx) => {
      await ctx.admin.deleteApiKey(params.id!, by(ctx));
      return noContent();
    },
    deleted,
  ),
  ...collection(
    "/connections",
    "connection",
    { one: "Connection", many: "Connections" },
    { input: bodies.connectionBody, item: answers.connectionViewSchema, page: answers.connectionPageSchema },
    {
      put: (id, body, ctx) => ctx.admin.putConnection(id, body as never, by(ctx)),
      get: (id, ctx) => ctx.admin.getConnection(id),
      list: (query, ctx) => ctx.admin.listConnections(query),
      remove: (id, ctx) => ctx.admin.deleteConnection(id, by(ctx)),
    },
  ),
  route(
    "PUT",
    "/connections/:id/signing-secret",
    "Set (or with null remove) a webhook connection's signing secret",
    ({ params, body }, ctx) => ctx.admin.setSigningSecret(params.id!, body as never, by(ctx)),
    { ...json(bodies.signingSecretBody), responses: { 200: answers.connectionViewSchema } },
  ),
  route(
    "GET",
    "/connections/:id/deliveries",
    "A webhook connection's delivery log, newest first: stored, duplicate and refused deliveries (outcome, reason, " +
      "since, limit, cursor)",
    ({ params, query }, ctx) => ctx.admin.listWebhookDeliveries(params.id!, query),
    {
      query: listQuery.extend(answers.webhookDeliveryQuerySchema.shape),
      responses: { 200: answers.webhookDeliveryPageSchema },
    },
  ),
  route(
    "POST",
    "/connections/:id/deliveries/replay",
    "Replay every kept delivery matching the filters, oldest first, without signature check or rate limit (audited)",
    ({ params, body }, ctx) => ctx.admin.replayWebhookDeliveries(params.id!, (body ?? {}) as never, by(ctx)),
    { ...json(bodies.webhookReplayBody), responses: { 200: answers.webhookReplaySummarySchema } },
  ),
  route(
    "GET",
    "/connections/:id/deliveries/:deliveryId",
    "One delivery of a webhook connection's log, with its headers (credentials redacted) and kept body",
    ({ params }, ctx) => ctx.admin.getWebhookDelivery(params.id!, params.deliveryId!),
    { responses: { 200: answers.webhookDeliveryRecordSchema } },
  ),
  route(
    "POST",
    "/connections/:id/deliveries/:deliveryId/replay",
    "Ingest a delivery's kept body again as a new delivery, without signature check or rate limit; de-duplication " +
      "applies (audited)",
    ({ params }, ctx) => ctx.admin.replayWebhookDelivery(params.id!, params.deliveryId!, by(ctx)),
    { responses: { 200: answers.webhookDeliveryRecordSchema } },
  ),
  ...collection(
    "/datasets",
    "dataset",
    { one: "Dataset", many: "Datasets" },
    { input: bodies.datasetBody, item: answers.datasetRecordSchema, page: answers.datasetPageSchema },
    {
      put: (id, body, ctx) => ctx.admin.putDataset(id, body as never, by(ctx)),
      get: (id, ctx) => ctx.admin.getDataset(id),
      list: (query, ctx) => ctx.admin.listDatasets(query),
      remove: (id, ctx) => ctx.admin.deleteDataset(id, by(ctx)),
    },
  ),
  route(
    "PUT",
    "/datasets/:id/rows",
    "Replace a dataset's rows, atomically (JSON array, NDJSON or CSV, streamed)",
    ({ params, body }, ctx) =>
      ctx.admin.uploadDatasetRows(params.id!, "replace", body, uploadOptions(ctx, params.id!, "replace")),
    { body: { kind: "stream" }, responses: { 200: answers.datasetRecordSchema } },
  ),
  route(
    "POST",
    "/datasets/:id/rows",
    "Append rows to a dataset, atomically (JSON array, NDJSON or CSV, streamed)",
    ({ params, body }, ctx) =>
      ctx.admin.uploadDatasetRows(params.id!, "append", body, uploadOptions(ctx, params.id!, "append")),
    { body: { kind: "stream" }, responses: { 200: answers.datasetRecordSchema } },
  ),
  route(
    "POST",
    "/datasets/:id/refresh",
    "Pull a connection dataset from its upstream and record the run",
    ({ params, body }, ctx) => ctx.admin.refreshDataset(params.id!, (body ?? {}) as never),
    { ...json(bodies.refreshBody), responses: { 200: answers.refreshResultSchema } },
  ),
  ...collection(
    "/tables",
    "input table",
    { one: "Table", many: "Tables" },
    { input: bodies.tableBody, item: answers.tableRecordSchema, page: answers.tablePageSchema },
    {
      put: (id, body, ctx) => ctx.admin.putTable(id, body as never, by(ctx)),
      get: (id, ctx) => ctx.admin.getTable(id),
      list: (query, ctx) => ctx.admin.listTables(query),
      remove: (id, ctx) => ctx.admin.deleteTable(id, by(ctx)),
    },
  ),
  route(
    "GET",
    "/dashboards",
    "List dashboards by id (limit, cursor)",
    ({ query }, ctx) => ctx.admin.listDashboards(query),
    { query: listQuery, responses: { 200: answers.dashboardPageSchema } },
  ),
  route(
    "GET",
    "/dashboards/:id",
    "One dashboard with every version",
    ({ params }, ctx) => ctx.admin.getDashboard(params.id!),
    { responses: { 200: answers.dashboardRecordSchema } },
  ),
  route(
    "PUT",
    "/dashboards/:id/versions/:version",
    "Create or replace one version of a dashboard (201 when the version is new)",
    async ({ params, body }, ctx) =>
      putReply(await ctx.admin.putDashboardVersion(params.id!, versionOf(params.version!), body as never, by(ctx))),
    { ...json(bodies.dashboardVersionBody), ...putResponses(answers.dashboardRecordSchema) },
  ),
  route(
    "DELETE",
    "/dashboards/:id",
    "Delete a dashboard and its view history",
    async ({ params }, ctx) => {
      await ctx.admin.deleteDashboard(params.id!, by(ctx));
      return noContent();
    },
    deleted,
  ),
  route(
    "POST",
    "/dashboard-views",
    "Record dashboard page views (up to 10,000 per call, all or none)",
    async ({ body }, ctx) => Reply.json(201, await ctx.admin.recordDashboardViews(body as never, by(ctx))),
    { ...json(bodies.dashboardViewsBody), ...created(answers.storedItemsSchema) },
  ),
  route(
    "POST",
    "/refresh-runs",
    "Record refresh runs (up to 10,000 per call, all or none)",
    async ({ body }, ctx) => Reply.json(201, await ctx.admin.recordRefreshRuns(body as never, by(ctx))),
    { ...json(bodies.refreshRunsBody), ...created(answers.storedItemsSchema) },
  ),
  route(
    "POST",
    "/credit-usage",
    "Record credit usage (up to 10,000 per call, all or none)",
    async ({ body }, ctx) => Reply.json(201, await ctx.admin.recordCreditUsage(body as never, by(ctx))),
    { ...json(bodies.creditUsageBody), ...created(answers.storedItemsSchema) },
  ),
  route(
    "POST",
    "/audit-events",
    "Record host audit events (ids optional; an id already stored is skipped)",
    async ({ body }, ctx) => Reply.json(201, await ctx.admin.recordAuditEvents(body as never)),
    { ...json(bodies.auditEventsBody), ...created(answers.storedAuditEventsSchema) },
  ),
];

/** `/dashboards/{id}/versions/{version}`: a positive integer, else the admin function's 400. */
function versionOf(text: string): number {
  return /^[1-9][0-9]{0,6}$/.test(text) ? Number(text) : Number.NaN;
}
