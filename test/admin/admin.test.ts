import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createAdmin } from "../../src/admin/index.js";
import { createDataApi } from "../../src/server/api.js";
import { setup } from "../support/api.js";
import { ADMIN_TOKEN, type AdminSend, functionAdmin, httpAdmin } from "../support/admin.js";
import { TOKENS } from "../support/fixture.js";
import { STORE_KINDS } from "./stores.js";

/**
 * Every admin operation, on every store, through the function and over HTTP:
 * each test asserts what the Data Access API shows on its very next request.
 */
for (const kind of STORE_KINDS) {
  for (const via of ["function", "http"] as const) {
    describe(`admin operations on ${kind.name}, through the ${via}`, () => {
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
        const auditActions = async (token = TOKENS.sync) => {
          const page = await ctx.call("GET", "/api/v1/audit?limit=1000&format=raw", { token });
          return (page.json.events as Array<{ action: string; actor: unknown; target: unknown }>).filter(
            (e) => !e.action.startsWith("fixture"),
          );
        };
        return { ...ctx, send, again: opened.again, auditActions };
      }

      it("changes a team's plan for its very next call, and records who did it", async (t) => {
        if (skip) return t.skip(skip);
        const { call, send, auditActions } = await world();
        expect((await call("GET", "/api/v1/me", { token: TOKENS.sync })).status).toBe(200);
        const changed = await send(
          "PUT",
          "/teams/team_ops",
          { name: "Operations", plan: "free", businessId: "biz_1", isPersonal: false },
          { "x-actor-user-id": "usr_ada" },
        );
        expect(changed).toEqual({
          status: 200,
          json: { id: "team_ops", name: "Operations", plan: "free", businessId: "biz_1", isPersonal: false },
        });
        const refused = await call("GET", "/api/v1/datasets", { token: TOKENS.sync });
        expect(refused.status).toBe(403);
        expect(refused.json.error.code).toBe("plan_required");
        await send("PUT", "/teams/team_ops", {
          name: "Operations",
          plan: "business",
          businessId: "biz_1",
          isPersonal: false,
        });
        expect((await call("GET", "/api/v1/datasets", { token: TOKENS.sync })).status).toBe(200);
        const updates = (await auditActions()).filter((e) => e.action === "team.updated");
        expect(updates).toHaveLength(2);
        expect(updates[0]!.actor).toEqual({ type: "user", id: "usr_ada", email: "ada@northwind.test" });
        expect(updates[1]!.actor).toEqual({ type: "system", id: "host", name: "host application" });
        expect(updates[0]!.target).toEqual({ type: "team", id: "team_ops" });
      });

      it("creates a user, a membership and a session that work at once, and takes them away at once", async (t) => {
        if (skip) return t.skip(skip);
        const { call, send } = await world();
        expect(
          (await send("PUT", "/users/usr_new", { email: "new@northwind.test", name: "Nia", businessAdmin: false }))
            .status,
        ).toBe(201);
        expect((await send("PUT", "/users/usr_new/memberships/team_mkt", { role: "viewer" })).status).toBe(201);
        const session = await send("POST", "/sessions", { userId: "usr_new", expiresInSeconds: 3600 });
        expect(session.status).toBe(201);
        expect(session.json).toMatchObject({ userId: "usr_new", expiresAt: "2026-11-01T13:00:00.000Z" });
        expect(session.json.token).toMatch(/^dps_[0-9A-Za-z]{40}$/);
        const me = await call("GET", "/api/v1/me", { token: session.json.token });
        expect(me.status).toBe(200);
        expect(me.json.teams).toEqual([{ id: "team_mkt", name: "Marketing", isPersonal: false, role: "viewer" }]);
        expect((await call("GET", "/api/v1/datasets?teamId=team_mkt", { token: session.json.token })).status).toBe(200);

        expect((await send("DELETE", "/users/usr_new/memberships/team_mkt")).status).toBe(204);
        expect((await call("GET", "/api/v1/datasets?teamId=team_mkt", { token: session.json.token })).status).toBe(404);
        expect((await send("DELETE", "/users/usr_new/memberships/team_mkt")).status).toBe(404);

        expect((await send("GET", `/sessions/${session.json.id}`)).json).toEqual({
          id: session.json.id,
          userId: "usr_new",
          expiresAt: "2026-11-01T13:00:00.000Z",
        });
        expect((await send("DELETE", `/sessions/${session.json.id}`)).status).toBe(204);
        expect((await call("GET", "/api/v1/me", { token: session.json.token })).status).toBe(401);
      });

      it("ends a deleted user's sessions; keys it created keep working", async (t) => {
        if (skip) return t.skip(skip);
        const { call, send } = await world();
        expect((await call("GET", "/api/v1/me", { token: TOKENS.sessionBob })).status).toBe(200);
        expect((await send("DELETE", "/users/usr_bob")).status).toBe(204);
        expect((await call("GET", "/api/v1/me", { token: TOKENS.sessionBob })).status).toBe(401);
        expect((await send("GET", "/users/usr_bob")).status).toBe(404);
        // key_mkt was created by Bob.
        expect((await call("GET", "/api/v1/me", { token: TOKENS.noAdmin })).status).toBe(200);
      });

      it("refuses bad bodies with 422 naming the first problem, and writes nothing", async (t) => {
        if (skip) return t.skip(skip);
        const { send } = await world();
        const unknownField = await send("PUT", "/teams/team_x", {
          name: "X",
          plan: "pro",
          businessId: null,
          isPersonal: false,
          colour: "red",
        });
        expect(unknownField.status).toBe(422);
        expect(unknownField.json.error).toMatchObject({ code: "validation_failed", details: { path: "$.colour" } });
        const badPlan = await send("PUT", "/teams/team_x", {
          name: "X",
          plan: "gold",
          businessId: null,
          isPersonal: false,
        });
        expect(badPlan.json.error).toMatchObject({ code: "validation_failed", details: { path: "$.plan" } });
        const badRef = await send("PUT", "/teams/team_x", {
          name: "X",
          plan: "pro",
          businessId: "biz_nope",
          isPersonal: false,
        });
        expect(badRef.status).toBe(422);
        expect(badRef.json.error.details).toEqual({ path: "$.businessId" });
        expect((await send("GET", "/teams/team_x")).status).toBe(404);
        const badActor = await send(
          "PUT",
          "/teams/team_x",
          { name: "X", plan: "pro", businessId: null, isPersonal: false },
          { "x-actor-user-id": "usr_ghost" },
        );
        expect(badActor.status).toBe(422);
        expect((await send("GET", "/teams/team_x")).status).toBe(404);
        const badMembership = await send("PUT", "/users/usr_ada/memberships/team_nope", { role: "viewer" });
        expect(badMembership.json.error).toMatchObject({ code: "validation_failed", details: { path: "$.teamId" } });
      });

      it("lists a collection in id order with an opaque cursor", async (t) => {
        if (skip) return t.skip(skip);
        const { send } = await world();
        for (const id of ["biz_c", "biz_a", "biz_b"])
          expect((await send("PUT", `/businesses/${id}`, { name: id.toUpperCase() })).status).toBe(201);
        expect((await send("PUT", "/businesses/biz_a", { name: "Renamed" })).status).toBe(200);
        const first = await send("GET", "/businesses?limit=2");
        expect(first.json.data.map((b: { id: string }) => b.id)).toEqual(["biz_1", "biz_a"]);
        expect(first.json.hasMore).toBe(true);
        const second = await send("GET", `/businesses?limit=2&cursor=${first.json.nextCursor}`);
        expect(second.json).toEqual({
          data: [
            { id: "biz_b", name: "BIZ_B" },
            { id: "biz_c", name: "BIZ_C" },
          ],
          hasMore: false,
          nextCursor: null,
        });
        expect((await send("GET", "/businesses/biz_a")).json).toEqual({ id: "biz_a", name: "Renamed" });
        const conflict = await send("DELETE", "/businesses/biz_1");
        expect(conflict.status).toBe(409);
        expect((await send("DELETE", "/businesses/biz_c")).status).toBe(204);
        expect((await send("DELETE", "/businesses/biz_c")).status).toBe(404);
      });

      it("creates API keys that work at once, lists them without tokens, revokes them at once", async (t) => {
        if (skip) return t.skip(skip);
        const { call, send } = await world();
        const created = await send("POST", "/teams/team_ops/api-keys", {
          name: "CI",
          scopes: ["data:read"],
          allowlist: { datasets: ["ds_orders"], connections: [], tables: [] },
          createdBy: "usr_ada",
        });
        expect(created.status).toBe(201);
        expect(created.json).toMatchObject({ name: "CI", teamId: "team_ops", scopes: ["data:read"], revokedAt: null });
        expect(created.json).not.toHaveProperty("tokenHash");
        const rows = await call("GET", "/api/v1/datasets/ds_orders/rows", { token: created.json.token });
        expect(rows.status).toBe(200);
        expect(rows.json.metadata.totalRows).toBe(5);
        expect((await call("GET", "/api/v1/datasets/ds_stores", { token: created.json.token })).status).toBe(404);
        const listed = await send("GET", "/teams/team_ops/api-keys");
        const mine = listed.json.data.find((k: { id: string }) => k.id === created.json.id);
        expect(mine).toMatchObject({ name: "CI", scopes: ["data:read"] });
        expect(JSON.stringify(listed.json)).not.toContain(created.json.token);
        expect(JSON.stringify(listed.json)).not.toContain("tokenHash");
        expect(
          (
            await send("POST", "/teams/team_free/api-keys", {
              name: "x",
              scopes: [],
              allowlist: {},
              createdBy: "usr_ada",
            })
          ).json.error.code,
        ).toBe("plan_required");
        const badEntry = await send("POST", "/teams/team_ops/api-keys", {
          name: "x",
          scopes: [],
          allowlist: { datasets: ["ds_campaigns"] },
          createdBy: "usr_ada",
        });
        expect(badEntry.json.error).toMatchObject({
          code: "validation_failed",
          details: { path: "$.allowlist.datasets[0]" },
        });
        expect((await send("DELETE", `/api-keys/${created.json.id}`)).status).toBe(204);
        expect((await call("GET", "/api/v1/me", { token: created.json.token })).status).toBe(401);
        expect((await send("DELETE", "/api-keys/key_nope")).status).toBe(404);
      });

      it("adds connections and datasets the API lists at once; deleting the connection takes its datasets", async (t) => {
        if (skip) return t.skip(skip);
        const { call, send } = await world();
        const connection = await send("PUT", "/connections/conn_new", {
          teamId: "team_ops",
          name: "Depots",
          type: "memory",
          config: { tables: { depots: [{ depot: "D1", capacity: 10 }] } },
        });
        expect(connection.status).toBe(201);
        expect(connection.json).toMatchObject({ id: "conn_new", teamId: "team_ops", type: "memory" });
        const dataset = await send("PUT", "/datasets/ds_depots", {
          teamId: "team_ops",
          name: "Depots",
          type: "connection",
          connectionId: "conn_new",
          source: "depots",
        });
        expect(dataset.status).toBe(201);
        const listed = await call("GET", "/api/v1/datasets?teamId=team_ops", { token: TOKENS.sessionAda });
        expect(listed.json.datasets.find((d: { id: string }) => d.id === "ds_depots")).toMatchObject({
          name: "Depots",
          connectionId: "conn_new",
          connectionType: "memory",
          rowCount: 0,
        });
        const ssrf = await send("PUT", "/connections/conn_meta", {
          teamId: "team_ops",
          name: "x",
          type: "arcgis",
          config: { url: "http://169.254.169.254/latest" },
        });
        expect(ssrf.json.error).toMatchObject({ code: "validation_failed", details: { path: "$.config.url" } });
        expect((await send("GET", "/connections/conn_meta")).status).toBe(404);
        expect((await send("DELETE", "/connections/conn_new")).status).toBe(204);
        expect(
          (await call("GET", "/api/v1/datasets/ds_depots?teamId=team_ops", { token: TOKENS.sessionAda })).status,
        ).toBe(404);
        expect((await send("GET", "/datasets/ds_depots")).status).toBe(404);
      });

      it("creates a webhook connection whose endpoint takes deliveries, checked against a signing secret set and removed at once", async (t) => {
        if (skip) return t.skip(skip);
        const { api, send } = await world();
        const created = await send("PUT", "/connections/conn_hook", {
          teamId: "team_ops",
          name: "Orders hook",
          type: "webhook",
          config: {},
        });
        expect(created.status).toBe(201);
        expect(created.json.config).toMatchObject({ endpointId: expect.stringMatching(/^whk_/), signed: false });
        expect(created.json.config).not.toHaveProperty("signingSecret");
        const url = created.json.endpointUrl as string;
        expect(url).toBe(`http://127.0.0.1:8787/api/webhooks/${created.json.config.endpointId}`);
        const deliver = (headers: Record<string, string> = {}) =>
          api.fetch(
            new Request(`http://dataport.test${new URL(url).pathname}`, {
              method: "POST",
              headers: { "content-type": "application/json", ...headers },
              body: '{"n":1}',
            }),
          );
        expect((await deliver()).status).toBe(200);
        const secured = await send("PUT", "/connections/conn_hook/signing-secret", { secret: "s3cret-s3cret" });
        expect(secured.json.config.signed).toBe(true);
        expect(JSON.stringify(secured.json)).not.toContain("s3cret");
        expect((await deliver()).status).toBe(401);
        await send("PUT", "/connections/conn_hook/signing-secret", { secret: null });
        expect((await deliver()).status).toBe(200);
        expect((await send("GET", "/datasets/ds_conn_hook")).json).toMatchObject({
          rowCount: 2,
          connectionId: "conn_hook",
        });
      });

      it("replaces and appends a dataset's rows", async (t) => {
        if (skip) return t.skip(skip);
        const { call, send } = await world();
        await send("PUT", "/datasets/ds_up", {
          teamId: "team_ops",
          name: "Upload",
          type: "upload",
          connectionId: null,
          source: null,
        });
        const replaced = await send("PUT", "/datasets/ds_up/rows", [
          { a: 1, b: "x" },
          { a: 2, b: "y", nested: { c: true } },
        ]);
        expect(replaced.status).toBe(200);
        expect(replaced.json).toMatchObject({ id: "ds_up", rowCount: 2 });
        const rows = await call("GET", "/api/v1/datasets/ds_up/rows?teamId=team_ops", { token: TOKENS.sessionAda });
        expect(rows.json.data).toEqual([
          { a: 1, b: "x" },
          { a: 2, b: "y", "nested.c": true },
        ]);
        await send("POST", "/datasets/ds_up/rows", [{ a: 3, b: "z" }]);
        const after = await call("GET", "/api/v1/datasets/ds_up/rows?teamId=team_ops", { token: TOKENS.sessionAda });
        expect(after.json.data.map((r: { a: number }) => r.a)).toEqual([1, 2, 3]);
        await send("PUT", "/datasets/ds_up/rows", [{ a: 9 }]);
        const replacedAgain = await call("GET", "/api/v1/datasets/ds_up/rows?teamId=team_ops", {
          token: TOKENS.sessionAda,
        });
        expect(replacedAgain.json.data).toEqual([{ a: 9 }]);
      });

      it("adds input tables whose declared columns apply to the next write", async (t) => {
        if (skip) return t.skip(skip);
        const { call, send } = await world();
        const table = await send("PUT", "/tables/tbl_new", {
          teamId: "team_ops",
          name: "Budgets",
          columns: [{ name: "dept", type: "string" }],
        });
        expect(table.status).toBe(201);
        expect(table.json).toMatchObject({ id: "tbl_new", rowCount: 0, columns: [{ name: "dept", type: "string" }] });
        const write = (body: unknown) =>
          call("POST", "/api/v1/tables/tbl_new/rows", { token: TOKENS.sessionAda, body });
        expect((await write({ dept: "R&D" })).status).toBe(201);
        expect((await write({ amount: 5 })).status).toBe(422);
        await send("PUT", "/tables/tbl_new", {
          teamId: "team_ops",
          name: "Budgets",
          columns: [
            { name: "dept", type: "string" },
            { name: "amount", type: "number" },
          ],
        });
        expect((await write({ amount: 5 })).status).toBe(201);
        expect((await send("GET", "/tables/tbl_new")).json.rowCount).toBe(2);
        expect((await send("PUT", "/tables/ds_orders", { teamId: "team_ops", name: "x", columns: [] })).status).toBe(
          409,
        );
        expect((await send("DELETE", "/tables/tbl_new")).status).toBe(204);
        expect((await call("GET", "/api/v1/tables/tbl_new/rows", { token: TOKENS.sessionAda })).status).toBe(404);
      });

      it("lists a dashboard's highest version and counts the views the host reports", async (t) => {
        if (skip) return t.skip(skip);
        const { call, send } = await world();
        const body = {
          teamId: "team_ops",
          name: "Ops board",
          description: null,
          published: false,
          publishedAt: null,
          datasetIds: ["ds_orders"],
        };
        expect((await send("PUT", "/dashboards/dash_new/versions/1", body)).status).toBe(201);
        expect(
          (
            await send("PUT", "/dashboards/dash_new/versions/2", {
              ...body,
              name: "Ops board v2",
              published: true,
              publishedAt: "2026-11-01T10:00:00Z",
            })
          ).status,
        ).toBe(201);
        expect(
          (
            await send("PUT", "/dashboards/dash_new/versions/2", {
              ...body,
              name: "Ops board v2",
              published: true,
              publishedAt: "2026-11-01T10:00:00Z",
            })
          ).status,
        ).toBe(200);
        const listed = await call("GET", "/api/v1/dashboards?teamId=team_ops", { token: TOKENS.sessionAda });
        expect(listed.json.dashboards.find((d: { id: string }) => d.id === "dash_new")).toMatchObject({
          name: "Ops board v2",
          version: 2,
          published: true,
          publishedAt: "2026-11-01T10:00:00Z",
        });
        const views = await send("POST", "/dashboard-views", [
          { dashboardId: "dash_new", at: "2026-11-01T08:00:00Z", visitorId: "v1", userId: null, editor: false },
          { dashboardId: "dash_new", at: "2026-11-01T09:00:00Z", visitorId: "v2", userId: "usr_ada", editor: false },
          { dashboardId: "dash_new", at: "2026-11-01T09:30:00Z", visitorId: "v2", userId: "usr_ada", editor: true },
        ]);
        expect(views).toEqual({ status: 201, json: { stored: 3 } });
        const counted = await call("GET", "/api/v1/dashboards/dash_new/views?teamId=team_ops&days=1", {
          token: TOKENS.sessionAda,
        });
        expect(counted.status).toBe(200);
        expect(counted.json.totalViews ?? counted.json.total ?? counted.json.series?.[0]?.views).toBe(2);
        const bad = await send("POST", "/dashboard-views", [
          { dashboardId: "dash_nope", at: "2026-11-01T08:00:00Z", visitorId: "v1" },
        ]);
        expect(bad.json.error).toMatchObject({ code: "validation_failed", details: { path: "$[0].dashboardId" } });
      });

      it("records refresh runs and credit usage for the space objects", async (t) => {
        if (skip) return t.skip(skip);
        const { call, send } = await world();
        expect(
          (
            await send("POST", "/refresh-runs", [
              {
                datasetId: "ds_orders",
                startedAt: "2026-11-01T06:00:00Z",
                durationMs: 1500,
                rowsProcessed: 10,
                error: "boom",
              },
            ])
          ).status,
        ).toBe(201);
        const history = await call("GET", "/api/v1/space/refresh-history?teamId=team_ops&days=1", {
          token: TOKENS.sessionAda,
        });
        expect(
          history.json.rows.find(
            (r: { dataset_id: string; day: string }) => r.dataset_id === "ds_orders" && r.day === "2026-11-01",
          ),
        ).toMatchObject({
          runs: 1,
          failures: 1,
          last_error: "boom",
        });
        expect(
          (
            await send("POST", "/credit-usage", [
              { teamId: "team_ops", at: "2026-11-01T07:00:00Z", category: "ai_query", credits: 4, userId: "usr_ada" },
            ])
          ).status,
        ).toBe(201);
        const credits = await call("GET", "/api/v1/space/credit-usage?teamId=team_ops&days=1", {
          token: TOKENS.sessionAda,
        });
        expect(credits.json.rows.find((r: { category: string }) => r.category === "ai_query")).toMatchObject({
          day: "2026-11-01",
          credits: 4,
          uses: 1,
          users: 1,
        });
      });

      it("stores host audit events once, however often a batch is retried", async (t) => {
        if (skip) return t.skip(skip);
        const { send, auditActions } = await world();
        const batch = [
          {
            id: "evt_host_1",
            teamId: "team_ops",
            time: "2026-11-01T11:00:00Z",
            category: "audit",
            action: "report.exported",
          },
        ];
        expect((await send("POST", "/audit-events", batch)).json).toEqual({ stored: 1, skipped: 0 });
        expect((await send("POST", "/audit-events", batch)).json).toEqual({ stored: 0, skipped: 1 });
        expect((await auditActions()).filter((e) => e.action === "report.exported")).toHaveLength(1);
      });

      it("deletes a team: its keys stop working and its objects are gone", async (t) => {
        if (skip) return t.skip(skip);
        const { call, send } = await world();
        expect((await call("GET", "/api/v1/me", { token: TOKENS.noAdmin })).status).toBe(200);
        expect((await send("DELETE", "/teams/team_mkt")).status).toBe(204);
        expect((await call("GET", "/api/v1/me", { token: TOKENS.noAdmin })).status).toBe(401);
        expect((await send("GET", "/datasets/ds_campaigns")).status).toBe(404);
        expect((await send("GET", "/teams/team_mkt")).status).toBe(404);
        expect((await call("GET", "/api/v1/me", { token: TOKENS.sessionBob })).json.teams).toEqual([]);
      });

      it.runIf(kind.name !== "memory")(
        "shows every change to a second instance on the same store at once",
        async (t) => {
          if (skip) return t.skip(skip);
          const { send, again } = await world();
          const second = createDataApi({ storage: await again!(), auditLagSeconds: 0 });
          const me = (token: string) =>
            second.fetch(
              new Request("http://dataport.test/api/v1/me", { headers: { authorization: `Bearer ${token}` } }),
            );
          const session = await send("POST", "/sessions", { userId: "usr_bob" });
          expect((await me(session.json.token)).status).toBe(200);
          await send("PUT", "/teams/team_mkt", {
            name: "Marketing",
            plan: "free",
            businessId: "biz_1",
            isPersonal: false,
          });
          expect((await me(TOKENS.noAdmin)).status).toBe(403);
          await send("DELETE", `/sessions/${session.json.id}`);
          expect((await me(session.json.token)).status).toBe(401);
        },
      );
    });
  }
}
