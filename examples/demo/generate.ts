/**
 * Writes examples/demo/space.json: the demo space `npm start` serves.
 * Deterministic (seeded), so the file only changes when this script does.
 *
 * Its activity (views, refresh runs, credit usage, audit events) and the
 * freshness of datasets and dashboards are relative times (`"-P3DT14H"`:
 * three days and fourteen hours before the fixture is loaded, see
 * docs/fixtures.md), so the demo shows recent activity on any day and with
 * any `--now`. Row values (order dates) and the input-table rows, whose
 * `_updatedAt` the README's compare-and-set example quotes, stay absolute.
 *
 *   npx tsx examples/demo/generate.ts
 */
import { writeFileSync } from "node:fs";

let seed = 20261122;
const random = () => {
  seed = (seed * 1103515245 + 12345) % 2147483648;
  return seed / 2147483648;
};
const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)]!;

/** A relative time `daysAgo` days and `hours`:`minutes` before the load: `ago(3, 14)` → `-P3DT14H`. */
const ago = (daysAgo: number, hours = 0, minutes = 0) => {
  const time = (hours > 0 ? `${hours}H` : "") + (minutes > 0 ? `${minutes}M` : "");
  if (daysAgo === 0 && time === "") return "PT0S";
  return `-P${daysAgo > 0 ? `${daysAgo}D` : ""}${time ? `T${time}` : ""}`;
};

/** Order dates: data, absolute (the 82 days ending 2026-11-21). */
const START = new Date("2026-09-01T00:00:00Z");
const END = new Date("2026-11-21T00:00:00Z");
const days: string[] = [];
for (let d = new Date(START); d <= END; d.setUTCDate(d.getUTCDate() + 1)) days.push(d.toISOString().slice(0, 10));

const regions = ["EMEA", "AMER", "APAC"] as const;
const products = ["Espresso", "Latte", "Cold brew", "Matcha", "Chai"] as const;
const orders = Array.from({ length: 240 }, (_, i) => {
  const d = days[Math.floor((i / 240) * days.length)]!;
  return {
    order_id: `NW-${String(1001 + i)}`,
    ordered_on: d,
    region: pick(regions),
    product: pick(products),
    quantity: 1 + Math.floor(random() * 12),
    amount: Math.round((5 + random() * 120) * 100) / 100,
    paid: random() > 0.1,
  };
});

const stores = [
  { store_id: "S-01", city: "Lyon", country: "FR", lat: 45.764, lon: 4.8357, opened: "2019-04-01" },
  { store_id: "S-02", city: "Oslo", country: "NO", lat: 59.9139, lon: 10.7522, opened: "2020-09-15" },
  { store_id: "S-03", city: "Austin", country: "US", lat: 30.2672, lon: -97.7431, opened: "2021-02-01" },
  { store_id: "S-04", city: "Osaka", country: "JP", lat: 34.6937, lon: 135.5023, opened: "2022-06-20" },
  { store_id: "S-05", city: "Lisbon", country: "PT", lat: 38.7223, lon: -9.1393, opened: "2023-03-10" },
];
const storeLayer = {
  type: "FeatureCollection",
  features: stores.map((s) => ({
    type: "Feature",
    id: s.store_id,
    geometry: { type: "Point", coordinates: [s.lon, s.lat] },
    properties: { store_id: s.store_id, city: s.city, country: s.country },
  })),
};

const users = [
  {
    id: "usr_ada",
    email: "ada@northwind.test",
    name: "Ada Lovelace",
    businessAdmin: true,
    memberships: [
      { teamId: "team_ops", role: "owner" },
      { teamId: "team_sales", role: "admin" },
      { teamId: "team_ada", role: "owner" },
    ],
  },
  {
    id: "usr_grace",
    email: "grace@northwind.test",
    name: "Grace Hopper",
    businessAdmin: false,
    memberships: [{ teamId: "team_sales", role: "editor" }],
  },
  {
    id: "usr_linus",
    email: "linus@northwind.test",
    name: "Linus Pauling",
    businessAdmin: false,
    memberships: [
      { teamId: "team_ops", role: "viewer" },
      { teamId: "team_sales", role: "viewer" },
    ],
  },
  {
    id: "usr_kim",
    email: "kim@acme.test",
    name: "Kim Park",
    businessAdmin: false,
    memberships: [{ teamId: "team_acme", role: "owner" }],
  },
];

const dashboards = [
  {
    id: "dash_sales",
    teamId: "team_ops",
    name: "Sales overview",
    description: "Orders and revenue by region",
    published: true,
    datasetIds: ["ds_orders", "tbl_targets"],
  },
  {
    id: "dash_stores",
    teamId: "team_ops",
    name: "Store map",
    description: "Where the stores are",
    published: true,
    datasetIds: ["ds_stores"],
  },
  {
    id: "dash_draft",
    teamId: "team_ops",
    name: "Inventory (draft)",
    description: null,
    published: false,
    datasetIds: ["ds_orders"],
  },
  {
    id: "dash_pipeline",
    teamId: "team_sales",
    name: "Pipeline",
    description: "Deals by stage",
    published: true,
    datasetIds: ["ds_deals"],
  },
];

// Views over the last 60 days: daysAgo 59 … 0, each at some hour before the load.
const dashboardViews: unknown[] = [];
for (let daysAgo = 59; daysAgo >= 0; daysAgo--) {
  for (const dash of ["dash_sales", "dash_stores", "dash_pipeline"]) {
    const n = 1 + Math.floor(random() * 5);
    for (let i = 0; i < n; i++) {
      const signedIn = random() < 0.5;
      const user = pick(["usr_ada", "usr_grace", "usr_linus"]);
      dashboardViews.push({
        dashboardId: dash,
        at: ago(daysAgo, 1 + Math.floor(random() * 12), Math.floor(random() * 60)),
        visitorId: signedIn ? `vis_${user}` : `vis_anon_${Math.floor(random() * 8)}`,
        userId: signedIn ? user : null,
        editor: random() < 0.1,
      });
    }
  }
}

// Two refreshes a day over the last 30 days, 2 and 14 hours past each day before the load.
const refreshRuns: unknown[] = [];
for (let daysAgo = 29; daysAgo >= 0; daysAgo--) {
  for (const hour of [14, 2]) {
    const failed = random() < 0.12;
    refreshRuns.push({
      datasetId: "ds_stores",
      startedAt: ago(daysAgo, hour),
      durationMs: 400 + Math.floor(random() * 1600),
      rowsProcessed: failed ? 0 : stores.length,
      error: failed ? "upstream timed out after 30s" : null,
    });
  }
}

// Credit usage over the last 45 days; the last three days always have some.
const creditUsage: unknown[] = [];
for (let daysAgo = 44; daysAgo >= 0; daysAgo--) {
  if (daysAgo < 3 || random() < 0.6)
    creditUsage.push({
      teamId: "team_ops",
      at: ago(daysAgo, 9),
      category: "dashboard_generation",
      credits: 1 + Math.floor(random() * 5),
      userId: "usr_ada",
    });
  if (random() < 0.4)
    creditUsage.push({
      teamId: "team_ops",
      at: ago(daysAgo, 4),
      category: "ai_query",
      credits: Math.round(random() * 20) / 10,
      userId: "usr_linus",
    });
  if (random() < 0.3)
    creditUsage.push({
      teamId: "team_sales",
      at: ago(daysAgo, 8),
      category: "dashboard_generation",
      credits: 2,
      userId: "usr_grace",
    });
}

const auditEvents = [
  {
    id: "evt_demo_1",
    teamId: "team_ops",
    time: ago(6, 3),
    category: "audit",
    action: "dashboard.published",
    actor: { type: "user", id: "usr_ada", email: "ada@northwind.test" },
    target: { type: "dashboard", id: "dash_sales" },
    outcome: "success",
    ip: "203.0.113.7",
    userAgent: "Mozilla/5.0",
  },
  {
    id: "evt_demo_2",
    teamId: "team_ops",
    time: ago(5, 1, 30),
    category: "audit",
    action: "connection.created",
    actor: { type: "user", id: "usr_ada", email: "ada@northwind.test" },
    target: { type: "connection", id: "conn_shop" },
    outcome: "success",
    ip: "203.0.113.7",
    userAgent: "Mozilla/5.0",
  },
  {
    id: "evt_demo_3",
    teamId: "team_sales",
    time: ago(3, 20, 48),
    category: "audit",
    action: "member.invited",
    actor: { type: "user", id: "usr_ada", email: "ada@northwind.test" },
    target: { type: "user", id: "usr_grace" },
    outcome: "success",
    ip: "203.0.113.7",
    userAgent: "Mozilla/5.0",
  },
  {
    id: "evt_demo_4",
    teamId: "team_ops",
    time: ago(2, 2, 59),
    category: "data_access",
    action: "dataset.exported",
    actor: { type: "user", id: "usr_linus", email: "linus@northwind.test" },
    target: { type: "dataset", id: "ds_orders" },
    outcome: "success",
    ip: "198.51.100.23",
    userAgent: "Mozilla/5.0",
  },
  {
    id: "evt_demo_5",
    teamId: "team_ops",
    time: ago(1, 6, 15),
    category: "error",
    action: "dashboard.render_failed",
    actor: null,
    target: { type: "dashboard", id: "dash_stores" },
    outcome: "failure",
    ip: null,
    userAgent: null,
    details: { message: "tile query timed out" },
  },
];

const space = {
  version: 1,
  businesses: [{ id: "biz_northwind", name: "Northwind Coffee" }],
  teams: [
    { id: "team_ops", name: "Operations", plan: "business", businessId: "biz_northwind", isPersonal: false },
    { id: "team_sales", name: "Sales", plan: "business", businessId: "biz_northwind", isPersonal: false },
    { id: "team_ada", name: "Ada's space", plan: "free", businessId: null, isPersonal: true },
    { id: "team_acme", name: "Acme Analytics", plan: "pro", businessId: null, isPersonal: false },
  ],
  users,
  sessions: [
    { token: "sess_demo_ada_0001", userId: "usr_ada" },
    { token: "sess_demo_grace_0001", userId: "usr_grace" },
  ],
  apiKeys: [
    {
      id: "key_demo_full",
      name: "Warehouse sync",
      teamId: "team_ops",
      token: "dp_demo_full_access_0000000000001",
      createdBy: "usr_ada",
      scopes: ["data:read", "tables:write", "dashboards:read", "audit:read"],
      allowlist: {
        datasets: ["ds_orders", "ds_stores", "ds_shop_events"],
        connections: ["conn_shop", "conn_geo"],
        tables: ["tbl_targets", "tbl_notes"],
      },
      createdAt: ago(51, 15),
      revokedAt: null,
    },
    {
      id: "key_demo_read",
      name: "BI read-only",
      teamId: "team_ops",
      token: "dp_demo_read_only_00000000000001",
      createdBy: "usr_linus",
      scopes: ["data:read", "dashboards:read"],
      allowlist: { datasets: ["ds_orders"], connections: [], tables: [] },
      createdAt: ago(47, 15),
      revokedAt: null,
    },
    {
      id: "key_demo_acme",
      name: "Acme export",
      teamId: "team_acme",
      token: "dp_demo_acme_pro_000000000000001",
      createdBy: "usr_kim",
      scopes: ["data:read", "dashboards:read", "audit:read"],
      allowlist: { datasets: ["ds_leads"], connections: [], tables: [] },
      createdAt: ago(45, 15),
      revokedAt: null,
    },
    {
      id: "key_demo_free",
      name: "Personal experiments",
      teamId: "team_ada",
      token: "dp_demo_free_plan_0000000000001",
      createdBy: "usr_ada",
      scopes: ["data:read"],
      allowlist: { datasets: [], connections: [], tables: [] },
      createdAt: ago(44, 15),
      revokedAt: null,
    },
  ],
  connections: [
    {
      id: "conn_shop",
      teamId: "team_ops",
      name: "Shop warehouse",
      type: "memory",
      config: { tables: { stores } },
      createdAt: ago(81),
    },
    {
      id: "conn_geo",
      teamId: "team_ops",
      name: "Store locations (GIS)",
      type: "memory",
      config: { layers: { stores: { featureCollection: storeLayer, maxRecordCount: 3 } } },
      createdAt: ago(81),
    },
    {
      id: "conn_hook",
      teamId: "team_ops",
      name: "Shop events",
      type: "webhook",
      config: { endpointId: "wh_demo_shop_events", signingSecret: null, retainRows: 10000 },
      createdAt: ago(81),
    },
    {
      id: "conn_github",
      teamId: "team_ops",
      name: "GitHub pushes",
      type: "webhook",
      config: { endpointId: "wh_demo_github", signingSecret: "demo-signing-secret", retainRows: 1000 },
      createdAt: ago(81),
    },
  ],
  datasets: [
    {
      id: "ds_orders",
      teamId: "team_ops",
      name: "Orders 2026",
      type: "upload",
      connectionId: null,
      source: null,
      columns: [
        { name: "order_id", type: "string" },
        { name: "ordered_on", type: "date" },
        { name: "region", type: "string" },
        { name: "product", type: "string" },
        { name: "quantity", type: "number" },
        { name: "amount", type: "number" },
        { name: "paid", type: "boolean" },
      ],
      rows: orders,
      lastRefreshedAt: null,
      updatedAt: ago(1, 14),
    },
    {
      id: "ds_stores",
      teamId: "team_ops",
      name: "Stores",
      type: "connection",
      connectionId: "conn_shop",
      source: "stores",
      columns: [
        { name: "store_id", type: "string" },
        { name: "city", type: "string" },
        { name: "country", type: "string" },
        { name: "lat", type: "number" },
        { name: "lon", type: "number" },
        { name: "opened", type: "date" },
      ],
      rows: stores,
      lastRefreshedAt: ago(0, 2),
      updatedAt: ago(0, 2),
    },
    {
      id: "ds_store_map",
      teamId: "team_ops",
      name: "Store map layer",
      type: "connection",
      connectionId: "conn_geo",
      source: "stores",
      columns: [
        { name: "store_id", type: "string" },
        { name: "city", type: "string" },
        { name: "country", type: "string" },
      ],
      rows: [],
      lastRefreshedAt: null,
      updatedAt: ago(81),
    },
    {
      id: "ds_shop_events",
      teamId: "team_ops",
      name: "Shop events",
      type: "connection",
      connectionId: "conn_hook",
      source: null,
      columns: [],
      rows: [],
      lastRefreshedAt: null,
      updatedAt: ago(81),
    },
    {
      id: "ds_deals",
      teamId: "team_sales",
      name: "Deals",
      type: "upload",
      connectionId: null,
      source: null,
      columns: [
        { name: "deal", type: "string" },
        { name: "stage", type: "string" },
        { name: "value", type: "number" },
      ],
      rows: [
        { deal: "Blue Bottle", stage: "won", value: 42000 },
        { deal: "Stumptown", stage: "negotiation", value: 18000 },
        { deal: "Intelligentsia", stage: "lead", value: 9000 },
      ],
      lastRefreshedAt: null,
      updatedAt: ago(20, 14),
    },
    {
      id: "ds_leads",
      teamId: "team_acme",
      name: "Leads",
      type: "upload",
      connectionId: null,
      source: null,
      columns: [
        { name: "company", type: "string" },
        { name: "score", type: "number" },
      ],
      rows: [
        { company: "Initech", score: 71 },
        { company: "Hooli", score: 88 },
      ],
      lastRefreshedAt: null,
      updatedAt: ago(20, 14),
    },
  ],
  tables: [
    {
      id: "tbl_targets",
      teamId: "team_ops",
      name: "Quarterly targets",
      columns: [
        { name: "region", type: "string" },
        { name: "quarter", type: "string" },
        { name: "target", type: "number" },
      ],
      rows: regions.map((r, i) => ({
        _id: `row_target_${i + 1}`,
        region: r,
        quarter: "2026-Q4",
        target: [120000, 180000, 90000][i],
        _createdAt: "2026-10-01T00:00:00Z",
        _updatedAt: "2026-10-01T00:00:00Z",
      })),
      updatedAt: "2026-10-01T00:00:00Z",
    },
    {
      id: "tbl_notes",
      teamId: "team_ops",
      name: "Field notes (any shape)",
      columns: [],
      rows: [],
      updatedAt: "2026-10-01T00:00:00Z",
    },
  ],
  dashboards: dashboards.map((d) => ({
    id: d.id,
    teamId: d.teamId,
    name: d.name,
    description: d.description,
    datasetIds: d.datasetIds,
    versions: [
      {
        version: 1,
        published: d.published,
        createdAt: ago(71, 15),
        updatedAt: ago(71, 15),
        publishedAt: d.published ? ago(71, 14, 30) : null,
      },
      {
        version: 2,
        published: d.published,
        createdAt: ago(37, 15),
        updatedAt: d.id === "dash_pipeline" ? ago(3, 15) : ago(36, 15),
        publishedAt: d.published ? ago(36, 14, 30) : null,
      },
    ],
  })),
  dashboardViews,
  refreshRuns,
  creditUsage,
  auditEvents,
};

writeFileSync(new URL("./space.json", import.meta.url), `${JSON.stringify(space, null, 1)}\n`);
console.log(
  `wrote space.json: ${orders.length} orders, ${dashboardViews.length} views, ${refreshRuns.length} refresh runs`,
);
