import type { StandardSchemaV1 } from "@standard-schema/spec";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { createAdmin } from "../src/admin/index.js";
import type { DataApiOptions } from "../src/server/api.js";
import { ApiError } from "../src/base/api-error.js";
import type { MemoryStorage } from "../src/memory/memory-storage.js";
import { NOW, setup } from "./support/api.js";
import { TOKENS, testFixture } from "./support/fixture.js";

const READER = "dp_test_reader_000000000000000";
const OTHER = "dp_test_other_0000000000000000";
const ROW_1 = {
  _id: "row_1",
  region: "EMEA",
  target: 120000,
  _createdAt: "2026-10-01T00:00:00Z",
  _updatedAt: "2026-10-01T00:00:00Z",
};

/** The base fixture plus an any-shape table, a table outside the key's allowlist, another team's table and two keys. */
function tablesFixture() {
  const fixture = testFixture();
  const table = (id: string, teamId: string, name: string) => ({
    id,
    teamId,
    name,
    columns: [],
    rows: [],
    updatedAt: "2026-10-01T00:00:00Z",
  });
  (fixture.tables as object[]).push(
    table("tbl_notes", "team_ops", "Notes"),
    table("tbl_hidden", "team_ops", "Hidden"),
    table("tbl_mkt", "team_mkt", "Plans"),
  );
  (fixture.apiKeys[0]!.allowlist.tables as string[]).push("tbl_notes");
  const key = (id: string, name: string, token: string, scopes: string[]) => ({
    id,
    name,
    teamId: "team_ops",
    token,
    createdBy: "usr_ada",
    scopes,
    allowlist: { datasets: [], connections: [], tables: ["tbl_targets", "tbl_notes"] },
    createdAt: "2026-10-01T09:00:00Z",
    revokedAt: null,
  });
  (fixture.apiKeys as object[]).push(
    key("key_reader", "Reader", READER, ["data:read"]),
    key("key_other", "Other writer", OTHER, ["data:read", "tables:write"]),
  );
  return fixture;
}

async function tables(options: DataApiOptions = {}) {
  const env = await setup({ fixture: tablesFixture(), ...options });
  const storage = env.storage as MemoryStorage;
  const admin = createAdmin(env.api);
  const post = (table: string, body: unknown, init: { token?: string; key?: string } = {}) =>
    env.call("POST", `/api/v1/tables/${table}/rows`, {
      token: init.token ?? TOKENS.sync,
      body,
      headers: init.key === undefined ? {} : { "idempotency-key": init.key },
    });
  const patch = (table: string, rowId: string, body: unknown, token: string = TOKENS.sync) =>
    env.call("PATCH", `/api/v1/tables/${table}/rows/${rowId}`, { token, body });
  const rows = async (table: string) =>
    (await env.call("GET", `/api/v1/tables/${table}/rows?limit=1000`, { token: TOKENS.sync })).json.data;
  return { ...env, storage, admin, post, patch, rows };
}

const at = (ms: number) => new Date(Date.parse(NOW) + ms).toISOString();

describe("GET /tables/{id}/rows", () => {
  it("returns stored rows with the reserved fields and the documented metadata", async () => {
    const { call } = await tables();
    const res = await call("GET", "/api/v1/tables/tbl_targets/rows", { token: TOKENS.sync });
    expect(res.status).toBe(200);
    expect(res.json).toEqual({
      success: true,
      data: [ROW_1],
      metadata: {
        tableId: "tbl_targets",
        tableName: "Quarterly targets",
        totalRows: 1,
        returnedRows: 1,
        offset: 0,
        hasMore: false,
        columns: ["region", "target"],
        nextCursor: null,
        changesCursor: expect.stringMatching(/^[\w-]+\.[0-9a-f]+$/),
      },
    });
  });

  it("pages with limit and offset in creation order", async () => {
    const { call, post } = await tables();
    for (const region of ["AMER", "APAC", "LATAM"]) expect((await post("tbl_targets", { region })).status).toBe(201);
    const page = await call("GET", "/api/v1/tables/tbl_targets/rows?limit=2&offset=1", { token: TOKENS.sync });
    expect(page.json.data.map((r: { region: string }) => r.region)).toEqual(["AMER", "APAC"]);
    expect(page.json.metadata).toMatchObject({ totalRows: 4, returnedRows: 2, offset: 1, hasMore: true });
    const last = await call("GET", "/api/v1/tables/tbl_targets/rows?offset=3", { token: TOKENS.sync });
    expect(last.json.metadata).toMatchObject({ totalRows: 4, returnedRows: 1, offset: 3, hasMore: false });
  });

  it("refuses limit outside 1..1000 and a negative offset with 400 naming the parameter", async () => {
    const { call } = await tables();
    for (const [query, parameter] of [
      ["limit=0", "limit"],
      ["limit=1001", "limit"],
      ["limit=ten", "limit"],
      ["offset=-1", "offset"],
    ] as const) {
      const res = await call("GET", `/api/v1/tables/tbl_targets/rows?${query}`, { token: TOKENS.sync });
      expect(res.status).toBe(400);
      expect(res.json.error).toMatchObject({ code: "invalid_parameter", details: { parameter } });
    }
    expect((await call("GET", "/api/v1/tables/tbl_targets/rows?limit=1000", { token: TOKENS.sync })).status).toBe(200);
  });

  it("lists the fields of the returned rows as columns when the table declares none", async () => {
    const { call, post } = await tables();
    await post("tbl_notes", { title: "a", tags: ["x"] });
    await post("tbl_notes", { body: "b", title: "c" });
    const res = await call("GET", "/api/v1/tables/tbl_notes/rows", { token: TOKENS.sync });
    expect(res.json.metadata.columns).toEqual(["title", "tags", "body"]);
  });

  it("needs data:read, and answers an unknown, unlisted or other team's table with the same 404", async () => {
    const { call } = await tables();
    const noScope = await call("GET", "/api/v1/tables/tbl_targets/rows", { token: TOKENS.readOnly });
    expect(noScope.status).toBe(403);
    expect(noScope.json.error).toMatchObject({ code: "insufficient_scope", details: { required: "data:read" } });
    const bodies = [];
    for (const id of ["tbl_nope", "tbl_hidden", "tbl_mkt"]) {
      const res = await call("GET", `/api/v1/tables/${id}/rows`, { token: TOKENS.sync });
      expect(res.status).toBe(404);
      bodies.push({ ...res.json.error, requestId: null });
    }
    expect(new Set(bodies.map((b) => JSON.stringify(b))).size).toBe(1);
    expect(bodies[0]).toMatchObject({ code: "not_found", message: "table not found" });
  });

  it("lets a session read the tables of its teams only", async () => {
    const { call } = await tables();
    expect((await call("GET", "/api/v1/tables/tbl_hidden/rows", { token: TOKENS.sessionAda })).status).toBe(200);
    expect((await call("GET", "/api/v1/tables/tbl_targets/rows", { token: TOKENS.sessionBob })).status).toBe(404);
    expect((await call("GET", "/api/v1/tables/tbl_mkt/rows", { token: TOKENS.sessionBob })).status).toBe(200);
  });
});

describe("POST /tables/{id}/rows", () => {
  it("answers 201 with the stored row and keeps it", async () => {
    const { post, rows, call } = await tables();
    const res = await post("tbl_targets", { region: "AMER", target: 5 });
    expect(res.status).toBe(201);
    expect(res.json).toEqual({
      _id: expect.stringMatching(/^row_[0-9A-Za-z]{20}$/),
      region: "AMER",
      target: 5,
      _createdAt: NOW,
      _updatedAt: NOW,
    });
    expect(Object.keys(res.json)).toEqual(["_id", "region", "target", "_createdAt", "_updatedAt"]);
    expect(await rows("tbl_targets")).toEqual([ROW_1, res.json]);
    const dataset = await call("GET", "/api/v1/datasets/tbl_targets", { token: TOKENS.sync });
    expect(dataset.json).toMatchObject({ rowCount: 2, updatedAt: NOW });
  });

  it("needs tables:write", async () => {
    const { post, rows } = await tables();
    const res = await post("tbl_targets", { region: "AMER" }, { token: READER });
    expect(res.status).toBe(403);
    expect(res.json.error).toMatchObject({ code: "insufficient_scope", details: { required: "tables:write" } });
    expect(await rows("tbl_targets")).toHaveLength(1);
  });

  it("404s a table outside the key's allowlist or team, and a session outside the team", async () => {
    const { post, call } = await tables();
    for (const id of ["tbl_hidden", "tbl_mkt", "tbl_nope"]) {
      const res = await post(id, { a: 1 });
      expect(res.status).toBe(404);
      expect(res.json.error.code).toBe("not_found");
    }
    expect((await post("tbl_targets", { region: "X" }, { token: TOKENS.sessionBob })).status).toBe(404);
    expect((await post("tbl_hidden", { a: 1 }, { token: TOKENS.sessionAda })).status).toBe(201);
    expect(
      (await call("GET", "/api/v1/tables/tbl_hidden/rows", { token: TOKENS.sessionAda })).json.metadata.totalRows,
    ).toBe(1);
  });

  it("refuses a non-JSON content type (415), bad JSON or a non-object (400) and an oversized body (413)", async () => {
    const { call, rows } = await tables({ maxBodyBytes: 64 });
    const url = "/api/v1/tables/tbl_targets/rows";
    const form = await call("POST", url, {
      token: TOKENS.sync,
      body: "region=EMEA",
      headers: { "content-type": "application/x-www-form-urlencoded" },
    });
    expect([form.status, form.json.error.code]).toEqual([415, "unsupported_media_type"]);
    const broken = await call("POST", url, { token: TOKENS.sync, body: "{not json" });
    expect([broken.status, broken.json.error.code]).toEqual([400, "invalid_body"]);
    const array = await call("POST", url, { token: TOKENS.sync, body: [{ region: "EMEA" }] });
    expect([array.status, array.json.error.code]).toEqual([400, "invalid_body"]);
    const big = await call("POST", url, { token: TOKENS.sync, body: { region: "x".repeat(100) } });
    expect([big.status, big.json.error.code]).toEqual([413, "payload_too_large"]);
    expect(await rows("tbl_targets")).toHaveLength(1);
  });
});

describe("column validation", () => {
  it("refuses an undeclared column with exactly the spec's 422 body", async () => {
    const { post, rows, admin } = await tables();
    const res = await post("tbl_targets", { region: "EMEA", colour: "red" });
    expect(res.status).toBe(422);
    expect(res.json).toEqual({
      error: {
        code: "validation_failed",
        message: 'unknown column "colour"; the table declares "region", "target"',
        details: { unknownColumns: ["colour"], declaredColumns: ["region", "target"] },
        requestId: res.headers.get("x-request-id"),
      },
    });
    expect(await rows("tbl_targets")).toHaveLength(1);
    expect(await admin.tableEditLog("tbl_targets")).toEqual([]);
  });

  it("refuses a value of the wrong type for its declared column; null fits any column", async () => {
    const { post, patch } = await tables();
    const res = await post("tbl_targets", { region: 7, target: "lots" });
    expect(res.status).toBe(422);
    expect(res.json.error).toMatchObject({
      code: "validation_failed",
      message: 'invalid value for columns "region", "target": expected a string value or null',
      details: {
        invalidColumns: ["region", "target"],
        issues: [
          { column: "region", path: [], message: "expected a string value or null" },
          { column: "target", path: [], message: "expected a number value or null" },
        ],
      },
    });
    expect((await post("tbl_targets", { region: null, target: null })).status).toBe(201);
    const wrongPatch = await patch("tbl_targets", "row_1", { target: { amount: 1 } });
    expect(wrongPatch.status).toBe(422);
    expect(wrongPatch.json.error.details.invalidColumns).toEqual(["target"]);
  });

  it("refuses _-prefixed fields on POST and PATCH", async () => {
    const { post, patch } = await tables();
    for (const res of [
      await post("tbl_notes", { _id: "mine", title: "x" }),
      await post("tbl_notes", { _note: "mine" }),
      await post("tbl_targets", { _updatedAt: "2030-01-01T00:00:00Z" }),
      await patch("tbl_targets", "row_1", { _createdAt: NOW }),
    ]) {
      expect(res.status).toBe(422);
      expect(res.json.error.code).toBe("validation_failed");
      expect(res.json.error.message).toMatch(/^"_\w+" is reserved/);
      expect(res.json.error.details.reservedColumns).toHaveLength(1);
    }
  });

  it("lets a table without declared columns take any shape", async () => {
    const { post } = await tables();
    const res = await post("tbl_notes", {
      title: "Plan",
      nested: { a: [1, { b: true }] },
      n: 1.5,
      flag: false,
      none: null,
    });
    expect(res.status).toBe(201);
    expect(res.json).toMatchObject({ title: "Plan", nested: { a: [1, { b: true }] }, n: 1.5, flag: false, none: null });
    const dunder = await post("tbl_notes", { __meta: 1 });
    expect([dunder.status, dunder.json.__meta]).toEqual([201, 1]);
  });

  it("treats __proto__ and constructor as ordinary column names that never touch a prototype", async () => {
    const { post, call, rows } = await tables();
    const payload = '{"__proto__":{"polluted":"yes"},"constructor":{"prototype":{"polluted":"yes"}},"title":"x"}';
    const declared = await call("POST", "/api/v1/tables/tbl_targets/rows", { token: TOKENS.sync, body: payload });
    expect(declared.status).toBe(422);
    expect(declared.json.error.details).toEqual({
      unknownColumns: ["__proto__", "constructor", "title"],
      declaredColumns: ["region", "target"],
    });

    const open = await call("POST", "/api/v1/tables/tbl_notes/rows", { token: TOKENS.sync, body: payload });
    expect(open.status).toBe(201);
    expect(open.text).toContain('"__proto__":{"polluted":"yes"}');
    expect(Object.keys(open.json)).toEqual(["_id", "__proto__", "constructor", "title", "_createdAt", "_updatedAt"]);
    const patched = await call("PATCH", `/api/v1/tables/tbl_notes/rows/${open.json._id}`, {
      token: TOKENS.sync,
      body: '{"__proto__":{"polluted":"again"}}',
    });
    expect(patched.status).toBe(200);
    const [stored] = await rows("tbl_notes");
    expect(Object.hasOwn(stored, "__proto__")).toBe(true);
    expect(Object.getOwnPropertyDescriptor(stored, "__proto__")?.value).toEqual({ polluted: "again" });
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    expect((Object.prototype as Record<string, unknown>).polluted).toBeUndefined();
    await post("tbl_notes", { other: 1 });
    expect(await call("GET", "/api/v1/tables/constructor/rows", { token: TOKENS.sync })).toMatchObject({ status: 404 });
  });
});

describe("host-supplied Standard Schema validators", () => {
  const tableSchemas = {
    tbl_targets: {
      columns: {
        target: z.number().int().min(0, "target must not be negative"),
        region: z.enum(["EMEA", "AMER", "APAC"]),
      },
      row: z.object({ region: z.string(), target: z.number().nullable().optional() }),
    },
  };

  it("answers a column validator's issues with 422 invalidColumns and issues", async () => {
    const { post, rows } = await tables({ tableSchemas });
    const res = await post("tbl_targets", { region: "EMEA", target: -5 });
    expect(res.status).toBe(422);
    expect(res.json.error).toMatchObject({
      code: "validation_failed",
      message: 'invalid value for column "target": target must not be negative',
      details: {
        invalidColumns: ["target"],
        issues: [{ column: "target", path: [], message: "target must not be negative" }],
      },
    });
    expect(await rows("tbl_targets")).toHaveLength(1);
    expect((await post("tbl_targets", { region: "APAC", target: 10 })).status).toBe(201);
  });

  it("runs a row validator on the row as stored, the merged row on PATCH", async () => {
    const { post, patch } = await tables({ tableSchemas });
    const missing = await post("tbl_targets", { target: 3 });
    expect(missing.status).toBe(422);
    expect(missing.json.error.details).toEqual({
      invalidColumns: ["region"],
      issues: [{ column: "region", path: [], message: expect.any(String) }],
    });
    // The stored row_1 has a region, so a PATCH of target alone passes the row validator.
    const ok = await patch("tbl_targets", "row_1", { target: 7 });
    expect(ok.status).toBe(200);
    expect(ok.json).toMatchObject({ region: "EMEA", target: 7 });
    const cleared = await patch("tbl_targets", "row_1", { region: null });
    expect(cleared.status).toBe(422);
    expect(cleared.json.error.details.invalidColumns).toEqual(["region"]);
  });

  it("accepts any Standard Schema implementation, async and with path segments", async () => {
    const budget: StandardSchemaV1 = {
      "~standard": {
        version: 1,
        vendor: "handmade",
        async validate(value) {
          const row = value as { target?: number; region?: string };
          if (row.region === "EMEA" && (row.target ?? 0) > 1_000_000) {
            return {
              issues: [{ message: "EMEA targets are capped", path: [{ key: "target" }] }, { message: "ask finance" }],
            };
          }
          return { value };
        },
      },
    };
    const { post } = await tables({ tableSchemas: { tbl_targets: { row: budget } } });
    const res = await post("tbl_targets", { region: "EMEA", target: 2_000_000 });
    expect(res.status).toBe(422);
    expect(res.json.error).toMatchObject({
      message: 'invalid value for column "target": EMEA targets are capped',
      details: {
        invalidColumns: ["target"],
        issues: [
          { column: "target", path: [], message: "EMEA targets are capped" },
          { path: [], message: "ask finance" },
        ],
      },
    });
    expect((await post("tbl_targets", { region: "EMEA", target: 10 })).status).toBe(201);
  });

  it("leaves tables the options do not name alone", async () => {
    const { post } = await tables({ tableSchemas });
    expect((await post("tbl_notes", { anything: -1 })).status).toBe(201);
  });
});

describe("PATCH /tables/{id}/rows/{rowId}", () => {
  it("changes the named columns, keeps the rest and advances _updatedAt strictly, even in one millisecond", async () => {
    const { patch, clock } = await tables();
    const first = await patch("tbl_targets", "row_1", { target: 1 });
    expect(first.status).toBe(200);
    expect(first.json).toEqual({ ...ROW_1, target: 1, _updatedAt: NOW });
    const second = await patch("tbl_targets", "row_1", { target: 2 });
    const third = await patch("tbl_targets", "row_1", { region: "AMER" });
    expect([second.json._updatedAt, third.json._updatedAt]).toEqual([at(1), at(2)]);
    expect(third.json).toMatchObject({ region: "AMER", target: 2, _createdAt: ROW_1._createdAt });
    clock.advance(1000);
    expect((await patch("tbl_targets", "row_1", { target: 3 })).json._updatedAt).toBe(at(1000));
  });

  it("refuses a stale expectedUpdatedAt with 409 and the current row; an up-to-date one applies", async () => {
    const { patch, rows } = await tables();
    const moved = await patch("tbl_targets", "row_1", { target: 10 });
    const stale = await patch("tbl_targets", "row_1", { target: 20, expectedUpdatedAt: ROW_1._updatedAt });
    expect(stale.status).toBe(409);
    expect(stale.json.error).toMatchObject({ code: "conflict", details: { current: moved.json } });
    expect((await rows("tbl_targets"))[0].target).toBe(10);
    const fresh = await patch("tbl_targets", "row_1", { target: 30, expectedUpdatedAt: moved.json._updatedAt });
    expect(fresh.status).toBe(200);
    expect(fresh.json).toMatchObject({ target: 30, _updatedAt: at(1) });
    // The same instant spelled differently is not a change.
    const spelled = await patch("tbl_targets", "row_1", {
      target: 40,
      expectedUpdatedAt: "2026-11-01T13:00:00.001+01:00",
    });
    expect(spelled.status).toBe(200);
  });

  it("is last-write-wins without expectedUpdatedAt", async () => {
    const { patch } = await tables();
    const results = await Promise.all([1, 2, 3].map((target) => patch("tbl_targets", "row_1", { target })));
    expect(results.map((r) => r.status)).toEqual([200, 200, 200]);
    expect(new Set(results.map((r) => r.json._updatedAt)).size).toBe(3);
  });

  it("lets exactly one of 20 concurrent PATCHes with one expectedUpdatedAt succeed; the rest are 409", async () => {
    const { patch, rows, admin } = await tables();
    const results = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        patch("tbl_targets", "row_1", { target: i, expectedUpdatedAt: ROW_1._updatedAt }),
      ),
    );
    const ok = results.filter((r) => r.status === 200);
    const conflicts = results.filter((r) => r.status === 409);
    expect(ok).toHaveLength(1);
    expect(conflicts).toHaveLength(19);
    for (const c of conflicts)
      expect(c.json.error).toMatchObject({ code: "conflict", details: { current: ok[0]!.json } });
    expect((await rows("tbl_targets"))[0]).toEqual(ok[0]!.json);
    expect((await admin.tableEditLog("tbl_targets")).filter((e) => e.op === "update")).toHaveLength(1);
  });

  it("refuses an expectedUpdatedAt that is not a timestamp with 422, and 404s an unknown row", async () => {
    const { patch } = await tables();
    const bad = await patch("tbl_targets", "row_1", { target: 1, expectedUpdatedAt: "yesterday" });
    expect(bad.status).toBe(422);
    expect(bad.json.error).toMatchObject({ code: "validation_failed", details: { field: "expectedUpdatedAt" } });
    const missing = await patch("tbl_targets", "row_nope", { target: 1 });
    expect(missing.status).toBe(404);
    expect(missing.json.error).toMatchObject({ code: "not_found", message: "row not found" });
  });
});

describe("DELETE /tables/{id}/rows/{rowId}", () => {
  it("deletes, answers { deleted: true }, and 404s the second time", async () => {
    const { call, rows } = await tables();
    const res = await call("DELETE", "/api/v1/tables/tbl_targets/rows/row_1", { token: TOKENS.sync });
    expect(res.status).toBe(200);
    expect(res.json).toEqual({ deleted: true });
    expect(await rows("tbl_targets")).toEqual([]);
    const again = await call("DELETE", "/api/v1/tables/tbl_targets/rows/row_1", { token: TOKENS.sync });
    expect(again.status).toBe(404);
    expect((await call("GET", "/api/v1/datasets/tbl_targets", { token: TOKENS.sync })).json.rowCount).toBe(0);
  });

  it("needs tables:write and a reachable table", async () => {
    const { call, rows } = await tables();
    expect((await call("DELETE", "/api/v1/tables/tbl_targets/rows/row_1", { token: READER })).status).toBe(403);
    expect((await call("DELETE", "/api/v1/tables/tbl_targets/rows/row_1", { token: TOKENS.sessionBob })).status).toBe(
      404,
    );
    expect(await rows("tbl_targets")).toHaveLength(1);
  });
});

describe("Idempotency-Key on POST", () => {
  it("replays the first response with Idempotent-Replayed and adds no row", async () => {
    const { post, rows } = await tables();
    const first = await post("tbl_targets", { region: "AMER", target: 1 }, { key: "k-1" });
    expect(first.status).toBe(201);
    expect(first.headers.get("idempotent-replayed")).toBeNull();
    const again = await post("tbl_targets", { target: 1, region: "AMER" }, { key: "k-1" });
    expect(again.status).toBe(201);
    expect(again.headers.get("idempotent-replayed")).toBe("true");
    expect(again.json).toEqual(first.json);
    expect(await rows("tbl_targets")).toHaveLength(2);
  });

  it("answers the same key with a different body with 422 idempotency_key_reused", async () => {
    const { post, rows } = await tables();
    await post("tbl_targets", { region: "AMER" }, { key: "k-2" });
    const res = await post("tbl_targets", { region: "APAC" }, { key: "k-2" });
    expect(res.status).toBe(422);
    expect(res.json.error.code).toBe("idempotency_key_reused");
    expect(await rows("tbl_targets")).toHaveLength(2);
  });

  it("scopes keys to the credential and the table", async () => {
    const { post, rows } = await tables();
    const a = await post("tbl_targets", { region: "AMER" }, { key: "shared" });
    const b = await post("tbl_targets", { region: "AMER" }, { key: "shared", token: OTHER });
    const c = await post("tbl_notes", { region: "AMER" }, { key: "shared" });
    expect([a.status, b.status, c.status]).toEqual([201, 201, 201]);
    expect(b.headers.get("idempotent-replayed")).toBeNull();
    expect(c.headers.get("idempotent-replayed")).toBeNull();
    expect(new Set([a.json._id, b.json._id, c.json._id]).size).toBe(3);
    expect(await rows("tbl_targets")).toHaveLength(3);
  });

  it("keeps a key 24 hours by the clock, then forgets it", async () => {
    const { post, rows, clock } = await tables();
    const first = await post("tbl_targets", { region: "AMER" }, { key: "daily" });
    clock.advance(24 * 60 * 60 * 1000 - 1);
    const replay = await post("tbl_targets", { region: "AMER" }, { key: "daily" });
    expect(replay.headers.get("idempotent-replayed")).toBe("true");
    expect(replay.json._id).toBe(first.json._id);
    clock.advance(1);
    const fresh = await post("tbl_targets", { region: "AMER" }, { key: "daily" });
    expect(fresh.status).toBe(201);
    expect(fresh.headers.get("idempotent-replayed")).toBeNull();
    expect(fresh.json._id).not.toBe(first.json._id);
    expect(await rows("tbl_targets")).toHaveLength(3);
  });

  it("refuses a key longer than 255 characters with 400 naming Idempotency-Key", async () => {
    const { post, rows } = await tables();
    const res = await post("tbl_targets", { region: "AMER" }, { key: "k".repeat(256) });
    expect(res.status).toBe(400);
    expect(res.json.error).toMatchObject({ code: "invalid_parameter", details: { parameter: "Idempotency-Key" } });
    expect((await post("tbl_targets", { region: "AMER" }, { key: "k".repeat(255) })).status).toBe(201);
    expect(await rows("tbl_targets")).toHaveLength(2);
  });

  it("tries again while another request's write holds the key, then answers 409 idempotency_key_in_use", async () => {
    const { post, storage, rows } = await tables({ idempotencyWaitMs: 60 });
    const write = storage.tables.insertTableRowOnce;
    let tries = 0;
    // What a SQL store answers while the first request's transaction is uncommitted: in progress, fingerprint unseen.
    storage.tables.insertTableRowOnce = async () => {
      tries++;
      return { state: "in_progress", fingerprint: null };
    };
    const started = performance.now();
    const res = await post("tbl_targets", { region: "AMER" }, { key: "busy" });
    const refusal = [res.status, res.json.error.code, res.headers.get("retry-after")];
    expect(refusal).toEqual([409, "idempotency_key_in_use", "1"]);
    expect(performance.now() - started).toBeGreaterThanOrEqual(55);
    expect(tries).toBeGreaterThan(2);
    // The holder committed meanwhile: the next try replays it.
    tries = 0;
    storage.tables.insertTableRowOnce = async (input) =>
      ++tries < 3 ? { state: "in_progress", fingerprint: null } : write(input);
    const done = await post("tbl_targets", { region: "AMER" }, { key: "busy" });
    expect([done.status, tries]).toEqual([201, 3]);
    expect(await rows("tbl_targets")).toEqual([ROW_1, done.json]);
  });

  it("keeps no key for a write that failed: the retry after a 503 writes once, and is replayed after", async () => {
    const { post, storage, rows } = await tables();
    const write = storage.tables.insertTableRowOnce;
    storage.tables.insertTableRowOnce = async () => {
      const headers = { "retry-after": "1" };
      throw new ApiError(503, "storage_unavailable", "the database is unavailable; retry later", { headers });
    };
    const failed = await post("tbl_targets", { region: "AMER" }, { key: "after-503" });
    expect([failed.status, failed.headers.get("retry-after")]).toEqual([503, "1"]);
    storage.tables.insertTableRowOnce = write;
    const retry = await post("tbl_targets", { region: "AMER" }, { key: "after-503" });
    expect([retry.status, retry.headers.get("idempotent-replayed")]).toEqual([201, null]);
    const replay = await post("tbl_targets", { region: "AMER" }, { key: "after-503" });
    expect([replay.status, replay.headers.get("idempotent-replayed"), replay.json]).toEqual([201, "true", retry.json]);
    expect(await rows("tbl_targets")).toEqual([ROW_1, retry.json]);
  });

  it("does not remember a request refused by validation", async () => {
    const { post, rows } = await tables();
    expect((await post("tbl_targets", { colour: "red" }, { key: "v" })).status).toBe(422);
    const ok = await post("tbl_targets", { region: "EMEA" }, { key: "v" });
    expect(ok.status).toBe(201);
    expect(ok.headers.get("idempotent-replayed")).toBeNull();
    expect(await rows("tbl_targets")).toHaveLength(2);
  });

  it("adds exactly one row for 50 concurrent POSTs with one key, and all of them return it", async () => {
    const { post, rows, admin } = await tables();
    const results = await Promise.all(
      Array.from({ length: 50 }, () => post("tbl_targets", { region: "APAC", target: 9 }, { key: "burst" })),
    );
    expect(results.map((r) => r.status)).toEqual(Array(50).fill(201));
    expect(new Set(results.map((r) => r.text)).size).toBe(1);
    expect(results.filter((r) => r.headers.get("idempotent-replayed") === "true")).toHaveLength(49);
    expect(await rows("tbl_targets")).toEqual([ROW_1, results[0]!.json]);
    expect((await admin.tableEditLog("tbl_targets")).filter((e) => e.op === "create")).toHaveLength(1);
  });
});

describe("Idempotency-Key on PATCH", () => {
  const patchWithKey = (env: Awaited<ReturnType<typeof tables>>, rowId: string, body: unknown, key: string) =>
    env.call("PATCH", `/api/v1/tables/tbl_targets/rows/${rowId}`, {
      token: TOKENS.sync,
      body,
      headers: { "idempotency-key": key },
    });

  it("answers a retried compare-and-set whose first attempt succeeded with the first answer, not a 409", async () => {
    const env = await tables();
    const body = { target: 77, expectedUpdatedAt: ROW_1._updatedAt };
    const first = await patchWithKey(env, "row_1", body, "patch-1");
    expect([first.status, first.json.target, first.json._updatedAt]).toEqual([200, 77, NOW]);
    env.clock.advance(5000);
    const retried = await patchWithKey(env, "row_1", body, "patch-1");
    expect([retried.status, retried.headers.get("idempotent-replayed")]).toEqual([200, "true"]);
    expect(retried.json).toEqual(first.json);
    // Without the key the same retry is the stale compare-and-set it looks like.
    const keyless = await env.patch("tbl_targets", "row_1", body);
    expect([keyless.status, keyless.json.error.code]).toEqual([409, "conflict"]);
    expect((await env.rows("tbl_targets"))[0]).toMatchObject({ target: 77, _updatedAt: NOW });
  });

  it("answers the same key with another body, another row or a POST's key with 422 idempotency_key_reused", async () => {
    const env = await tables();
    expect((await patchWithKey(env, "row_1", { target: 1 }, "k-1")).status).toBe(200);
    for (const res of [
      await patchWithKey(env, "row_1", { target: 2 }, "k-1"),
      await patchWithKey(env, "row_2", { target: 1 }, "k-1"),
    ]) {
      expect([res.status, res.json.error.code]).toEqual([422, "idempotency_key_reused"]);
    }
    expect((await env.post("tbl_targets", { region: "EMEA", target: 5 }, { key: "k-2" })).status).toBe(201);
    const crossed = await patchWithKey(env, "row_1", { region: "EMEA", target: 5 }, "k-2");
    expect([crossed.status, crossed.json.error.code]).toEqual([422, "idempotency_key_reused"]);
    expect((await env.rows("tbl_targets")).find((r: { _id: string }) => r._id === "row_1").target).toBe(1);
  });

  it("replays a retried compare-and-set under a row validator too (which never sees the stale retry)", async () => {
    const env = await tables({ tableSchemas: { tbl_targets: { row: z.object({ region: z.string() }) } } });
    const body = { target: 78, expectedUpdatedAt: ROW_1._updatedAt };
    const first = await patchWithKey(env, "row_1", body, "patch-v");
    expect([first.status, first.json.target]).toEqual([200, 78]);
    env.clock.advance(5000);
    const retried = await patchWithKey(env, "row_1", body, "patch-v");
    const replay = [retried.status, retried.headers.get("idempotent-replayed"), retried.json];
    expect(replay).toEqual([200, "true", first.json]);
    // Another key with the same stale body is the conflict it is.
    const stale = await patchWithKey(env, "row_1", body, "patch-w");
    expect([stale.status, stale.json.error.code]).toEqual([409, "conflict"]);
  });

  it("does not keep the key of a refused write: a retry after the refusal is judged afresh", async () => {
    const env = await tables();
    const stale = await patchWithKey(env, "row_1", { target: 9, expectedUpdatedAt: "2020-01-01T00:00:00.000Z" }, "k-3");
    expect([stale.status, stale.json.error.code]).toEqual([409, "conflict"]);
    const again = await patchWithKey(env, "row_1", { target: 9, expectedUpdatedAt: "2020-01-01T00:00:00.000Z" }, "k-3");
    expect([again.status, again.json.error.code, again.headers.get("idempotent-replayed")]).toEqual([
      409,
      "conflict",
      null,
    ]);
    const fixed = await patchWithKey(env, "row_1", { target: 9, expectedUpdatedAt: ROW_1._updatedAt }, "k-3");
    expect([fixed.status, fixed.json.target]).toEqual([200, 9]);
  });
});

describe("edit log and audit events", () => {
  it("records each write against the API key by name, with before and after", async () => {
    const { post, patch, call, admin, storage } = await tables();
    const created = await post("tbl_targets", { region: "AMER", target: 1 });
    const updated = await patch("tbl_targets", "row_1", { target: 2 });
    await call("DELETE", `/api/v1/tables/tbl_targets/rows/${created.json._id}`, { token: TOKENS.sync });
    const actor = { type: "api-key", id: "key_sync", name: "Warehouse sync" };
    expect(await admin.tableEditLog("tbl_targets")).toEqual([
      {
        tableId: "tbl_targets",
        rowId: created.json._id,
        op: "create",
        actor,
        at: NOW,
        before: null,
        after: created.json,
      },
      { tableId: "tbl_targets", rowId: "row_1", op: "update", actor, at: NOW, before: ROW_1, after: updated.json },
      {
        tableId: "tbl_targets",
        rowId: created.json._id,
        op: "delete",
        actor,
        at: NOW,
        before: created.json,
        after: null,
      },
    ]);
    expect(await admin.tableEditLog("tbl_targets", { offset: 1, limit: 1 })).toHaveLength(1);
    await expect(admin.tableEditLog("tbl_nope")).rejects.toMatchObject({ status: 404 });

    const events = storage.state.auditLog.map((s) => s.event);
    expect(events.map((e) => e.action)).toEqual(["table.row.created", "table.row.updated", "table.row.deleted"]);
    expect(events[1]).toEqual({
      id: expect.stringMatching(/^evt_/),
      teamId: "team_ops",
      time: NOW,
      category: "audit",
      action: "table.row.updated",
      actor,
      target: { type: "table_row", id: "row_1" },
      outcome: "success",
      ip: "198.51.100.7",
      userAgent: null,
      details: {
        tableId: "tbl_targets",
        tableName: "Quarterly targets",
        rowId: "row_1",
        requestId: updated.headers.get("x-request-id"),
      },
    });
    expect(storage.state.auditLog.map((s) => [s.position, s.storedAt])).toEqual([
      ["1", Date.parse(NOW)],
      ["2", Date.parse(NOW)],
      ["3", Date.parse(NOW)],
    ]);
  });

  it("records a session token's writes against the user, never an anonymous system user", async () => {
    const { post, patch, admin, storage } = await tables();
    const created = await post("tbl_hidden", { note: "hi" }, { token: TOKENS.sessionAda });
    await patch("tbl_hidden", created.json._id, { note: "hello" }, TOKENS.sessionAda);
    const user = { type: "user", id: "usr_ada", email: "ada@northwind.test" };
    expect((await admin.tableEditLog("tbl_hidden")).map((e) => [e.op, e.actor])).toEqual([
      ["create", user],
      ["update", user],
    ]);
    expect(storage.state.auditLog.map((s) => s.event.actor)).toEqual([user, user]);
  });

  it("logs nothing for a refused write", async () => {
    const { patch, post, call, admin, storage } = await tables();
    await post("tbl_targets", { nope: 1 });
    await patch("tbl_targets", "row_nope", { target: 1 });
    await call("DELETE", "/api/v1/tables/tbl_targets/rows/row_nope", { token: TOKENS.sync });
    const moved = await patch("tbl_targets", "row_1", { target: 1 });
    await patch("tbl_targets", "row_1", { target: 2, expectedUpdatedAt: ROW_1._updatedAt });
    expect((await admin.tableEditLog("tbl_targets")).map((e) => e.after)).toEqual([moved.json]);
    expect(storage.state.auditLog).toHaveLength(1);
  });
});
