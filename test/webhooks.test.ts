import { describe, expect, it } from "vitest";
import { createAdmin } from "../src/admin/index.js";
import { dedupKeyOf } from "../src/domain/dedup.js";
import { flattenPayload, MAX_FLATTEN_DEPTH } from "../src/domain/flatten.js";
import { emptyRow } from "../src/domain/rows.js";
import { rowChangesColumns, typeOfValue } from "../src/domain/columns.js";
import { AUTO_SIGNATURE } from "../src/domain/signature-schemes.js";
import { signHex, signStandard, verifySignature } from "../src/domain/signatures.js";
import type { MemoryStorage } from "../src/memory/memory-storage.js";
import { WEBHOOK_SECRETS, webhookFixture } from "../src/testing/conformance/webhooks.js";
import { NOW, setup as baseSetup } from "./support/api.js";
import { TOKENS } from "./support/fixture.js";

const setup = (options: Parameters<typeof baseSetup>[0] = {}) => baseSetup({ fixture: webhookFixture(), ...options });
type Api = Awaited<ReturnType<typeof setup>>;

const JSON_TYPE = { "content-type": "application/json" };

async function rows(api: Api, datasetId: string) {
  const res = await api.call("GET", `/api/v1/datasets/${datasetId}/rows`, { token: TOKENS.sessionAda });
  expect(res.status).toBe(200);
  return res.json.data as Array<Record<string, unknown>>;
}

async function dataset(api: Api, datasetId: string) {
  const res = await api.call("GET", `/api/v1/datasets/${datasetId}`, { token: TOKENS.sessionAda });
  expect(res.status).toBe(200);
  return res.json;
}

describe("POST /api/webhooks/{id}: payloads into rows", () => {
  it("stores a JSON payload as one flattened row with metadata columns", async () => {
    const api = await setup();
    const res = await api.call("POST", "/api/webhooks/hook-open", {
      body: {
        event: "order.paid",
        user: { name: "Ada", address: { city: "Lyon" } },
        tags: ["a", "b"],
        meta: {},
        amount: 12.5,
        paid: true,
        note: null,
      },
    });
    expect(res.status).toBe(200);
    expect(res.json).toEqual({ ok: true, id: expect.stringMatching(/^whr_[0-9a-f]{16}-[0-9a-z]+$/), duplicate: false });
    expect(res.headers.get("ratelimit-limit")).toBe("100");
    expect(res.headers.get("access-control-expose-headers")).toBe(
      "X-Request-Id, RateLimit-Limit, RateLimit-Remaining, RateLimit-Reset",
    );
    expect(await rows(api, "ds_conn_hook_open")).toEqual([
      {
        _id: res.json.id,
        _receivedAt: NOW,
        _sourceIp: "198.51.100.7",
        event: "order.paid",
        "user.name": "Ada",
        "user.address.city": "Lyon",
        tags: '["a","b"]',
        meta: "{}",
        amount: 12.5,
        paid: true,
        note: null,
      },
    ]);
    const ds = await dataset(api, "ds_conn_hook_open");
    expect(ds).toMatchObject({
      type: "connection",
      connectionType: "webhook",
      rowCount: 1,
      updatedAt: NOW,
      writable: false,
    });
    expect(ds.columns).toEqual([
      { name: "_id", type: "string" },
      { name: "_receivedAt", type: "datetime" },
      { name: "_sourceIp", type: "string" },
      { name: "event", type: "string" },
      { name: "user.name", type: "string" },
      { name: "user.address.city", type: "string" },
      { name: "tags", type: "string" },
      { name: "meta", type: "string" },
      { name: "amount", type: "number" },
      { name: "paid", type: "boolean" },
      { name: "note", type: null },
    ]);
  });

  it("widens the schema to the union of fields, conflicting types to one that holds both", async () => {
    const api = await setup();
    await api.call("POST", "/api/webhooks/hook-open", { body: { a: 1, when: "2026-11-01" } });
    await api.call("POST", "/api/webhooks/hook-open", {
      body: { a: "one", when: "2026-11-01T10:00:00Z", b: { c: false } },
    });
    const ds = await dataset(api, "ds_conn_hook_open");
    expect(ds.rowCount).toBe(2);
    expect(ds.columns.slice(3)).toEqual([
      { name: "a", type: "string" },
      { name: "when", type: "datetime" },
      { name: "b.c", type: "boolean" },
    ]);
    const listed = await api.call("GET", "/api/v1/datasets?teamId=team_ops", { token: TOKENS.sessionAda });
    expect(listed.json.datasets.find((d: { id: string }) => d.id === "ds_conn_hook_open")).toMatchObject({
      rowCount: 2,
      connectionType: "webhook",
    });
    expect((await rows(api, "ds_conn_hook_open")).map((r) => [r.a, r["b.c"] ?? "absent"])).toEqual([
      [1, "absent"],
      ["one", false],
    ]);
  });

  it("keeps the metadata columns when a payload carries fields of the same names", async () => {
    const api = await setup();
    const res = await api.call("POST", "/api/webhooks/hook-open", {
      body: { _id: "mine", _sourceIp: "10.0.0.1", _receivedAt: "1999-01-01", x: 1 },
    });
    const [row] = await rows(api, "ds_conn_hook_open");
    expect(row).toEqual({ _id: res.json.id, _receivedAt: NOW, _sourceIp: "198.51.100.7", x: 1 });
  });

  it("accepts form-encoded bodies, including GitHub's `payload=` form", async () => {
    const api = await setup();
    const form = { "content-type": "application/x-www-form-urlencoded" };
    expect(
      (await api.call("POST", "/api/webhooks/hook-open", { body: "name=Ada+L&tag=a&tag=b&__proto__=x", headers: form }))
        .status,
    ).toBe(200);
    const github = `payload=${encodeURIComponent(JSON.stringify({ action: "opened", repository: { full_name: "o/r" } }))}`;
    expect((await api.call("POST", "/api/webhooks/hook-open", { body: github, headers: form })).status).toBe(200);
    const [first, second] = await rows(api, "ds_conn_hook_open");
    expect(first).toMatchObject({ name: "Ada L", tag: '["a","b"]', ["__proto__"]: "x" });
    expect(second).toMatchObject({ action: "opened", "repository.full_name": "o/r" });
  });

  it("takes _sourceIp from X-Forwarded-For only behind a trusted proxy", async () => {
    const plain = await setup();
    await plain.call("POST", "/api/webhooks/hook-open", {
      body: { a: 1 },
      headers: { "x-forwarded-for": "203.0.113.50" },
    });
    expect((await rows(plain, "ds_conn_hook_open"))[0]!._sourceIp).toBe("198.51.100.7");
    const proxied = await setup({ trustedProxies: ["198.51.100.7"] });
    await proxied.call("POST", "/api/webhooks/hook-open", {
      body: { a: 1 },
      headers: { "x-forwarded-for": "203.0.113.50" },
    });
    expect((await rows(proxied, "ds_conn_hook_open"))[0]!._sourceIp).toBe("203.0.113.50");
  });

  it("refuses bad input with the right status and stores nothing", async () => {
    const api = await setup({ maxBodyBytes: 64 });
    const cases: Array<[number, string, { body?: string; headers?: Record<string, string> }, string]> = [
      [400, "invalid_body", { body: "", headers: JSON_TYPE }, "/api/webhooks/hook-open"],
      [400, "invalid_body", { body: "{not json", headers: JSON_TYPE }, "/api/webhooks/hook-open"],
      [400, "invalid_body", { body: "[1,2]", headers: JSON_TYPE }, "/api/webhooks/hook-open"],
      [400, "invalid_body", { body: "42", headers: JSON_TYPE }, "/api/webhooks/hook-open"],
      [400, "invalid_body", { body: "null", headers: JSON_TYPE }, "/api/webhooks/hook-open"],
      [
        400,
        "invalid_body",
        { body: "", headers: { "content-type": "application/x-www-form-urlencoded" } },
        "/api/webhooks/hook-open",
      ],
      [
        415,
        "unsupported_media_type",
        { body: "hello", headers: { "content-type": "text/plain" } },
        "/api/webhooks/hook-open",
      ],
      [
        413,
        "payload_too_large",
        { body: JSON.stringify({ pad: "x".repeat(100) }), headers: JSON_TYPE },
        "/api/webhooks/hook-open",
      ],
      [404, "not_found", { body: "{}", headers: JSON_TYPE }, "/api/webhooks/no-such-hook"],
    ];
    for (const [status, code, init, path] of cases) {
      const res = await api.call("POST", path, init);
      expect([res.status, res.json?.error?.code]).toEqual([status, code]);
    }
    const invalidUtf8 = await api.api.fetch(
      new Request("http://dataport.test/api/webhooks/hook-open", {
        method: "POST",
        headers: JSON_TYPE,
        body: new Uint8Array([0x7b, 0xff, 0x7d]),
      }),
    );
    expect(invalidUtf8.status).toBe(400);
    const untyped = await api.api.fetch(
      new Request("http://dataport.test/api/webhooks/hook-open", {
        method: "POST",
        body: new TextEncoder().encode("{}"),
      }),
    );
    expect(untyped.status).toBe(415);
    expect((await dataset(api, "ds_conn_hook_open")).rowCount).toBe(0);
    expect((await api.call("GET", "/api/webhooks/hook-open")).status).toBe(405);
  });

  it("keeps __proto__, constructor and prototype as plain columns and pollutes nothing", async () => {
    const api = await setup();
    const body =
      '{"__proto__":{"polluted":"yes"},"constructor":{"prototype":{"polluted":"yes"}},"a":{"__proto__":{"polluted":"yes"}},"prototype":1}';
    const res = await api.call("POST", "/api/webhooks/hook-open", { body, headers: JSON_TYPE });
    expect(res.status).toBe(200);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    expect(Object.prototype).not.toHaveProperty("polluted");
    const [row] = await rows(api, "ds_conn_hook_open");
    expect(row).toMatchObject({
      "__proto__.polluted": "yes",
      "constructor.prototype.polluted": "yes",
      "a.__proto__.polluted": "yes",
      prototype: 1,
    });
  });

  it("infers column types of values: dates and datetimes only from ISO text", () => {
    expect(typeOfValue("2026-11-22")).toBe("date");
    expect(typeOfValue("2026-11-22T08:00:00Z")).toBe("datetime");
    expect(typeOfValue("2026-11-22 08:00")).toBe("datetime");
    expect(typeOfValue("2026-11-22T08:00:00.123+02:00")).toBe("datetime");
    expect(typeOfValue("2026-11-2")).toBe("string");
    expect(typeOfValue("20261-1-22")).toBe("string");
    expect(typeOfValue("order 2026-11-22")).toBe("string");
    expect(typeOfValue("2026-11-22 and more")).toBe("string");
    expect(typeOfValue(3)).toBe("number");
    expect(typeOfValue(false)).toBe("boolean");
    expect(typeOfValue(null)).toBeNull();
  });

  it("tells whether a row changes known column types, by the rules of widenType", () => {
    const known = new Map([
      ["s", "string"],
      ["n", "number"],
      ["b", "boolean"],
      ["d", "date"],
      ["t", "datetime"],
      ["j", "json"],
      ["e", null],
    ] as const);
    const row = (fields: Record<string, unknown>) => Object.assign(emptyRow(), fields);
    expect(
      rowChangesColumns(
        known,
        row({ s: 1, n: 2, b: true, d: "2026-11-22", t: "2026-11-22T08:00:00Z", j: "[1]", e: null }),
      ),
    ).toBe(false);
    expect(rowChangesColumns(known, row({ s: "x", n: null, b: false, d: null, t: "2026-11-22", j: 3 }))).toBe(false);
    expect(rowChangesColumns(known, row({ n: "2" }))).toBe(true);
    expect(rowChangesColumns(known, row({ b: 1 }))).toBe(true);
    expect(rowChangesColumns(known, row({ d: "2026-11-22T08:00:00Z" }))).toBe(true);
    expect(rowChangesColumns(known, row({ t: "not a time" }))).toBe(true);
    expect(rowChangesColumns(known, row({ e: 0 }))).toBe(true);
    expect(rowChangesColumns(known, row({ unseen: null }))).toBe(true);
  });

  it("flattens a payload shape seen before into the same columns, and payloads past the name memo's bounds alike", () => {
    const payload = { order: { id: "A-1", customer: { name: "Ada" } }, n: 1 };
    const first = flattenPayload(payload);
    const again = flattenPayload(structuredClone(payload));
    expect(Object.keys(again)).toEqual(["order.id", "order.customer.name", "n"]);
    expect({ ...again }).toEqual({ ...first });
    // Long names are never remembered; many distinct ones make the memo start over. Both still flatten exactly.
    const long = "k".repeat(300);
    expect(Object.keys(flattenPayload({ p: { [long]: 1 } }))).toEqual([`p.${long}`]);
    for (let i = 0; i < 5_000; i++) {
      const key = `key_${i}_${"x".repeat(200)}`;
      expect(flattenPayload({ group: { [key]: i } })[`group.${key}`]).toBe(i);
    }
    expect(Object.keys(flattenPayload(payload))).toEqual(["order.id", "order.customer.name", "n"]);
  });

  it("flattens into rows with no inherited members, where __proto__ is an own column", () => {
    const row = flattenPayload(
      JSON.parse('{"__proto__":{"x":1},"constructor":2,"toString":"t"}') as Record<string, unknown>,
    );
    expect(Object.keys(row)).toEqual(["__proto__.x", "constructor", "toString"]);
    const bare = emptyRow();
    bare["__proto__"] = "own";
    expect(Object.keys(bare)).toEqual(["__proto__"]);
    expect(bare["__proto__"]).toBe("own");
    expect(emptyRow().constructor).toBeUndefined();
    expect(emptyRow().toString).toBeUndefined();
    expect("hasOwnProperty" in emptyRow()).toBe(false);
    expect(JSON.stringify(bare)).toBe('{"__proto__":"own"}');
  });

  it("refuses a 10,000-deep payload with 400 before anything is stored (nesting limit 64)", async () => {
    const api = await setup();
    const depth = 10_000;
    const body = `${'{"a":'.repeat(depth)}1${"}".repeat(depth)}`;
    const res = await api.call("POST", "/api/webhooks/hook-open", { body, headers: JSON_TYPE });
    expect(res.status).toBe(400);
    expect(res.json.error.code).toBe("invalid_body");
    expect(await rows(api, "ds_conn_hook_open")).toEqual([]);
  });
});

describe("de-duplication", () => {
  const deliveryHeaders: Array<Record<string, string>> = [
    { "idempotency-key": "k-1" },
    { "webhook-id": "msg_1" },
    { "x-github-delivery": "72d3162e-cc78-11e3-81ab-4c9367dc0958" },
    { "x-gitea-delivery": "g-1" },
    { "svix-id": "msg_svix" },
  ];

  it("stores a delivery once per delivery header and answers a repeat with the first row's id", async () => {
    for (const headers of deliveryHeaders) {
      const api = await setup();
      const first = await api.call("POST", "/api/webhooks/hook-open", { body: { n: 1 }, headers });
      const again = await api.call("POST", "/api/webhooks/hook-open", { body: { n: 2 }, headers });
      expect(first.json.duplicate).toBe(false);
      expect(again.json).toEqual({ ok: true, id: first.json.id, duplicate: true });
      expect((await dataset(api, "ds_conn_hook_open")).rowCount).toBe(1);
    }
  });

  it("uses a top-level id or event_id when no header names the delivery", async () => {
    const api = await setup();
    const send = (body: unknown) => api.call("POST", "/api/webhooks/hook-open", { body });
    const a = await send({ id: "evt_1", v: 1 });
    expect((await send({ id: "evt_1", v: 2 })).json).toEqual({ ok: true, id: a.json.id, duplicate: true });
    expect((await send({ id: 1 })).json.duplicate).toBe(false);
    expect((await send({ id: "1" })).json.duplicate).toBe(false);
    const b = await send({ event_id: "e-9" });
    expect((await send({ event_id: "e-9", other: true })).json).toEqual({ ok: true, id: b.json.id, duplicate: true });
    // No identity at all: every delivery is a new row.
    expect((await send({ v: 1 })).json.duplicate).toBe(false);
    expect((await send({ v: 1 })).json.duplicate).toBe(false);
    expect((await dataset(api, "ds_conn_hook_open")).rowCount).toBe(6);
  });

  it("stores exactly one row for 20 concurrent copies of one delivery", async () => {
    const api = await setup();
    const results = await Promise.all(
      Array.from({ length: 20 }, () =>
        api.call("POST", "/api/webhooks/hook-open", {
          body: { n: 1 },
          headers: { "x-github-delivery": "same-delivery" },
        }),
      ),
    );
    expect(results.map((r) => r.status)).toEqual(Array(20).fill(200));
    expect(results.filter((r) => r.json.duplicate === false)).toHaveLength(1);
    const stored = await rows(api, "ds_conn_hook_open");
    expect(stored).toHaveLength(1);
    expect(new Set(results.map((r) => r.json.id))).toEqual(new Set([stored[0]!._id]));
  });
});

describe("dedupKeyOf", () => {
  it("prefers headers, namespaces payload ids by type and bounds long keys", () => {
    const headers = (init: Record<string, string>) => new Headers(init);
    expect(dedupKeyOf(headers({ "x-github-delivery": "g", "idempotency-key": "k" }), { id: "p" })).toBe("h:k");
    expect(dedupKeyOf(headers({ "X-Acme-Delivery": "a" }), {})).toBe("h:a");
    expect(dedupKeyOf(headers({}), { id: 7 })).toBe("b:7");
    expect(dedupKeyOf(headers({}), { id: "7" })).toBe('b:"7"');
    expect(dedupKeyOf(headers({}), { id: "", event_id: "e" })).toBe('b:"e"');
    expect(dedupKeyOf(headers({}), { id: { nested: 1 }, event_id: true })).toBeNull();
    const long = dedupKeyOf(headers({ "idempotency-key": "k".repeat(500) }), {})!;
    // Hashed keys live in a namespace of their own: no short id can look like one.
    expect(long).toMatch(/^h#[0-9a-f]{64}$/);
    // A header reader without keys() still sees the headers it can name.
    const bare = { get: (name: string) => (name === "x-github-delivery" ? "g" : null) };
    expect(dedupKeyOf(bare, {})).toBe("h:g");
  });
});

describe("retention", () => {
  it("keeps the most recent rows and de-duplicates only while the first delivery is retained", async () => {
    const api = await setup();
    const ids: string[] = [];
    for (let i = 1; i <= 5; i++) {
      const res = await api.call("POST", "/api/webhooks/hook-small", {
        body: { n: i },
        headers: { "idempotency-key": `d${i}` },
      });
      ids.push(res.json.id);
    }
    expect((await rows(api, "ds_conn_hook_small")).map((r) => r.n)).toEqual([3, 4, 5]);
    expect((await dataset(api, "ds_conn_hook_small")).rowCount).toBe(3);
    const retained = await api.call("POST", "/api/webhooks/hook-small", {
      body: { n: 3 },
      headers: { "idempotency-key": "d3" },
    });
    expect(retained.json).toEqual({ ok: true, id: ids[2], duplicate: true });
    const trimmed = await api.call("POST", "/api/webhooks/hook-small", {
      body: { n: 1 },
      headers: { "idempotency-key": "d1" },
    });
    expect(trimmed.json.duplicate).toBe(false);
    expect((await rows(api, "ds_conn_hook_small")).map((r) => r.n)).toEqual([4, 5, 1]);
  });

  it("trims rows with and without delivery keys alike, forgetting only the trimmed rows' keys", async () => {
    const api = await setup();
    await api.call("POST", "/api/webhooks/hook-small", { body: { n: 1 } });
    await api.call("POST", "/api/webhooks/hook-small", { body: { n: 2 }, headers: { "idempotency-key": "k2" } });
    await api.call("POST", "/api/webhooks/hook-small", { body: { n: 3 } });
    await api.call("POST", "/api/webhooks/hook-small", { body: { n: 4 }, headers: { "idempotency-key": "k4" } });
    await api.call("POST", "/api/webhooks/hook-small", { body: { n: 5 } });
    expect((await rows(api, "ds_conn_hook_small")).map((r) => r.n)).toEqual([3, 4, 5]);
    expect(
      (await api.call("POST", "/api/webhooks/hook-small", { body: { n: 4 }, headers: { "idempotency-key": "k4" } }))
        .json.duplicate,
    ).toBe(true);
    expect(
      (await api.call("POST", "/api/webhooks/hook-small", { body: { n: 2 }, headers: { "idempotency-key": "k2" } }))
        .json.duplicate,
    ).toBe(false);
    expect((await rows(api, "ds_conn_hook_small")).map((r) => r.n)).toEqual([4, 5, 2]);
  });

  it("uses the host default when the connection sets none", async () => {
    const api = await setup({ webhookRetainRows: 2 });
    for (let i = 1; i <= 3; i++) await api.call("POST", "/api/webhooks/hook-open", { body: { n: i } });
    expect((await rows(api, "ds_conn_hook_open")).map((r) => r.n)).toEqual([2, 3]);
  });
});

const verify = (secret: string, body: Uint8Array, headers: Headers, nowMs: number) =>
  verifySignature({ signature: AUTO_SIGNATURE, secrets: { current: secret, previous: null }, body, headers, nowMs });

describe("signing", () => {
  it("matches GitHub's published test vector", () => {
    expect(signHex(WEBHOOK_SECRETS.github, "Hello, World!")).toBe(
      "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17",
    );
    const headers = new Headers({
      "x-hub-signature-256": "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17",
    });
    const body = new TextEncoder().encode("Hello, World!");
    expect(verify(WEBHOOK_SECRETS.github, body, headers, 0)).toEqual({ ok: true, verifiedBy: "current" });
    expect(verify("another secret", body, headers, 0)).toEqual({ ok: false, reason: "signature_invalid" });
  });

  it("matches the Standard Webhooks published test vector", () => {
    const body = new TextEncoder().encode('{"test": 2432232314}');
    const expected = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=";
    expect(signStandard(WEBHOOK_SECRETS.standard, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, body)).toBe(expected);
    const headers = new Headers({
      "webhook-id": "msg_p5jXN8AQM9LWM0D4loKWxJek",
      "webhook-timestamp": "1614265330",
      "webhook-signature": expected,
    });
    expect(verify(WEBHOOK_SECRETS.standard, body, headers, 1614265330_000).ok).toBe(true);
    // Five minutes either way is the tolerance; beyond it the same signature is a replay.
    expect(verify(WEBHOOK_SECRETS.standard, body, headers, (1614265330 + 300) * 1000).ok).toBe(true);
    const late = { ok: false, reason: "timestamp_out_of_tolerance" };
    expect(verify(WEBHOOK_SECRETS.standard, body, headers, (1614265330 + 301) * 1000)).toEqual(late);
    expect(verify(WEBHOOK_SECRETS.standard, body, headers, (1614265330 - 301) * 1000)).toEqual(late);
    // An old timestamp with a wrong secret is a wrong signature first.
    expect(
      verify("whsec_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=", body, headers, (1614265330 + 301) * 1000),
    ).toEqual({ ok: false, reason: "signature_invalid" });
  });

  it("accepts hex signatures in either header, with or without sha256=", async () => {
    const api = await setup();
    const body = JSON.stringify({ action: "opened" });
    const hex = signHex(WEBHOOK_SECRETS.github, body);
    const variants: Array<Record<string, string>> = [
      { "x-hub-signature-256": hex },
      { "x-webhook-signature": hex },
      { "x-webhook-signature": hex.slice(7) },
      { "x-webhook-signature": hex.toUpperCase().replace("SHA256=", "sha256=") },
    ];
    for (const headers of variants) {
      const res = await api.call("POST", "/api/webhooks/hook-gh", { body, headers: { ...JSON_TYPE, ...headers } });
      expect(res.status).toBe(200);
    }
    expect((await dataset(api, "ds_conn_hook_gh")).rowCount).toBe(4);
  });

  it("401s a missing, wrong or malformed signature with its reason, never a 500", async () => {
    const api = await setup();
    const body = JSON.stringify({ action: "opened" });
    const good = signHex(WEBHOOK_SECRETS.github, body);
    const bad: Array<Record<string, string>> = [
      {},
      { "x-hub-signature-256": signHex("wrong secret", body) },
      { "x-hub-signature-256": signHex(WEBHOOK_SECRETS.github, `${body} `) },
      { "x-hub-signature-256": good.slice(0, -2) },
      { "x-hub-signature-256": `${good}00` },
      { "x-hub-signature-256": "sha256=" },
      { "x-hub-signature-256": "sha256=zz" + good.slice(9) },
      { "x-webhook-signature": "sha1=0123" },
      { "webhook-signature": "v1,!!!not base64", "webhook-id": "x", "webhook-timestamp": "1" },
      { "webhook-signature": "v1", "webhook-id": "x", "webhook-timestamp": "nope" },
    ];
    for (const headers of bad) {
      const res = await api.call("POST", "/api/webhooks/hook-gh", { body, headers: { ...JSON_TYPE, ...headers } });
      expect(res.status).toBe(401);
      const missing = Object.keys(headers).length === 0;
      expect(res.json.error).toMatchObject({
        code: "invalid_signature",
        message: missing ? "missing webhook signature" : "invalid webhook signature",
        details: { reason: missing ? "signature_missing" : "signature_invalid" },
      });
      // Neither the secret nor what was sent is echoed.
      expect(JSON.stringify(res.json)).not.toContain(WEBHOOK_SECRETS.github);
      for (const value of Object.values(headers))
        if (value.length > 8) expect(JSON.stringify(res.json)).not.toContain(value);
    }
    expect((await dataset(api, "ds_conn_hook_gh")).rowCount).toBe(0);
  });

  it("accepts Standard Webhooks deliveries, among several signatures, within five minutes", async () => {
    const api = await setup();
    const body = '{"test": 2432232314}';
    const id = "msg_p5jXN8AQM9LWM0D4loKWxJek";
    const ts = 1614265330;
    const valid = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=";
    api.clock.set(ts * 1000 + 60_000);
    const send = (headers: Record<string, string>) =>
      api.call("POST", "/api/webhooks/hook-std", { body, headers: { ...JSON_TYPE, ...headers } });
    const signed = { "webhook-id": id, "webhook-timestamp": String(ts) };
    const ok = await send({ ...signed, "webhook-signature": `v1,AAAA v2,xyz ${valid}` });
    expect(ok.json).toEqual({ ok: true, id: expect.any(String), duplicate: false });
    // The Standard Webhooks id also de-duplicates.
    expect((await send({ ...signed, "webhook-signature": valid })).json).toEqual({
      ok: true,
      id: ok.json.id,
      duplicate: true,
    });
    expect(
      (
        await send({
          "svix-id": "msg_other",
          "svix-timestamp": String(ts),
          "svix-signature": signStandard(WEBHOOK_SECRETS.standard, "msg_other", ts, body),
        })
      ).status,
    ).toBe(200);
    expect((await send({ ...signed, "webhook-signature": "v1,AAAA" })).status).toBe(401);
    api.clock.set((ts + 301) * 1000);
    const late = await send({ ...signed, "webhook-signature": valid });
    expect([late.status, late.json.error.details]).toEqual([401, { reason: "timestamp_out_of_tolerance" }]);
    expect((await dataset(api, "ds_conn_hook_std")).rowCount).toBe(2);
  });
});

describe("rate limit per connection", () => {
  it("answers without RateLimit-* headers when the limit is off", async () => {
    const api = await setup({ webhookRatePerSecond: 0 });
    for (let i = 0; i < 3; i++) {
      const res = await api.call("POST", "/api/webhooks/hook-open", { body: { n: i } });
      expect(res.status).toBe(200);
      expect(res.headers.get("content-type")).toBe("application/json; charset=utf-8");
      expect(res.headers.get("ratelimit-limit")).toBeNull();
      expect(res.headers.get("access-control-expose-headers")).toBe("X-Request-Id");
      expect(res.json).toEqual({
        ok: true,
        id: expect.stringMatching(/^whr_[0-9a-f]{16}-[0-9a-z]+$/),
        duplicate: false,
      });
    }
  });

  it("429s a busy connection with Retry-After and RateLimit-* while another connection is unaffected", async () => {
    const api = await setup({ webhookRatePerSecond: 2 });
    for (let i = 0; i < 4; i++) {
      const res = await api.call("POST", "/api/webhooks/hook-open", { body: { i } });
      expect([res.status, res.headers.get("ratelimit-remaining")]).toEqual([200, String(3 - i)]);
    }
    const refused = await api.call("POST", "/api/webhooks/hook-open", { body: { i: 4 } });
    expect(refused.status).toBe(429);
    expect(refused.json.error.code).toBe("rate_limited");
    expect(refused.headers.get("retry-after")).toBe("1");
    expect(refused.headers.get("ratelimit-limit")).toBe("4");
    expect(refused.headers.get("ratelimit-remaining")).toBe("0");
    expect(refused.headers.get("ratelimit-reset")).toBe("2");
    expect((await api.call("POST", "/api/webhooks/hook-small", { body: { other: true } })).status).toBe(200);
    expect((await dataset(api, "ds_conn_hook_open")).rowCount).toBe(4);
    api.clock.advance(500);
    expect((await api.call("POST", "/api/webhooks/hook-open", { body: { i: 5 } })).status).toBe(200);
  });
});

describe("webhook rate-limit headers in the current draft's form", () => {
  it("names the webhook policy: RateLimit-Policy and RateLimit on deliveries and on the 429", async () => {
    const api = await setup({ webhookRatePerSecond: 2, rateLimitHeaders: "policy" });
    const first = await api.call("POST", "/api/webhooks/hook-open", { body: { i: 0 } });
    expect([
      first.headers.get("ratelimit-policy"),
      first.headers.get("ratelimit"),
      first.headers.get("ratelimit-limit"),
    ]).toEqual(['"webhook";q=4;w=2', '"webhook";r=3;t=1', null]);
    for (let i = 1; i < 4; i++) await api.call("POST", "/api/webhooks/hook-open", { body: { i } });
    const refused = await api.call("POST", "/api/webhooks/hook-open", { body: { i: 4 } });
    expect([refused.status, refused.headers.get("ratelimit"), refused.headers.get("retry-after")]).toEqual([
      429,
      '"webhook";r=0;t=1',
      "1",
    ]);
  });
});

describe("host admin API for webhook connections", () => {
  it("creates a connection with a high-entropy URL; sets, rotates and removes the secret, each audited", async () => {
    const api = await setup({ appUrl: "https://bi.example.com/" });
    const admin = createAdmin(api.api);
    const created = await admin.createWebhookConnection({
      teamId: "team_ops",
      name: "Shop events",
      createdBy: { userId: "usr_ada" },
    });
    expect(created).toEqual({
      connectionId: expect.stringMatching(/^conn_/),
      datasetId: `ds_${created.connectionId}`,
      teamId: "team_ops",
      name: "Shop events",
      endpointId: expect.stringMatching(/^whk_[0-9A-Za-z]{32}$/),
      url: `https://bi.example.com/api/webhooks/${created.endpointId}`,
      signed: false,
      retainRows: 10_000,
      signature: { scheme: "auto" },
      previousSecretValidUntil: null,
    });
    const path = `/api/webhooks/${created.endpointId}`;
    const body = JSON.stringify({ order: 1 });
    const post = (headers: Record<string, string> = {}) =>
      api.call("POST", path, { body, headers: { ...JSON_TYPE, ...headers } });
    expect((await post()).status).toBe(200);

    expect((await admin.setWebhookSecret(created.connectionId, "shh-its-a-secret")).signed).toBe(true);
    expect((await post()).status).toBe(401);
    expect((await post({ "x-webhook-signature": signHex("shh-its-a-secret", body) })).status).toBe(200);

    const rotated = await admin.rotateWebhookSecret(created.connectionId);
    expect(rotated.secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    expect((await post({ "x-webhook-signature": signHex("shh-its-a-secret", body) })).status).toBe(401);
    expect((await post({ "x-webhook-signature": signHex(rotated.secret, body) })).status).toBe(200);
    const ts = Math.floor(api.clock.now() / 1000);
    const std = {
      "webhook-id": "msg_a",
      "webhook-timestamp": String(ts),
      "webhook-signature": signStandard(rotated.secret, "msg_a", ts, body),
    };
    expect((await post(std)).status).toBe(200);

    expect((await admin.removeWebhookSecret(created.connectionId)).signed).toBe(false);
    expect((await post()).status).toBe(200);
    expect((await dataset(api, created.datasetId)).rowCount).toBe(5);

    const changed = await admin.setWebhookRetention(created.connectionId, 2);
    expect(changed.retainRows).toBe(2);
    expect((await dataset(api, created.datasetId)).rowCount).toBe(2);
    expect(await admin.getWebhookConnection(created.connectionId)).toEqual({ ...created, retainRows: 2 });

    const events = (api.storage as MemoryStorage).state.auditLog
      .map((e) => e.event)
      .filter((e) => e.target?.id === created.connectionId);
    expect(events.map((e) => [e.action, e.category, e.actor?.type])).toEqual([
      ["webhook.created", "audit", "user"],
      ["webhook.secret.set", "audit", "system"],
      ["webhook.secret.rotated", "audit", "system"],
      ["webhook.secret.removed", "audit", "system"],
      ["webhook.retention.changed", "audit", "system"],
    ]);
    expect(JSON.stringify(events)).not.toContain("shh-its-a-secret");
    expect(JSON.stringify(events)).not.toContain(rotated.secret);
  });

  it("refuses bad settings and unknown or non-webhook connections", async () => {
    const api = await setup();
    const admin = createAdmin(api.api);
    await expect(admin.createWebhookConnection({ teamId: "nope", name: "x" })).rejects.toMatchObject({ status: 404 });
    await expect(admin.createWebhookConnection({ teamId: "team_ops", name: "  " })).rejects.toMatchObject({
      status: 400,
      code: "invalid_parameter",
    });
    await expect(admin.setWebhookSecret("conn_hook_open", "")).rejects.toMatchObject({ status: 400 });
    await expect(admin.setWebhookSecret("conn_hook_open", "whsec_not base64!")).rejects.toMatchObject({ status: 400 });
    await expect(admin.setWebhookRetention("conn_hook_open", 0)).rejects.toMatchObject({ status: 400 });
    await expect(admin.setWebhookRetention("conn_hook_open", 1.5)).rejects.toMatchObject({ status: 400 });
    await expect(admin.removeWebhookSecret("conn_retail")).rejects.toMatchObject({ status: 404 });
    await expect(admin.rotateWebhookSecret("nope")).rejects.toMatchObject({ status: 404 });
    await expect(
      admin.setWebhookSecret("conn_hook_open", "fine", { by: { userId: "usr_nobody" } }),
    ).rejects.toMatchObject({ status: 404 });
    // Nothing changed and nothing was audited.
    expect((await api.storage.webhooks.getWebhookEndpoint("hook-open"))!.signingSecret).toBeNull();
    expect((api.storage as MemoryStorage).state.auditLog.filter((e) => e.event.action.startsWith("webhook."))).toEqual(
      [],
    );
  });
});
