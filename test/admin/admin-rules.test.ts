import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createAdmin } from "../../src/admin/index.js";
import { createDataApi } from "../../src/server/api.js";
import { createFixedClock } from "../../src/memory/fixed-clock.js";
import { NOW, setup } from "../support/api.js";
import { ADMIN_TOKEN, type AdminSend, functionAdmin, httpAdmin } from "../support/admin.js";
import { TOKENS } from "../support/fixture.js";
import { STORE_KINDS } from "./stores.js";

/**
 * admin-api.md, Revision 2 ("a change never weakens what it does not
 * name"), on every store, through the functions and over HTTP.
 */
for (const kind of STORE_KINDS) {
  for (const via of ["function", "http"] as const) {
    describe(`admin rules on ${kind.name}, through the ${via}`, () => {
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
        return { ...ctx, send, rows, again: opened.again };
      }

      const hook = (config: Record<string, unknown>, name = "Orders hook") => ({
        teamId: "team_ops",
        name,
        type: "webhook",
        config,
      });

      it("keeps a webhook's signing secret, retention and endpoint id when a put omits them; an explicit null removes them, audited", async (t) => {
        if (skip) return t.skip(skip);
        const { api, call, send } = await world();
        const created = await send(
          "PUT",
          "/connections/conn_hook",
          hook({ signingSecret: "s3cret-s3cret", retainRows: 5 }),
        );
        expect(created.status).toBe(201);
        const endpointId = created.json.config.endpointId as string;
        const deliver = () =>
          api.fetch(
            new Request(`http://dataport.test/api/webhooks/${endpointId}`, {
              method: "POST",
              headers: { "content-type": "application/json" },
              body: '{"n":1}',
            }),
          );
        expect((await deliver()).status).toBe(401);

        const renamed = await send("PUT", "/connections/conn_hook", hook({}, "Renamed hook"));
        expect(renamed.status).toBe(200);
        expect(renamed.json).toMatchObject({
          name: "Renamed hook",
          config: { endpointId, signed: true, retainRows: 5 },
        });
        expect((await deliver()).status).toBe(401);

        const unsigned = await send(
          "PUT",
          "/connections/conn_hook",
          hook({ signingSecret: null, retainRows: null }, "Renamed hook"),
        );
        expect(unsigned.json.config).toEqual({ endpointId, signed: false });
        expect((await deliver()).status).toBe(200);

        const audit = await call("GET", "/api/v1/audit?limit=1000&format=raw", { token: TOKENS.sync });
        const updates = (
          audit.json.events as Array<{ action: string; target: { id: string }; details?: Record<string, unknown> }>
        ).filter((e) => e.action === "connection.updated" && e.target.id === "conn_hook");
        expect(updates.map((e) => e.details ?? null)).toEqual([null, { signingSecret: "removed" }]);
        expect(JSON.stringify(audit.json)).not.toContain("s3cret");
      });

      it("keeps a dataset's declared columns when a put omits them, drops the declaration on null; a declared json column stays whole", async (t) => {
        if (skip) return t.skip(skip);
        const { send, rows } = await world();
        const declared = [
          { name: "id", type: "number" },
          { name: "meta", type: "json" },
        ];
        const body = { teamId: "team_ops", name: "Declared", type: "upload", connectionId: null, source: null };
        expect((await send("PUT", "/datasets/ds_decl", { ...body, columns: declared })).status).toBe(201);
        expect(
          (await send("PUT", "/datasets/ds_decl/rows", [{ id: 1, meta: { x: 1, tags: ["a"] } }])).json,
        ).toMatchObject({ rowCount: 1, columns: declared });
        expect(await rows("datasets/ds_decl")).toEqual([{ id: 1, meta: { x: 1, tags: ["a"] } }]);

        const renamed = await send("PUT", "/datasets/ds_decl", { ...body, name: "Renamed" });
        expect(renamed.status).toBe(200);
        expect(renamed.json).toMatchObject({ name: "Renamed", columns: declared, columnsDeclared: true, rowCount: 1 });
        const undeclared = await send("POST", "/datasets/ds_decl/rows", [{ id: 2, other: "x" }]);
        expect(undeclared.status).toBe(422);
        expect(undeclared.json.error.details).toMatchObject({ column: "other" });

        const freed = await send("PUT", "/datasets/ds_decl", { ...body, name: "Renamed", columns: null });
        expect(freed.json).not.toHaveProperty("columnsDeclared");
        expect((await send("POST", "/datasets/ds_decl/rows", [{ id: 2, other: "x" }])).json.rowCount).toBe(2);
      });

      it("keeps a table's declared columns when a put omits them; null accepts any shape again", async (t) => {
        if (skip) return t.skip(skip);
        const { call, send } = await world();
        const columns = [{ name: "dept", type: "string" }];
        expect((await send("PUT", "/tables/tbl_keep", { teamId: "team_ops", name: "Budgets", columns })).status).toBe(
          201,
        );
        const renamed = await send("PUT", "/tables/tbl_keep", { teamId: "team_ops", name: "Budgets 2027" });
        expect(renamed.json).toMatchObject({ name: "Budgets 2027", columns });
        const write = (body: unknown) =>
          call("POST", "/api/v1/tables/tbl_keep/rows", { token: TOKENS.sessionAda, body });
        expect((await write({ amount: 5 })).status).toBe(422);
        expect(
          (await send("PUT", "/tables/tbl_keep", { teamId: "team_ops", name: "Budgets 2027", columns: null })).json
            .columns,
        ).toEqual([]);
        expect((await write({ amount: 5 })).status).toBe(201);
      });

      it("serves table rows as declared: a dropped column leaves the rows, a type change converts or is refused with 409 writing nothing", async (t) => {
        if (skip) return t.skip(skip);
        const { call, send } = await world();
        const put = (columns: unknown) =>
          send("PUT", "/tables/tbl_shape", { teamId: "team_ops", name: "Shape", columns });
        expect(
          (
            await put([
              { name: "code", type: "string" },
              { name: "note", type: "string" },
            ])
          ).status,
        ).toBe(201);
        const first = await call("POST", "/api/v1/tables/tbl_shape/rows", {
          token: TOKENS.sessionAda,
          body: { code: "12", note: "a" },
        });
        const second = await call("POST", "/api/v1/tables/tbl_shape/rows", {
          token: TOKENS.sessionAda,
          body: { code: "x7", note: "b" },
        });
        const values = async () =>
          (
            (await call("GET", "/api/v1/tables/tbl_shape/rows", { token: TOKENS.sessionAda })).json.data as Array<
              Record<string, unknown>
            >
          ).map(({ _id, _createdAt, _updatedAt, ...rest }) => rest);

        // Even with note's values let go, a value that does not convert refuses the whole change.
        const refused = await send("PUT", "/tables/tbl_shape", {
          teamId: "team_ops",
          name: "Shape",
          columns: [{ name: "code", type: "number" }],
          dropColumns: ["note"],
        });
        expect(refused.status).toBe(409);
        expect(refused.json.error).toMatchObject({
          code: "conflict",
          details: { column: "code", rowId: second.json._id, value: "x7" },
        });
        expect(await values()).toEqual([
          { code: "12", note: "a" },
          { code: "x7", note: "b" },
        ]);
        expect((await send("GET", "/tables/tbl_shape")).json.columns).toEqual([
          { name: "code", type: "string" },
          { name: "note", type: "string" },
        ]);

        // Dropping the values of `note` is said out loud (Revision 3).
        expect((await put([{ name: "code", type: "string" }])).json.error.details).toEqual({ dropColumns: ["note"] });
        const dropped = await send("PUT", "/tables/tbl_shape", {
          teamId: "team_ops",
          name: "Shape",
          columns: [{ name: "code", type: "string" }],
          dropColumns: ["note"],
        });
        expect(dropped.status).toBe(200);
        expect(await values()).toEqual([{ code: "12" }, { code: "x7" }]);
        await call("DELETE", `/api/v1/tables/tbl_shape/rows/${second.json._id}`, { token: TOKENS.sessionAda });
        expect((await put([{ name: "code", type: "number" }])).status).toBe(200);
        const [row] = (await call("GET", "/api/v1/tables/tbl_shape/rows", { token: TOKENS.sessionAda })).json.data;
        expect(row).toMatchObject({ _id: first.json._id, code: 12 });
        expect(row).not.toHaveProperty("note");
      });

      it("serves dataset rows as declared: declaring converts stored values or is refused with 409 naming the line, writing nothing", async (t) => {
        if (skip) return t.skip(skip);
        const { send, rows } = await world();
        const body = { teamId: "team_ops", name: "Shapes", type: "upload", connectionId: null, source: null };
        await send("PUT", "/datasets/ds_shape", body);
        await send("PUT", "/datasets/ds_shape/rows", [
          { n: "12", label: "a", extra: true },
          { n: "7", label: "b", extra: false },
        ]);
        const declared = await send("PUT", "/datasets/ds_shape", {
          ...body,
          columns: [
            { name: "n", type: "number" },
            { name: "label", type: "string" },
          ],
          dropColumns: ["extra"],
        });
        expect(declared.status).toBe(200);
        expect(declared.json).toMatchObject({
          rowCount: 2,
          columnsDeclared: true,
          columns: [
            { name: "n", type: "number" },
            { name: "label", type: "string" },
          ],
        });
        expect(await rows("datasets/ds_shape")).toEqual([
          { n: 12, label: "a" },
          { n: 7, label: "b" },
        ]);

        const refused = await send("PUT", "/datasets/ds_shape", {
          ...body,
          columns: [
            { name: "n", type: "number" },
            { name: "label", type: "boolean" },
          ],
        });
        expect(refused.status).toBe(409);
        expect(refused.json.error).toMatchObject({
          code: "conflict",
          details: { column: "label", line: 1, value: "a" },
        });
        expect(await rows("datasets/ds_shape")).toEqual([
          { n: 12, label: "a" },
          { n: 7, label: "b" },
        ]);
        expect((await send("GET", "/datasets/ds_shape")).json.columns).toEqual([
          { name: "n", type: "number" },
          { name: "label", type: "string" },
        ]);

        expect(
          (
            await send("PUT", "/datasets/ds_shape", {
              ...body,
              columns: [{ name: "z", type: "date" }],
              dropColumns: ["n", "label"],
            })
          ).status,
        ).toBe(200);
        expect(await rows("datasets/ds_shape")).toEqual([{}, {}]);
      });

      it("refuses ids that are not names with 422 naming $.id, never 404", async (t) => {
        if (skip) return t.skip(skip);
        const { send } = await world();
        const business = { name: "B" };
        for (const id of ["x".repeat(201), "a b", "a\r\nb", "a/b", "é"]) {
          const answer = await send("PUT", `/businesses/${encodeURIComponent(id)}`, business);
          expect(answer.status, id).toBe(422);
          expect(answer.json.error).toMatchObject({ code: "validation_failed", details: { path: "$.id" } });
        }
        if (via === "http") {
          // Over HTTP an id that cannot even be decoded, or holds NUL, is no different: 422, not 400 or 404.
          for (const raw of ["a%00b", "a%ZZb", "a%ED%A0%80b"]) {
            const answer = await send("PUT", `/businesses/${raw}`, business);
            expect([answer.status, answer.json.error.details], raw).toEqual([422, { path: "$.id" }]);
          }
          const member = await send("PUT", "/users/usr_ada/memberships/team%00x", { role: "viewer" });
          expect([member.status, member.json.error.details]).toEqual([422, { path: "$.teamId" }]);
        }
        expect((await send("PUT", `/businesses/${"x".repeat(200)}`, business)).status).toBe(201);
        expect((await send("PUT", "/businesses/biz_a-1.b:2", business)).status).toBe(201);
        const elsewhere = [
          await send("PUT", "/teams/team%20x", { name: "X", plan: "pro", businessId: null, isPersonal: false }),
          await send("PUT", "/users/usr%2Fx", { email: "x@x.test", name: "X", businessAdmin: false }),
          await send("PUT", "/users/usr%20x/memberships/team_ops", { role: "viewer" }),
          await send("PUT", "/connections/conn%20x/signing-secret", { secret: "s3cret-s3cret" }),
          await send("PUT", "/datasets/ds%0Ax", {
            teamId: "team_ops",
            name: "X",
            type: "upload",
            connectionId: null,
            source: null,
          }),
          await send("POST", "/datasets/ds%20x/rows", [{ a: 1 }]),
          await send("POST", "/datasets/ds%20x/refresh", {}),
          await send("PUT", "/tables/tbl%20x", { teamId: "team_ops", name: "X", columns: [] }),
          await send("PUT", "/dashboards/dash%20x/versions/1", { teamId: "team_ops", name: "X", published: false }),
        ];
        expect(elsewhere.map((a) => [a.status, a.json.error.details.path])).toEqual(elsewhere.map(() => [422, "$.id"]));
        const events = await send("POST", "/audit-events", [
          { id: "evt 1", teamId: "team_ops", time: "2026-11-01T11:00:00Z", category: "audit", action: "x.y" },
        ]);
        expect(events.json.error).toMatchObject({ code: "validation_failed", details: { path: "$[0].id" } });
      });

      it("refuses to re-declare the columns of a webhook dataset that holds rows (a rewrite would lose deliveries meanwhile), and writes nothing", async (t) => {
        if (skip) return t.skip(skip);
        const { api, send, rows } = await world();
        const created = await send("PUT", "/connections/conn_feed", hook({}, "Feed"));
        const endpointId = created.json.config.endpointId as string;
        const deliver = (n: number) =>
          api.fetch(
            new Request(`http://dataport.test/api/webhooks/${endpointId}`, {
              method: "POST",
              headers: { "content-type": "application/json" },
              body: JSON.stringify({ n }),
            }),
          );
        expect((await deliver(1)).status).toBe(200);
        const datasetId = "ds_conn_feed";
        const dataset = (await send("GET", `/datasets/${datasetId}`)).json;
        const redeclare = await send("PUT", `/datasets/${datasetId}`, {
          teamId: "team_ops",
          name: dataset.name,
          type: "connection",
          connectionId: "conn_feed",
          source: null,
          columns: [{ name: "n", type: "string" }],
        });
        expect([redeclare.status, redeclare.json.error.code, redeclare.json.error.details]).toEqual([
          409,
          "conflict",
          { datasetId, rowCount: 1 },
        ]);
        expect((await deliver(2)).status).toBe(200);
        expect((await rows(`datasets/${datasetId}`)).map((r: { n: number }) => r.n)).toEqual([1, 2]);
      });

      it("answers racing creates of one id with one 201 and otherwise 200", async (t) => {
        if (skip) return t.skip(skip);
        const { send } = await world();
        const version = {
          teamId: "team_ops",
          name: "Board",
          description: null,
          published: false,
          publishedAt: null,
          datasetIds: [],
        };
        const boards = await Promise.all(
          Array.from({ length: 20 }, () => send("PUT", "/dashboards/dash_race/versions/1", version)),
        );
        expect(statuses(boards)).toEqual({ 201: 1, 200: 19 });
        const versions = await Promise.all(
          [2, 3, 4].map((n) => send("PUT", `/dashboards/dash_race/versions/${n}`, version)),
        );
        expect(versions.map((a) => a.status)).toEqual([201, 201, 201]);
        expect(
          (await send("GET", "/dashboards/dash_race")).json.versions.map((v: { version: number }) => v.version),
        ).toEqual([1, 2, 3, 4]);

        const hooks = await Promise.all(
          Array.from({ length: 10 }, () =>
            send("PUT", "/connections/conn_race", hook({ signingSecret: "s3cret-s3cret" })),
          ),
        );
        expect(statuses(hooks)).toEqual({ 201: 1, 200: 9 });
        expect(new Set(hooks.map((a) => a.json.config.endpointId)).size).toBe(1);
        const shared = { endpointId: "whk_shared_endpoint_1" };
        const taken = await Promise.all(
          ["conn_one", "conn_two"].map((id) => send("PUT", `/connections/${id}`, hook(shared))),
        );
        expect(statuses(taken)).toEqual({ 201: 1, 422: 1 });
        expect(taken.find((a) => a.status === 422)!.json.error.details).toEqual({ path: "$.config.endpointId" });
      });

      it.runIf(kind.name !== "memory")("answers racing webhook creates from two instances with one 201", async (t) => {
        if (skip) return t.skip(skip);
        const { send, again } = await world();
        const other = createDataApi({ storage: await again!(), clock: createFixedClock(NOW), adminToken: ADMIN_TOKEN });
        const sendOther = via === "http" ? httpAdmin(other) : functionAdmin(createAdmin(other));
        const body = hook({ retainRows: 10 });
        const answers = await Promise.all(
          Array.from({ length: 8 }, (_, i) => (i % 2 === 0 ? send : sendOther)("PUT", "/connections/conn_twice", body)),
        );
        expect(statuses(answers)).toEqual({ 201: 1, 200: 7 });
      });

      it.runIf(kind.name !== "memory")(
        "answers racing dashboard-version creates from two instances with one 201 and keeps every racing version",
        async (t) => {
          if (skip) return t.skip(skip);
          const { send, again } = await world();
          const other = createDataApi({
            storage: await again!(),
            clock: createFixedClock(NOW),
            adminToken: ADMIN_TOKEN,
          });
          const sendOther = via === "http" ? httpAdmin(other) : functionAdmin(createAdmin(other));
          const version = {
            teamId: "team_ops",
            name: "Board",
            description: null,
            published: false,
            publishedAt: null,
            datasetIds: [],
          };
          const one = await Promise.all(
            Array.from({ length: 20 }, (_, i) =>
              (i % 2 === 0 ? send : sendOther)("PUT", "/dashboards/dash_twice/versions/1", version),
            ),
          );
          expect(statuses(one)).toEqual({ 201: 1, 200: 19 });
          const many = await Promise.all(
            [2, 3, 4, 5, 6, 7].map((n) =>
              (n % 2 === 0 ? send : sendOther)("PUT", `/dashboards/dash_twice/versions/${n}`, version),
            ),
          );
          expect(many.map((a) => a.status)).toEqual([201, 201, 201, 201, 201, 201]);
          expect(
            (await sendOther("GET", "/dashboards/dash_twice")).json.versions.map((v: { version: number }) => v.version),
          ).toEqual([1, 2, 3, 4, 5, 6, 7]);
        },
      );

      it("never lets a deleted user's keys reach the business audit feed again, even when the id is created again", async (t) => {
        if (skip) return t.skip(skip);
        const { call, send } = await world();
        const boss = { email: "boss@northwind.test", name: "Boss", businessAdmin: true };
        await send("PUT", "/users/usr_boss", boss);
        await send("PUT", "/users/usr_boss/memberships/team_ops", { role: "admin" });
        const newKey = async () =>
          (
            await send("POST", "/teams/team_ops/api-keys", {
              name: "Feed",
              scopes: ["data:read", "audit:read"],
              allowlist: {},
              createdBy: "usr_boss",
            })
          ).json.token as string;
        const token = await newKey();
        const feed = (key: string) => call("GET", "/api/v1/audit?limit=1", { token: key });
        expect((await feed(token)).status).toBe(200);

        expect((await send("DELETE", "/users/usr_boss")).status).toBe(204);
        expect((await call("GET", "/api/v1/me", { token })).status).toBe(200);
        expect((await feed(token)).status).toBe(403);
        expect((await send("PUT", "/users/usr_boss", boss)).status).toBe(201);
        expect((await feed(token)).status).toBe(403);
        // The new user of that id is someone else: a key it creates reaches the feed.
        expect((await feed(await newKey())).status).toBe(200);
      });
    });
  }
}

/** How many answers had each status. */
function statuses(answers: ReadonlyArray<{ status: number }>): Record<number, number> {
  const counts: Record<number, number> = {};
  for (const { status } of answers) counts[status] = (counts[status] ?? 0) + 1;
  return counts;
}
