import { readdirSync, readFileSync } from "node:fs";
import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createHostApp, type HostApp } from "../examples/host/app.js";
import { hostIdentity } from "../examples/host/identity.js";
import { ensureHostSchema } from "../examples/host/schema.js";
import { createAdmin } from "../src/admin/index.js";
import { mountStorage } from "../src/index.js";
import { createMemoryStorage } from "../src/memory/memory-storage.js";
import { describeIdentityConformance } from "../src/testing/index.js";
import { dropSchemas, POSTGRES_URL, postgresSkipReason, testSchema } from "./support/services.js";

const skip = await postgresSkipReason();

describe("examples/host as a host copies it out", () => {
  it("imports Dataport by its package name, and nothing outside its own folder", () => {
    const dir = new URL("../examples/host/", import.meta.url);
    const files = readdirSync(dir).filter((name) => name.endsWith(".ts"));
    expect(files.length).toBeGreaterThan(3);
    const imports = files.flatMap((name) =>
      [...readFileSync(new URL(name, dir), "utf8").matchAll(/from "([^"]+)"/g)].map((m) => m[1]!),
    );
    expect(imports.filter((specifier) => specifier.startsWith("../"))).toEqual([]);
    expect(imports.filter((specifier) => specifier.startsWith("dataport")).sort()).toEqual([
      "dataport",
      "dataport",
      "dataport",
      "dataport/node",
      "dataport/postgres",
    ]);
  });
});

describe.skipIf(!!skip)("examples/host: a host's own users, teams and sign-in in front of Dataport", () => {
  const schemas: string[] = [];
  const hostSchema = testSchema("host_app");
  const dataportSchema = testSchema("host_dp");
  let host: HostApp;
  let server: Server;
  let base: string;
  let sql: pg.Pool;

  beforeAll(async () => {
    schemas.push(hostSchema, dataportSchema);
    host = await createHostApp({ connectionString: POSTGRES_URL, hostSchema, dataportSchema });
    server = host.app.listen(0, "127.0.0.1");
    await new Promise<void>((resolve) => server.once("listening", () => resolve()));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    sql = new pg.Pool({ connectionString: POSTGRES_URL, max: 2 });
  });

  afterAll(async () => {
    await new Promise((resolve) => server?.close(resolve));
    await host?.close();
    await sql?.end();
    await dropSchemas(schemas);
  });

  /** Rows straight into the host's tables, as the host's own code would write them. */
  async function insertUserInTeam(n: string, plan = "pro") {
    const user = { id: `usr_${n}`, email: `${n}@host.test` };
    const team = { id: `team_${n}`, name: `Team ${n}` };
    await sql.query(`insert into "${hostSchema}".users (id, email, name) values ($1, $2, $3)`, [
      user.id,
      user.email,
      `User ${n}`,
    ]);
    await sql.query(`insert into "${hostSchema}".teams (id, name, plan) values ($1, $2, $3)`, [
      team.id,
      team.name,
      plan,
    ]);
    await sql.query(`insert into "${hostSchema}".memberships (user_id, team_id, role) values ($1, $2, 'owner')`, [
      user.id,
      team.id,
    ]);
    return { user, team };
  }

  async function signIn(email: string): Promise<string> {
    const res = await fetch(`${base}/signin`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ email }),
    });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { token: string; userId: string };
    expect(body.token).toMatch(/^[A-Za-z0-9_-]{43}$/);
    return body.token;
  }

  const get = (path: string, token: string) =>
    fetch(`${base}/api/v1${path}`, { headers: { authorization: `Bearer ${token}` } });
  const errorCode = async (res: Response) => ((await res.json()) as { error: { code: string } }).error.code;

  it("a user inserted into the host's tables signs in and sees its team on /me at once; a removed membership is 404 at once", async () => {
    const { user, team } = await insertUserInTeam("ada");
    const token = await signIn("ADA@host.test");
    // Only the token's hash is kept in the host's table.
    const stored = await sql.query(`select token_hash, user_id from "${hostSchema}".sessions where user_id = $1`, [
      user.id,
    ]);
    expect(stored.rows).toEqual([{ token_hash: expect.stringMatching(/^[0-9a-f]{64}$/), user_id: user.id }]);
    expect(JSON.stringify(stored.rows)).not.toContain(token);

    const me = await get("/me", token);
    expect(me.status).toBe(200);
    expect(await me.json()).toEqual({
      kind: "session-token",
      teams: [{ id: team.id, name: "Team ada", isPersonal: false, role: "owner" }],
    });

    // A dataset in Dataport's own store, listed for the host's team.
    const webhook = await createAdmin(host.api).createWebhookConnection({ teamId: team.id, name: "Orders feed" });
    const datasets = await get(`/datasets?teamId=${team.id}`, token);
    expect(datasets.status).toBe(200);
    expect(((await datasets.json()) as { datasets: Array<{ id: string }> }).datasets.map((d) => d.id)).toEqual([
      webhook.datasetId,
    ]);

    // The host renames the team and removes the membership in its own table: the next calls see both.
    await sql.query(`update "${hostSchema}".teams set name = 'Renamed' where id = $1`, [team.id]);
    expect(((await (await get("/me", token)).json()) as { teams: Array<{ name: string }> }).teams[0]?.name).toBe(
      "Renamed",
    );
    await sql.query(`delete from "${hostSchema}".memberships where user_id = $1 and team_id = $2`, [user.id, team.id]);
    const gone = await get(`/datasets?teamId=${team.id}`, token);
    expect(gone.status).toBe(404);
    expect(await errorCode(gone)).toBe("not_found");
    expect(await (await get("/me", token)).json()).toEqual({ kind: "session-token", teams: [] });
  });

  it("a team moved to the free plan in the host's table refuses its API key at once (403 plan_required)", async () => {
    const { user, team } = await insertUserInTeam("bob");
    const { token } = await createAdmin(host.api).createApiKey({
      teamId: team.id,
      name: "Sync",
      createdBy: user.id,
      scopes: ["data:read"],
    });
    // The key lives in Dataport's schema, not in the host's.
    const keys = await sql.query(`select team_id from "${dataportSchema}".api_keys`);
    expect(keys.rows).toEqual([{ team_id: team.id }]);

    expect((await get("/me", token)).status).toBe(200);
    await sql.query(`update "${hostSchema}".teams set plan = 'free' where id = $1`, [team.id]);
    const refused = await get("/me", token);
    expect(refused.status).toBe(403);
    expect(await errorCode(refused)).toBe("plan_required");
    await sql.query(`update "${hostSchema}".teams set plan = 'team' where id = $1`, [team.id]);
    expect((await get("/me", token)).status).toBe(200);
  });

  it("sessions end when the host says so: sign-out, expiry, a deleted user", async () => {
    const { user } = await insertUserInTeam("cy");
    const signedOut = await signIn("cy@host.test");
    const out = await fetch(`${base}/signout`, { method: "POST", headers: { authorization: `Bearer ${signedOut}` } });
    expect(out.status).toBe(204);
    expect((await get("/me", signedOut)).status).toBe(401);

    const expired = await signIn("cy@host.test");
    await sql.query(`update "${hostSchema}".sessions set expires_at = now() - interval '1 second' where user_id = $1`, [
      user.id,
    ]);
    expect((await get("/me", expired)).status).toBe(401);

    const deleted = await signIn("cy@host.test");
    expect((await get("/me", deleted)).status).toBe(200);
    await sql.query(`delete from "${hostSchema}".users where id = $1`, [user.id]);
    const res = await get("/me", deleted);
    expect(res.status).toBe(401);
    expect(await errorCode(res)).toBe("unauthorized");
  });

  it("sign-in refuses unknown and ambiguous emails and malformed bodies with a 4xx envelope", async () => {
    const post = (body: string) =>
      fetch(`${base}/signin`, { method: "POST", headers: { "content-type": "application/json" }, body });
    const unknown = await post(JSON.stringify({ email: "nobody@host.test" }));
    expect(unknown.status).toBe(401);
    expect(await errorCode(unknown)).toBe("unauthorized");
    const missing = await post("{}");
    expect(missing.status).toBe(400);
    expect(await errorCode(missing)).toBe("invalid_body");
    const malformed = await post("{not json");
    expect(malformed.status).toBe(400);
    expect(await errorCode(malformed)).toBe("invalid_body");
    await sql.query(
      `insert into "${hostSchema}".users (id, email, name) values ('usr_d1', 'dup@host.test', 'D1'), ('usr_d2', 'Dup@host.test', 'D2')`,
    );
    expect((await post(JSON.stringify({ email: "dup@host.test" }))).status).toBe(401);
    // Requests outside /api/ are the host's; Dataport answers only under it.
    expect(await (await fetch(`${base}/`)).text()).toContain("POST /signin");
  });

  it("Dataport's admin functions for teams, users and memberships write the host's tables", async () => {
    const admin = createAdmin(host.api);
    await admin.putTeam("team_adm", { name: "Made by admin", plan: "pro", businessId: null, isPersonal: false });
    await admin.putUser("usr_adm", { email: "adm@host.test", name: "Adm", businessAdmin: false });
    await admin.putMembership("usr_adm", "team_adm", { role: "editor" });
    const rows = await sql.query(
      `select u.email, t.name, t.plan, m.role from "${hostSchema}".memberships m
       join "${hostSchema}".users u on u.id = m.user_id join "${hostSchema}".teams t on t.id = m.team_id where m.user_id = 'usr_adm'`,
    );
    expect(rows.rows).toEqual([{ email: "adm@host.test", name: "Made by admin", plan: "pro", role: "editor" }]);
    const token = await signIn("adm@host.test");
    expect(await (await get("/me", token)).json()).toEqual({
      kind: "session-token",
      teams: [{ id: "team_adm", name: "Made by admin", isPersonal: false, role: "editor" }],
    });
    await admin.deleteTeam("team_adm");
    expect((await sql.query(`select 1 from "${hostSchema}".teams where id = 'team_adm'`)).rowCount).toBe(0);
    expect(await (await get("/me", token)).json()).toEqual({ kind: "session-token", teams: [] });
  });

  it("the identity area writes to the host's tables and lists them in binary id order", async () => {
    const identity = hostIdentity(sql, hostSchema);
    expect(await identity.putBusiness({ id: "biz_w", name: "W" })).toBe("created");
    expect(await identity.putBusiness({ id: "biz_w", name: "W2" })).toBe("updated");
    for (const id of ["tw_b", "tw_B", "tw_a"]) {
      expect(await identity.putTeam({ id, name: id, plan: "business", businessId: "biz_w", isPersonal: false })).toBe(
        "created",
      );
    }
    expect((await identity.listBusinessTeams("biz_w")).map((t) => t.id)).toEqual(["tw_B", "tw_a", "tw_b"]);
    expect((await identity.listTeams({ after: "tw_B", limit: 1 })).map((t) => t.id)).toEqual(["tw_a"]);
    expect(await identity.putUser({ id: "usr_w", email: "w@host.test", name: "W", businessAdmin: true })).toBe(
      "created",
    );
    expect(await identity.putMembership({ userId: "usr_w", teamId: "tw_b", role: "viewer" })).toBe("created");
    expect(await identity.putMembership({ userId: "usr_w", teamId: "tw_B", role: "editor" })).toBe("created");
    expect(await identity.putMembership({ userId: "usr_w", teamId: "tw_b", role: "admin" })).toBe("updated");
    expect(await identity.listMemberships("usr_w")).toEqual([
      { userId: "usr_w", teamId: "tw_B", role: "editor" },
      { userId: "usr_w", teamId: "tw_b", role: "admin" },
    ]);
    expect(await identity.deleteTeam("tw_b")).toBe(true);
    expect(await identity.listMemberships("usr_w")).toEqual([{ userId: "usr_w", teamId: "tw_B", role: "editor" }]);
    expect(await identity.deleteTeam("tw_b")).toBe(false);
    expect(await identity.deleteMembership("usr_w", "tw_B")).toBe(true);
    expect(await identity.deleteMembership("usr_w", "tw_B")).toBe(false);
    expect(await identity.deleteUser("usr_w")).toBe(true);
    expect(await identity.getUser("usr_w")).toBeNull();
    expect(await identity.getBusiness("biz_w")).toEqual({ id: "biz_w", name: "W2" });
  });
});

// Dataport's identity suite on the host's tables: a fresh host schema per store, everything else in memory.
describe.skipIf(!!skip)("examples/host: hostIdentity passes the identity conformance suite", () => {
  const schemas: string[] = [];
  const pool = new pg.Pool({ connectionString: POSTGRES_URL, max: 4 });
  afterAll(async () => {
    await pool.end();
    await dropSchemas(schemas);
  });
  describeIdentityConformance("hostIdentity", async () => {
    const schema = testSchema("host_conf");
    schemas.push(schema);
    await ensureHostSchema(pool, schema);
    return mountStorage(createMemoryStorage(), { identity: hostIdentity(pool, schema) });
  });
});
