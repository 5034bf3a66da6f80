import type { Admin } from "../../src/admin/index.js";
import type { DataApi } from "../../src/server/api.js";
import { ApiError } from "../../src/base/api-error.js";

export const ADMIN_TOKEN = "admin_test_token_0123456789abcdef";

export interface AdminAnswer {
  status: number;
  json: any;
}

/** How a test sends an admin operation: over HTTP, or through the admin function the route calls. */
export type AdminSend = (
  method: string,
  path: string,
  body?: unknown,
  headers?: Record<string, string>,
) => Promise<AdminAnswer>;

/** Over HTTP: `/api/admin/v1` with the admin token. */
export function httpAdmin(api: Pick<DataApi, "fetch">, token = ADMIN_TOKEN): AdminSend {
  return async (method, path, body, headers = {}) => {
    const init: RequestInit = { method, headers: { authorization: `Bearer ${token}`, ...headers } };
    if (body !== undefined) {
      const text = typeof body === "string" ? body : JSON.stringify(body);
      init.body = text;
      (init.headers as Record<string, string>)["content-type"] ??= "application/json";
    }
    const response = await api.fetch(new Request(`http://dataport.test/api/admin/v1${path}`, init));
    const text = await response.text();
    return { status: response.status, json: text ? JSON.parse(text) : null };
  };
}

/**
 * The same operations through the admin functions: the path picks the
 * function (a test-only table), an ApiError becomes its status and envelope.
 */
export function functionAdmin(admin: Admin): AdminSend {
  return async (method, path, body, headers = {}) => {
    const by = { actorUserId: headers["x-actor-user-id"] ?? null };
    const [route, query = ""] = path.split("?");
    const parts = route!.split("/").filter(Boolean).map(decodeURIComponent);
    const params = new URLSearchParams(query);
    const list = { limit: params.has("limit") ? Number(params.get("limit")) : undefined, cursor: params.get("cursor") };
    const put = (p: Promise<{ created: boolean; value: unknown }>) =>
      p.then((r) => ({ status: r.created ? 201 : 200, json: r.value }));
    const ok = (p: Promise<unknown>, status = 200) => p.then((json) => ({ status, json: json ?? null }));
    const gone = (p: Promise<void>) => p.then(() => ({ status: 204, json: null }));
    const key = `${method} /${parts.map((part, i) => (i % 2 === 1 ? ":" : part)).join("/")}`;
    const [a, id, c, d] = parts as [string, string, string, string];
    const collections: Record<string, { put: any; get: any; list: any; remove: any }> = {
      businesses: {
        put: admin.putBusiness,
        get: admin.getBusiness,
        list: admin.listBusinesses,
        remove: admin.deleteBusiness,
      },
      teams: { put: admin.putTeam, get: admin.getTeam, list: admin.listTeams, remove: admin.deleteTeam },
      users: { put: admin.putUser, get: admin.getUser, list: admin.listUsers, remove: admin.deleteUser },
      connections: {
        put: admin.putConnection,
        get: admin.getConnection,
        list: admin.listConnections,
        remove: admin.deleteConnection,
      },
      datasets: { put: admin.putDataset, get: admin.getDataset, list: admin.listDatasets, remove: admin.deleteDataset },
      tables: { put: admin.putTable, get: admin.getTable, list: admin.listTables, remove: admin.deleteTable },
      dashboards: { put: null, get: admin.getDashboard, list: admin.listDashboards, remove: admin.deleteDashboard },
    };
    try {
      switch (key) {
        case "PUT /users/:/memberships/:":
          return await put(admin.putMembership(id, d, body as never, by));
        case "DELETE /users/:/memberships/:":
          return await gone(admin.deleteMembership(id, d, by));
        case "GET /users/:/memberships/:":
          return await ok(admin.getMembership(id, d));
        case "GET /users/:/memberships":
          return await ok(admin.listMemberships(id).then((data) => ({ data })));
        case "POST /sessions":
          return await ok(admin.createSession(body as never, by), 201);
        case "GET /sessions/:":
          return await ok(admin.getSession(id));
        case "DELETE /sessions/:":
          return await gone(admin.deleteSession(id, by));
        case "POST /teams/:/api-keys":
          return await ok(
            admin
              .createApiKey({ ...(body as object), teamId: id } as never)
              .then(({ key, token }) => ({ ...key, token })),
            201,
          );
        case "GET /teams/:/api-keys":
          return await ok(admin.listApiKeys(id).then((data) => ({ data })));
        case "GET /api-keys/:":
          return await ok(admin.getApiKey(id));
        case "DELETE /api-keys/:":
          return await gone(admin.deleteApiKey(id, by));
        case "PUT /connections/:/signing-secret":
          return await ok(admin.setSigningSecret(id, body as never, by));
        case "PUT /datasets/:/rows":
        case "POST /datasets/:/rows":
          return await ok(admin.writeDatasetRows(id, method === "PUT" ? "replace" : "append", body as never, by));
        case "POST /datasets/:/refresh":
          return await ok(admin.refreshDataset(id, (body ?? {}) as never));
        case "PUT /dashboards/:/versions/:":
          return await put(
            admin.putDashboardVersion(id, /^[1-9][0-9]*$/.test(d) ? Number(d) : Number.NaN, body as never, by),
          );
        case "POST /dashboard-views":
          return await ok(admin.recordDashboardViews(body as never, by), 201);
        case "POST /refresh-runs":
          return await ok(admin.recordRefreshRuns(body as never, by), 201);
        case "POST /credit-usage":
          return await ok(admin.recordCreditUsage(body as never, by), 201);
        case "POST /audit-events":
          return await ok(admin.recordAuditEvents(body as never), 201);
      }
      const ops = collections[a];
      if (ops && parts.length === 1 && method === "GET") return await ok(ops.list(list));
      if (ops && parts.length === 2 && method === "GET") return await ok(ops.get(id));
      if (ops?.put && parts.length === 2 && method === "PUT") return await put(ops.put(id, body, by));
      if (ops && parts.length === 2 && method === "DELETE") return await gone(ops.remove(id, by));
      throw new Error(`functionAdmin: no admin function for ${method} ${path} (${c ?? ""})`);
    } catch (error) {
      if (!(error instanceof ApiError)) throw error;
      const envelope: Record<string, unknown> = { code: error.code, message: error.message };
      if (error.details) envelope.details = error.details;
      return { status: error.status, json: { error: envelope } };
    }
  };
}
