import { createServer, type Server } from "node:net";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createAdmin } from "../../src/admin/index.js";
import { arcgisConnector } from "../../src/connectors/arcgis.js";
import { postgresConnector } from "../../src/connectors/postgres.js";
import type { ConnectorQuery } from "../../src/ports/connector.js";
import { setup } from "../support/api.js";
import { ADMIN_TOKEN, type AdminSend, functionAdmin, httpAdmin } from "../support/admin.js";
import { TOKENS } from "../support/fixture.js";
import { POSTGRES_URL, postgresSkipReason } from "../support/services.js";
import { STORE_KINDS } from "./stores.js";

/**
 * admin-api.md, Revision 3 ("nothing is destroyed by accident, nothing
 * reaches where it must not"), through the functions and over HTTP.
 */

/** Every spelling the issue found accepted, and its kin, of 169.254.169.254 (or another forbidden address). */
const FORBIDDEN_HTTP = [
  "http://[::ffff:169.254.169.254]/",
  "http://[::ffff:a9fe:a9fe]/arcgis/rest/services/X/FeatureServer",
  "http://[64:ff9b::a9fe:a9fe]/",
  "http://[::ffff:0:a9fe:a9fe]/",
  "http://[::a9fe:a9fe]/",
  "http://2852039166/latest/meta-data",
  "http://0xa9fea9fe/",
  "http://0251.0376.0251.0376/",
  "http://169.254.43518/",
  "http://169.254.169.254./",
  "http://169%2E254.169.254/",
  "http://0/",
  "https://[fe80::1]/",
  "http://[ff02::1]/",
  "http://224.0.0.251/",
];
const FORBIDDEN_POSTGRES = [
  "postgres://u:p@[::ffff:169.254.169.254]:5432/db",
  "postgres://[::ffff:a9fe:a9fe]/db",
  "postgres://[64:ff9b::a9fe:a9fe]/db",
  "postgres://2852039166/db",
  "postgres://0xa9fea9fe/db",
  "postgresql://0251.0376.0251.0376/db",
  "postgres://169.254.169.254./db",
  "postgres://169%2E254%2E169%2E254/db",
  "postgres://0/db",
  "postgres:///db?host=169.254.169.254",
  "postgres://db.example.com/db?host=0xa9fea9fe",
  "postgres:///db?hostaddr=169.254.169.254",
  "postgres://db.example.com,169.254.169.254/db",
  "postgres:///db?host=db.example.com,2852039166",
  "postgres:///db?host=%5B::ffff:a9fe:a9fe%5D",
];

for (const via of ["function", "http"] as const) {
  describe(`connection addresses through the ${via}`, () => {
    async function world(options: { allowPrivateUpstreams?: boolean } = {}) {
      const ctx = await setup({ adminToken: ADMIN_TOKEN, ...options });
      const send: AdminSend = via === "http" ? httpAdmin(ctx.api) : functionAdmin(createAdmin(ctx.api));
      const put = (type: string, url: string) =>
        send("PUT", `/connections/conn_${type}`, { teamId: "team_ops", name: "Upstream", type, config: { url } });
      return { ...ctx, send, put };
    }

    it("refuses every spelling of a link-local, unspecified or multicast host, for ArcGIS and PostgreSQL alike, storing nothing", async () => {
      const { send, put } = await world();
      for (const [type, urls] of [
        ["arcgis", FORBIDDEN_HTTP],
        ["postgres", FORBIDDEN_POSTGRES],
      ] as const) {
        for (const url of urls) {
          const answer = await put(type, url);
          expect(answer.status, url).toBe(422);
          expect(answer.json.error, url).toMatchObject({
            code: "validation_failed",
            details: { path: "$.config.url" },
          });
          expect(answer.json.error.message, url).toMatch(
            /^\$\.config\.url: the URL's host is an? (link-local|unspecified|multicast)/,
          );
        }
      }
      expect((await send("GET", "/connections/conn_arcgis")).status).toBe(404);
      expect((await send("GET", "/connections/conn_postgres")).status).toBe(404);
    });

    it("keeps loopback, private networks and names allowed by default (a host's own servers)", async () => {
      const { put } = await world();
      const allowed: Array<[string, string]> = [
        ["arcgis", "http://127.0.0.1:6080/arcgis/rest/services/X/FeatureServer"],
        ["arcgis", "http://localhost:6080/"],
        ["arcgis", "https://10.1.2.3/"],
        ["arcgis", "https://gis.example.com/arcgis/rest/services/X/FeatureServer"],
        ["postgres", "postgres://postgres@127.0.0.1:5432/test"],
        ["postgres", "postgres://postgres@0x7f000001:5432/test"],
        ["postgres", "postgres:///test?host=/var/run/postgresql"],
        ["postgres", "postgres://warehouse.internal/db"],
      ];
      for (const [type, url] of allowed) expect((await put(type, url)).status, url).toBeLessThan(300);
    });

    it("refuses loopback, private networks, local sockets and host-less URLs in every spelling when allowPrivateUpstreams is false", async () => {
      const { put } = await world({ allowPrivateUpstreams: false });
      const refused: Array<[string, string, RegExp]> = [
        ["arcgis", "http://127.0.0.1:6080/", /loopback/],
        ["arcgis", "http://2130706433/", /loopback/],
        ["arcgis", "http://[::1]/", /loopback/],
        ["arcgis", "http://localhost./", /loopback name/],
        ["arcgis", "http://192.168.0.10/", /private/],
        ["postgres", "postgres://0x7f000001/db", /loopback/],
        ["postgres", "postgres://127.1/db", /loopback/],
        ["postgres", "postgres://[::ffff:7f00:1]/db", /loopback/],
        ["postgres", "postgres:///db?host=10.0.0.8", /private/],
        ["postgres", "postgres:///db?host=/var/run/postgresql", /local socket/],
        ["postgres", "postgres:///db", /needs a host/],
        ["postgres", "postgres://db.example.com/db?sslrootcert=/etc/passwd", /file of this machine/],
      ];
      for (const [type, url, why] of refused) {
        const answer = await put(type, url);
        expect(answer.status, url).toBe(422);
        expect(answer.json.error.message, url).toMatch(why);
      }
      expect((await put("postgres", "postgres://db.example.com/db")).status).toBe(201);
    });
  });
}

describe("connection addresses at dial time", () => {
  /** A TCP listener counting the connections that reach it. */
  let listener: Server;
  let port = 0;
  let reached = 0;
  beforeAll(async () => {
    listener = createServer((socket) => {
      reached++;
      socket.destroy();
    });
    await new Promise<void>((resolve) => listener.listen(0, "127.0.0.1", resolve));
    port = (listener.address() as AddressInfo).port;
  });
  afterAll(() => new Promise<void>((resolve) => listener.close(() => resolve())));

  const query: ConnectorQuery = {
    source: "0",
    limit: 1,
    offset: 0,
    filters: null,
    orderBy: null,
    orderDirection: "ASC",
    format: "rows",
    params: null,
  };
  const connection = (id: string, url: string) => ({
    id,
    teamId: "team_ops",
    name: id,
    type: "x",
    config: { url },
    createdAt: "2026-11-01T00:00:00Z",
  });
  const failure = (promise: Promise<unknown>) =>
    promise.then(
      () => "answered",
      (error: Error) => `${error.name}: ${error.message}`,
    );

  it("refuses a name that resolves to 127.0.0.1 (localhost) without connecting, when private addresses are not allowed", async () => {
    const before = reached;
    const pg = postgresConnector({ allowPrivateAddresses: false });
    const gis = arcgisConnector({ allowPrivateAddresses: false });
    try {
      // The system resolver answers 127.0.0.1 for localhost; the connector judges that answer before dialling it.
      expect(
        await failure(
          pg.query(connection("c1", `postgres://postgres@localhost:${port}/test`), { ...query, source: "t" }),
        ),
      ).toBe(
        "UpstreamUnavailableError: the upstream's address is a loopback address (127.0.0.0/8), which connections may not reach",
      );
      expect(await failure(gis.query(connection("c2", `http://localhost:${port}/arcgis`), query))).toBe(
        "UpstreamUnavailableError: the upstream's address is a loopback address (127.0.0.0/8), which connections may not reach",
      );
      // The spellings of 127.0.0.1 that once reached a listener on refresh.
      for (const host of ["2130706433", "0x7f000001", "0177.0.0.1", "127.1", "127.0.0.1.", "[::ffff:127.0.0.1]"]) {
        expect(
          await failure(
            pg.query(connection(`pg-${host}`, `postgres://postgres@${host}:${port}/test`), { ...query, source: "t" }),
          ),
          host,
        ).toMatch(/loopback/);
        expect(
          await failure(gis.query(connection(`gis-${host}`, `http://${host}:${port}/arcgis`), query)),
          host,
        ).toMatch(/loopback|valid service url/);
      }
      expect(reached - before).toBe(0);
    } finally {
      await pg.close?.();
      await gis.close?.();
    }
  });

  it("refuses a name whose DNS answer is link-local (a metadata service), and any answer holding one forbidden address", async () => {
    const answers: Record<string, Array<{ address: string; family: 4 | 6 }>> = {
      "metadata.test": [{ address: "169.254.169.254", family: 4 }],
      "mixed.test": [
        { address: "127.0.0.1", family: 4 },
        { address: "fe80::1", family: 6 },
      ],
      "mapped.test": [{ address: "::ffff:a9fe:a9fe", family: 6 }],
    };
    const resolve = async (name: string) => answers[name] ?? [];
    const pg = postgresConnector({ resolve });
    const gis = arcgisConnector({ resolve });
    try {
      for (const name of Object.keys(answers)) {
        expect(
          await failure(
            pg.query(connection(`pg-${name}`, `postgres://postgres@${name}:${port}/test`), { ...query, source: "t" }),
          ),
          name,
        ).toMatch(/^UpstreamUnavailableError: the upstream's address is a link-local address/);
        expect(
          await failure(gis.query(connection(`gis-${name}`, `http://${name}:${port}/arcgis`), query)),
          name,
        ).toMatch(/^UpstreamUnavailableError: the upstream's address is a link-local address/);
      }
    } finally {
      await pg.close?.();
      await gis.close?.();
    }
  });

  it("dials exactly the addresses it judged: a name only the connector's resolver knows reaches the database", async (t) => {
    const skip = await postgresSkipReason();
    if (skip) return t.skip(skip);
    const real = new URL(POSTGRES_URL);
    const address = real.hostname;
    let asked = 0;
    const pg = postgresConnector({
      resolve: async () => {
        asked++;
        return [{ address, family: 4 }];
      },
    });
    try {
      real.hostname = "warehouse.invalid";
      const answer = await pg.query(connection("c-real", real.href), { ...query, source: "pg_catalog.pg_namespace" });
      expect(answer).toMatchObject({ kind: "rows", rows: [expect.any(Object)] });
      expect(asked).toBe(1);
    } finally {
      await pg.close?.();
    }
  });

  it("records a refused refresh: the admin stored a name, the refresh found it resolving to a forbidden address", async () => {
    const resolve = async () => [{ address: "169.254.169.254", family: 4 as const }];
    const ctx = await setup({
      adminToken: ADMIN_TOKEN,
      connectors: { postgres: postgresConnector({ resolve }), arcgis: arcgisConnector({ resolve }) },
    });
    const send = httpAdmin(ctx.api);
    for (const [type, url, source] of [
      ["postgres", "postgres://postgres@metadata.test/db", "t"],
      ["arcgis", "http://metadata.test/arcgis", "0"],
    ] as const) {
      expect(
        (await send("PUT", `/connections/conn_${type}`, { teamId: "team_ops", name: type, type, config: { url } }))
          .status,
      ).toBe(201);
      const dataset = { teamId: "team_ops", name: type, type: "connection", connectionId: `conn_${type}`, source };
      expect((await send("PUT", `/datasets/ds_${type}`, dataset)).status).toBe(201);
      const run = await send("POST", `/datasets/ds_${type}/refresh`, {});
      expect(run.json).toMatchObject({ ok: false, rowsProcessed: 0 });
      expect(run.json.error).toMatch(/link-local/);
      const live = await ctx.call("GET", `/api/v1/connections/conn_${type}/query`, { token: TOKENS.sessionAda });
      expect(live.status).toBe(502);
      expect(live.json.error.message).toMatch(/link-local/);
    }
  });
});

for (const kind of STORE_KINDS) {
  for (const via of ["function", "http"] as const) {
    describe(`dropping stored values on ${kind.name}, through the ${via}`, () => {
      let skip: string | undefined;
      const cleanups: Array<() => Promise<void>> = [];
      beforeAll(async () => {
        skip = await kind.skip();
      });
      afterAll(async () => {
        for (const cleanup of cleanups.splice(0)) await cleanup();
      });

      async function world() {
        const opened = await kind.open();
        cleanups.push(opened.cleanup);
        const ctx = await setup({ storage: opened.storage, adminToken: ADMIN_TOKEN, auditLagSeconds: 0 });
        const send: AdminSend = via === "http" ? httpAdmin(ctx.api) : functionAdmin(createAdmin(ctx.api));
        const rows = async (path: string) =>
          (await ctx.call("GET", `/api/v1/${path}/rows?teamId=team_ops`, { token: TOKENS.sessionAda })).json.data;
        const audit = async () =>
          (await ctx.call("GET", "/api/v1/audit?limit=1000&format=raw", { token: TOKENS.sync })).json.events as Array<{
            action: string;
            target: { id: string };
            details?: unknown;
          }>;
        return { ...ctx, send, rows, audit };
      }

      it("refuses a dataset declaration that leaves out columns holding values (a typo), naming them all, writing nothing; dropColumns drops them", async (t) => {
        if (skip) return t.skip(skip);
        const { send, rows, audit } = await world();
        const body = { teamId: "team_ops", name: "Orders", type: "upload", connectionId: null, source: null };
        await send("PUT", "/datasets/ds_typo", body);
        await send("PUT", "/datasets/ds_typo/rows", [
          { id: 1, amount: 5, note: null, region: "EU" },
          { id: 2, amount: 7, note: "rush", region: null },
          { id: 3, amount: 9, empty: null },
        ]);
        const typo = [
          { name: "id", type: "number" },
          { name: "amuont", type: "number" },
        ];
        const refused = await send("PUT", "/datasets/ds_typo", { ...body, columns: typo });
        expect(refused.status).toBe(409);
        expect(refused.json.error.code).toBe("conflict");
        // Every column with a value somewhere, in the order met; `empty` holds only nulls and may go.
        expect(refused.json.error.details).toEqual({ dropColumns: ["amount", "region", "note"] });
        expect(await rows("datasets/ds_typo")).toEqual([
          { id: 1, amount: 5, note: null, region: "EU" },
          { id: 2, amount: 7, note: "rush", region: null },
          { id: 3, amount: 9, empty: null },
        ]);
        expect((await send("GET", "/datasets/ds_typo")).json).not.toHaveProperty("columnsDeclared");

        const partly = await send("PUT", "/datasets/ds_typo", {
          ...body,
          columns: typo,
          dropColumns: ["amount", "note"],
        });
        expect(partly.json.error.details).toEqual({ dropColumns: ["region"] });

        const keep = [
          { name: "id", type: "number" },
          { name: "amount", type: "number" },
        ];
        const dropped = await send("PUT", "/datasets/ds_typo", {
          ...body,
          columns: keep,
          dropColumns: ["note", "region"],
        });
        expect(dropped.status).toBe(200);
        expect(await rows("datasets/ds_typo")).toEqual([
          { id: 1, amount: 5 },
          { id: 2, amount: 7 },
          { id: 3, amount: 9 },
        ]);
        // Adding a column and converting a type need no list.
        const more = [
          { name: "id", type: "string" },
          { name: "amount", type: "number" },
          { name: "added", type: "string" },
        ];
        expect((await send("PUT", "/datasets/ds_typo", { ...body, columns: more })).status).toBe(200);
        expect((await rows("datasets/ds_typo"))[0]).toEqual({ id: "1", amount: 5 });
        const updates = (await audit()).filter((e) => e.action === "dataset.updated" && e.target.id === "ds_typo");
        expect(updates.map((e) => e.details ?? null)).toEqual([
          { rows: "replaced", rowCount: 3 },
          { dropColumns: ["note", "region"] },
          null,
        ]);
      });

      it("refuses a table declaration that leaves out columns holding values, naming them all, writing nothing; dropColumns drops them", async (t) => {
        if (skip) return t.skip(skip);
        const { call, send } = await world();
        const put = (columns: unknown, dropColumns?: string[]) =>
          send("PUT", "/tables/tbl_budget", {
            teamId: "team_ops",
            name: "Budget",
            columns,
            ...(dropColumns && { dropColumns }),
          });
        // Undeclared: any shape, so the rows are read to find what a declaration would drop.
        expect((await put(null)).status).toBe(201);
        const write = (body: unknown) =>
          call("POST", "/api/v1/tables/tbl_budget/rows", { token: TOKENS.sessionAda, body });
        await write({ dept: "ops", amount: 10 });
        await write({ dept: "it", owner: "ada" });
        await write({ dept: "hr", owner: null });
        const values = async () =>
          (
            (await call("GET", "/api/v1/tables/tbl_budget/rows", { token: TOKENS.sessionAda })).json.data as Array<
              Record<string, unknown>
            >
          ).map(({ _id, _createdAt, _updatedAt, ...rest }) => rest);
        const refused = await put([{ name: "dept", type: "string" }]);
        expect(refused.status).toBe(409);
        expect(refused.json.error).toMatchObject({ code: "conflict", details: { dropColumns: ["amount", "owner"] } });
        expect(await values()).toEqual([
          { dept: "ops", amount: 10 },
          { dept: "it", owner: "ada" },
          { dept: "hr", owner: null },
        ]);
        expect((await send("GET", "/tables/tbl_budget")).json.columns).toEqual([]);

        expect(
          (
            await put(
              [
                { name: "dept", type: "string" },
                { name: "amount", type: "number" },
              ],
              ["owner"],
            )
          ).status,
        ).toBe(200);
        expect(await values()).toEqual([{ dept: "ops", amount: 10 }, { dept: "it" }, { dept: "hr" }]);
        // Declared: a left-out declared column holding values is refused the same way.
        expect((await put([{ name: "dept", type: "string" }])).json.error.details).toEqual({ dropColumns: ["amount"] });
        expect(await values()).toEqual([{ dept: "ops", amount: 10 }, { dept: "it" }, { dept: "hr" }]);
        // A declared column that holds no value anywhere may go without a list.
        await call(
          "DELETE",
          `/api/v1/tables/tbl_budget/rows/${(await call("GET", "/api/v1/tables/tbl_budget/rows", { token: TOKENS.sessionAda })).json.data[0]._id}`,
          {
            token: TOKENS.sessionAda,
          },
        );
        expect((await put([{ name: "dept", type: "string" }])).status).toBe(200);
        expect(await values()).toEqual([{ dept: "it" }, { dept: "hr" }]);
      });

      it("checks dropColumns itself: only beside columns, never naming a kept column", async (t) => {
        if (skip) return t.skip(skip);
        const { send } = await world();
        const body = { teamId: "team_ops", name: "Orders", type: "upload", connectionId: null, source: null };
        const alone = await send("PUT", "/datasets/ds_x", { ...body, dropColumns: ["a"] });
        expect(alone.json.error).toMatchObject({ code: "validation_failed", details: { path: "$.dropColumns" } });
        const both = await send("PUT", "/tables/tbl_x", {
          teamId: "team_ops",
          name: "X",
          columns: [{ name: "a", type: "string" }],
          dropColumns: ["b", "a"],
        });
        expect(both.json.error).toMatchObject({ code: "validation_failed", details: { path: "$.dropColumns[1]" } });
        expect((await send("GET", "/datasets/ds_x")).status).toBe(404);
        expect((await send("GET", "/tables/tbl_x")).status).toBe(404);
      });
    });
  }
}
