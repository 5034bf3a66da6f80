import { describe, expect, it } from "vitest";
import { type Admin, createAdmin, type ListPage, type Put } from "../../src/admin/index.js";
import type { Storage } from "../../src/ports/storage.js";
import { setup } from "../support/api.js";
import { testFixture } from "../support/fixture.js";

/**
 * What the admin functions answer, one rule (docs/integration.md, "What the
 * functions answer", and the `Admin` doc comment): a `put…` answers
 * `Put<T>` (`{ created, value }`, so HTTP can answer 201 or 200), a
 * `delete…` nothing, a `list…` a `ListPage<T>` (a whole collection) or an
 * array (one owner's items), and every other function the object itself.
 * Every function of `Admin` is called here (the compiler refuses a table
 * that misses one), and its answer must have the shape its name says.
 */

type Shape = "put" | "nothing" | "page" | "array" | "object" | "text";

/** The shape a function's name promises. */
function promised(name: string): Shape[] {
  if (name.startsWith("put")) return ["put"];
  if (name.startsWith("delete")) return ["nothing"];
  if (name.startsWith("list") || name === "tableEditLog") return ["page", "array"];
  if (name === "seed") return ["text"];
  return ["object"];
}

function shapeOf(answer: unknown): Shape {
  if (answer === undefined) return "nothing";
  if (typeof answer === "string") return "text";
  if (Array.isArray(answer)) return "array";
  if (answer === null || typeof answer !== "object") throw new Error(`not a shape: ${String(answer)}`);
  const keys = Object.keys(answer).sort().join(",");
  if (keys === "created,value") return "put";
  if (keys === "data,hasMore,nextCursor") return "page";
  return "object";
}

const NOW = "2026-11-01T11:00:00Z";

/** One call of every admin function, in an order where each finds what it needs. */
const CALLS = {
  seed: (a) => a.seed(testFixture()),
  putBusiness: (a) => a.putBusiness("biz_2", { name: "Contoso" }),
  getBusiness: (a) => a.getBusiness("biz_2"),
  listBusinesses: (a) => a.listBusinesses({ limit: 1 }),
  putTeam: (a) => a.putTeam("team_new", { name: "New", plan: "pro", businessId: "biz_2" }),
  getTeam: (a) => a.getTeam("team_new"),
  listTeams: (a) => a.listTeams(),
  putUser: (a) => a.putUser("usr_new", { email: "new@example.com", name: "New" }),
  getUser: (a) => a.getUser("usr_new"),
  listUsers: (a) => a.listUsers(),
  putMembership: (a) => a.putMembership("usr_new", "team_new", { role: "owner" }),
  getMembership: (a) => a.getMembership("usr_new", "team_new"),
  listMemberships: (a) => a.listMemberships("usr_new"),
  createSession: (a) => a.createSession({ userId: "usr_new" }),
  getSession: async (a) => a.getSession((await a.createSession({ userId: "usr_new" })).id),
  deleteSession: async (a) => a.deleteSession((await a.createSession({ userId: "usr_new" })).id),
  createApiKey: (a) =>
    a.createApiKey({ teamId: "team_new", name: "Sync", createdBy: "usr_new", scopes: ["data:read"] }),
  listApiKeys: (a) => a.listApiKeys("team_new"),
  getApiKey: async (a) => a.getApiKey((await a.listApiKeys("team_new"))[0]!.id),
  revokeApiKey: async (a) => a.revokeApiKey((await a.listApiKeys("team_new"))[0]!.id),
  deleteApiKey: async (a) => a.deleteApiKey((await a.listApiKeys("team_new"))[0]!.id),
  recordAuditEvent: (a) =>
    a.recordAuditEvent({
      teamId: "team_new",
      category: "audit",
      action: "report.shared",
      actor: null,
      target: null,
      outcome: "success",
      ip: null,
      userAgent: null,
    }),
  putConnection: (a) => a.putConnection("conn_hook", { teamId: "team_new", name: "Hook", type: "webhook", config: {} }),
  getConnection: (a) => a.getConnection("conn_hook"),
  listConnections: (a) => a.listConnections(),
  setSigningSecret: (a) => a.setSigningSecret("conn_hook", { secret: "a-signing-secret" }),
  createWebhookConnection: (a) => a.createWebhookConnection({ teamId: "team_new", name: "Events" }),
  getWebhookConnection: (a) => a.getWebhookConnection("conn_hook"),
  setWebhookSecret: (a) => a.setWebhookSecret("conn_hook", "another-signing-secret"),
  rotateWebhookSecret: (a) => a.rotateWebhookSecret("conn_hook"),
  setWebhookSignature: (a) => a.setWebhookSignature("conn_hook", { scheme: "stripe" }),
  removeWebhookSecret: (a) => a.removeWebhookSecret("conn_hook"),
  setWebhookRetention: (a) => a.setWebhookRetention("conn_hook", 500),
  listWebhookDeliveries: (a) => a.listWebhookDeliveries("conn_hook"),
  getWebhookDelivery: async (a) => a.getWebhookDelivery("conn_hook", await refusedDelivery()),
  replayWebhookDelivery: async (a) => a.replayWebhookDelivery("conn_hook", await refusedDelivery()),
  replayWebhookDeliveries: (a) => a.replayWebhookDeliveries("conn_hook", { outcome: "refused" }),
  putDataset: (a) =>
    a.putDataset("ds_new", { teamId: "team_new", name: "New", type: "upload", connectionId: null, source: null }),
  getDataset: (a) => a.getDataset("ds_new"),
  listDatasets: (a) => a.listDatasets(),
  uploadDatasetRows: (a) =>
    a.uploadDatasetRows("ds_new", "replace", { chunks: chunksOf('[{"a":1}]'), contentType: "application/json" }),
  writeDatasetRows: (a) => a.writeDatasetRows("ds_new", "append", [{ a: 2 }]),
  refreshDataset: (a) => a.refreshDataset("ds_stores"),
  putTable: (a) => a.putTable("tbl_new", { teamId: "team_new", name: "Notes", columns: [] }),
  getTable: (a) => a.getTable("tbl_new"),
  listTables: (a) => a.listTables(),
  tableEditLog: (a) => a.tableEditLog("tbl_new"),
  putDashboardVersion: (a) =>
    a.putDashboardVersion("dash_new", 1, { teamId: "team_new", name: "New", published: true }),
  getDashboard: (a) => a.getDashboard("dash_new"),
  listDashboards: (a) => a.listDashboards(),
  recordDashboardViews: (a) => a.recordDashboardViews([{ dashboardId: "dash_new", at: NOW, visitorId: "vis_1" }]),
  recordRefreshRuns: (a) =>
    a.recordRefreshRuns([{ datasetId: "ds_new", startedAt: NOW, durationMs: 3, rowsProcessed: 2 }]),
  recordCreditUsage: (a) => a.recordCreditUsage([{ teamId: "team_new", at: NOW, category: "export", credits: 1 }]),
  recordAuditEvents: (a) =>
    a.recordAuditEvents([{ teamId: "team_new", time: NOW, category: "audit", action: "report.shared" }]),
  recordDashboardError: (a) => a.recordDashboardError({ dashboardId: "dash_new", message: "query timed out" }),
  deleteDashboard: (a) => a.deleteDashboard("dash_new"),
  deleteTable: (a) => a.deleteTable("tbl_new"),
  deleteDataset: (a) => a.deleteDataset("ds_new"),
  deleteConnection: (a) => a.deleteConnection("conn_hook"),
  deleteMembership: (a) => a.deleteMembership("usr_new", "team_new"),
  deleteUser: (a) => a.deleteUser("usr_new"),
  deleteTeam: (a) => a.deleteTeam("team_new"),
  deleteBusiness: (a) => a.deleteBusiness("biz_2"),
} satisfies { [K in keyof Admin]: (admin: Admin) => ReturnType<Admin[K]> };

/** The store the calls run on (set by the test), and a refused delivery of `conn_hook` written into its log. */
let store: Storage | null = null;
let refusals = 0;
async function refusedDelivery(): Promise<string> {
  const id = `whd_refused_${++refusals}`;
  const detail = {
    sourceIp: null,
    deliveryKey: null,
    headers: {},
    body: '{"n":1}',
    bodyEncoding: "utf8",
    bodyTruncated: false,
    contentType: "application/json",
    verifiedBy: null,
    suppressed: 0,
    replayOf: null,
  } as const;
  const refusal = {
    id,
    connectionId: "conn_hook",
    receivedAt: NOW,
    reason: "signature_invalid",
    status: 401,
    detail,
  } as const;
  await store!.webhooks.recordWebhookDeliveries({ refusals: [refusal], counts: [], keep: { size: 1000, afterMs: 0 } });
  return id;
}

async function* chunksOf(text: string): AsyncIterable<Uint8Array> {
  yield new TextEncoder().encode(text);
}

/** The rule in the types: a function answers `Put<T>` exactly when its name starts with `put`. */
type Answer<K extends keyof Admin> = Awaited<ReturnType<Admin[K]>>;
type Breaking = {
  [K in keyof Admin]: K extends `put${string}`
    ? Answer<K> extends Put<unknown>
      ? never
      : K
    : Answer<K> extends Put<unknown>
      ? K
      : never;
}[keyof Admin];
type Paging = {
  [K in keyof Admin]: Answer<K> extends ListPage<unknown> ? (K extends `list${string}` ? never : K) : never;
}[keyof Admin];
const noneBreaks: [Breaking, Paging] extends [never, never] ? true : false = true;

describe("what the admin functions answer", () => {
  it("follows one rule: put → { created, value }, delete → nothing, list → a page or an array, any other → the object", async () => {
    const { api } = await setup();
    const admin = createAdmin(api);
    store = api.ports.storage;
    expect(noneBreaks).toBe(true);
    // Every function is called: none is left out of the rule.
    expect(Object.keys(CALLS).sort()).toEqual(Object.keys(admin).sort());
    const answered: Record<string, Shape> = {};
    for (const [name, call] of Object.entries(CALLS) as Array<[keyof Admin, (a: Admin) => Promise<unknown>]>) {
      answered[name] = shapeOf(await call(admin));
    }
    const broken = Object.entries(answered).filter(([name, shape]) => !promised(name).includes(shape));
    expect(broken).toEqual([]);
    // Collections page; one owner's items come whole.
    expect(
      Object.keys(answered)
        .filter((name) => answered[name] === "page")
        .sort(),
    ).toEqual([
      "listBusinesses",
      "listConnections",
      "listDashboards",
      "listDatasets",
      "listTables",
      "listTeams",
      "listUsers",
      "listWebhookDeliveries",
    ]);
    expect(
      Object.keys(answered)
        .filter((name) => answered[name] === "array")
        .sort(),
    ).toEqual(["listApiKeys", "listMemberships", "tableEditLog"]);
  });

  it("answers created: true for a new id and false for a replaced one, with the object as a get answers it", async () => {
    const { api } = await setup();
    const admin = createAdmin(api);
    const first = await admin.putTeam("team_new", { name: "New", plan: "pro" });
    const again = await admin.putTeam("team_new", { name: "Renamed", plan: "team" });
    expect(first).toEqual({
      created: true,
      value: { id: "team_new", name: "New", plan: "pro", businessId: null, isPersonal: false },
    });
    expect(again).toEqual({
      created: false,
      value: { id: "team_new", name: "Renamed", plan: "team", businessId: null, isPersonal: false },
    });
    expect(await admin.getTeam("team_new")).toEqual(again.value);
    const dataset = await admin.putDataset("ds_new", {
      teamId: "team_ops",
      name: "New",
      type: "upload",
      connectionId: null,
      source: null,
    });
    expect(dataset.created).toBe(true);
    expect(await admin.getDataset("ds_new")).toEqual(dataset.value);
  });
});
