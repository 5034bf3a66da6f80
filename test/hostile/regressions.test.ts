/**
 * One regression test per class of hostile input (issue #17), on every store:
 * each was a 500 or stored damage before. The rule for each class:
 * - NUL and unpaired surrogates: refused at the boundary on every store, path
 *   ids and query values 400 invalid_parameter (details.parameter), JSON and
 *   form bodies 400 invalid_body (details.path); paired surrogates are text like any other.
 * - Nesting: at most 64 levels (MAX_JSON_DEPTH) in a body, `filters` or
 *   `params`, checked before parsing; deeper is 400 and nothing is stored.
 * - Numbers: a number that is not finite (1e400) is 400 invalid_body;
 *   integer query parameters are bounded (offset at most 2^31 - 1).
 * - Paths: matched as sent; `%2e%2e` never moves a request to another mount.
 * - Upstream errors: scrubbed of the connection's secrets, credentials and query strings.
 * - De-duplication keys: a hashed (long) id and a short id never share a key.
 * - Space objects: an API key sees rows of its allowlisted datasets only.
 */
import { createServer, request as httpRequest, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { toNodeHandler } from "../../adapters/node.js";
import { parseServerArgs, UsageError } from "../../examples/server/cli.js";
import { SERVER_TIMEOUTS, startServer } from "../../examples/server/server.js";
import { createDataApi } from "../../src/server/api.js";
import { sha256Hex } from "../../src/domain/crypto.js";
import { dedupKeyOf } from "../../src/domain/dedup.js";
import { MAX_JSON_DEPTH } from "../../src/http/body.js";
import { MAX_INT_PARAM } from "../../src/http/query.js";
import { UpstreamUnavailableError } from "../../src/ports/connector.js";
import {
  type Counts,
  counts,
  expectHandled,
  FREE_TABLE,
  HOOK,
  HOOK_DATASET,
  type HostileApi,
  type HostileFixture,
  hostileApi,
  type Opened,
  storeCases,
  TOKENS,
} from "./harness.js";

const cases = await storeCases();

const nest = (depth: number, inner = "1") => `${'{"a":'.repeat(depth - 1)}{"a":${inner}}${"}".repeat(depth - 1)}`;
const nestArrays = (depth: number) => `${"[".repeat(depth)}${"]".repeat(depth)}`;
const q = (value: string) => encodeURIComponent(value);

for (const store of cases) {
  describe.skipIf(store.skip !== undefined)(`hostile input on ${store.name}`, () => {
    let opened: Opened;
    let h: HostileApi;
    beforeAll(async () => {
      opened = await store.open();
      h = await hostileApi(opened);
    });
    afterAll(async () => {
      expect(h?.logged ?? []).toEqual([]);
      await opened?.close();
    });

    /**
     * Send a write that must be refused with `status`/`code`; the counts stay as they were and everything stays
     * readable.
     */
    async function refusedWrite(
      method: string,
      path: string,
      init: Parameters<HostileApi["send"]>[2],
      status: number,
      code: string,
    ) {
      const before: Counts = await counts(h);
      const answer = await h.send(method, path, init);
      expectHandled(answer, `${method} ${path}`);
      expect({ status: answer.status, code: answer.json?.error?.code }).toEqual({ status, code });
      expect(await counts(h)).toEqual(before);
      return answer;
    }

    describe("NUL and unpaired surrogates: refused at the boundary", () => {
      it("in path ids: 400 invalid_parameter naming the parameter", async () => {
        for (const [method, path, parameter] of [
          ["GET", "/api/v1/datasets/ds%00orders", "id"],
          ["GET", "/api/v1/datasets/%00/rows", "id"],
          ["GET", "/api/v1/tables/%00/rows", "id"],
          ["DELETE", `/api/v1/tables/${FREE_TABLE}/rows/row%00`, "rowId"],
          ["GET", "/api/v1/connections/conn%00/query", "id"],
        ] as const) {
          const answer = await h.send(method, path, { token: TOKENS.sync });
          expectHandled(answer, path);
          expect(answer.status).toBe(400);
          expect(answer.json.error).toMatchObject({ code: "invalid_parameter", details: { parameter } });
        }
        // A delivery to an endpoint id holding NUL stores nothing.
        await refusedWrite("POST", "/api/webhooks/hook%00open", { body: "{}" }, 400, "invalid_parameter");
      });

      it("in query values: 400 invalid_parameter, including inside filters and params", async () => {
        for (const [path, parameter] of [
          ["/api/v1/datasets?teamId=team%00ops", "teamId"],
          [`/api/v1/datasets/${HOOK_DATASET}/rows?filters=${q('{"event":"a\\u0000b"}')}`, "filters"],
          [`/api/v1/datasets/${HOOK_DATASET}/rows?filters=${q('{"event":"\\ud800"}')}`, "filters"],
          [`/api/v1/datasets/${HOOK_DATASET}/rows?filters=${q('{"ev\\u0000ent":"x"}')}`, "filters"],
          [`/api/v1/datasets/${HOOK_DATASET}/rows?columns=event%00`, "columns"],
          [`/api/v1/connections/conn_retail/query?orderBy=city%00`, "orderBy"],
          [`/api/v1/connections/conn_retail/query?format=geojson&params=${q('{"where":"\\u0000"}')}`, "params"],
        ] as const) {
          const answer = await h.send("GET", path, { token: TOKENS.sessionAda });
          expectHandled(answer, path);
          expect(answer.status).toBe(400);
          expect(answer.json.error).toMatchObject({ code: "invalid_parameter", details: { parameter } });
        }
      });

      it("in webhook payloads: 400 invalid_body, nothing stored, filtered reads still answer", async () => {
        for (const body of [
          '{"event":"a\\u0000b"}',
          '{"event":"\\ud800"}',
          '{"event":"\\udfff x"}',
          '{"a\\u0000":1}',
          '{"deep":{"list":[1,"\\u0000"]}}',
        ]) {
          const answer = await refusedWrite("POST", `/api/webhooks/${HOOK}`, { body }, 400, "invalid_body");
          expect(answer.json.error.message).toMatch(/NUL|surrogate/);
        }
        const form = await refusedWrite(
          "POST",
          `/api/webhooks/${HOOK}`,
          { body: "event=a%00b", headers: { "content-type": "application/x-www-form-urlencoded" } },
          400,
          "invalid_body",
        );
        expect(form.json.error.message).toMatch(/NUL/);
        const deep = await refusedWrite(
          "POST",
          `/api/webhooks/${HOOK}`,
          { body: '{"a":{"b":"\\ud800"}}' },
          400,
          "invalid_body",
        );
        expect(deep.json.error.details).toEqual({ path: "a.b" });
      });

      it("in table writes (POST, PATCH, with an Idempotency-Key): 400 invalid_body, the table unchanged", async () => {
        await refusedWrite(
          "POST",
          `/api/v1/tables/${FREE_TABLE}/rows`,
          { token: TOKENS.sync, body: '{"note":"\\u0000"}' },
          400,
          "invalid_body",
        );
        await refusedWrite(
          "POST",
          `/api/v1/tables/${FREE_TABLE}/rows`,
          { token: TOKENS.sync, body: '{"note":"\\ud83d"}', headers: { "idempotency-key": "nul-1" } },
          400,
          "invalid_body",
        );
        await refusedWrite(
          "PATCH",
          `/api/v1/tables/${FREE_TABLE}/rows/row_free_1`,
          { token: TOKENS.sync, body: '{"note":"x\\u0000"}' },
          400,
          "invalid_body",
        );
        const row = await h.send("GET", `/api/v1/tables/${FREE_TABLE}/rows`, { token: TOKENS.sync });
        expect(row.json.data.find((r: { _id: string }) => r._id === "row_free_1").note).toBe("seed");
      });

      it("paired surrogates are ordinary text: stored and read back as sent", async () => {
        const text = "emoji 😀 and 𝄞";
        const created = await h.send("POST", `/api/v1/tables/${FREE_TABLE}/rows`, {
          token: TOKENS.sync,
          body: JSON.stringify({ note: text }),
        });
        expect(created.status).toBe(201);
        const delivered = await h.send("POST", `/api/webhooks/${HOOK}`, { body: '{"event":"\\ud83d\\ude00"}' });
        expect(delivered.status).toBe(200);
        const read = await h.send("GET", `/api/v1/datasets/${HOOK_DATASET}/rows?filters=${q('{"event":"😀"}')}`, {
          token: TOKENS.sessionAda,
        });
        expect(read.status).toBe(200);
        expect(read.json.data.map((r: { event: string }) => r.event)).toEqual(["😀"]);
        const rows = await h.send("GET", `/api/v1/tables/${FREE_TABLE}/rows?limit=1000`, { token: TOKENS.sync });
        expect(rows.json.data.some((r: { note?: string }) => r.note === text)).toBe(true);
      });
    });

    describe(`nesting: at most ${MAX_JSON_DEPTH} levels`, () => {
      it("a body one level too deep is 400 invalid_body before anything is stored, on every write route", async () => {
        const tooDeep = nest(MAX_JSON_DEPTH + 1);
        for (const [method, path, headers] of [
          ["POST", `/api/v1/tables/${FREE_TABLE}/rows`, {}],
          ["POST", `/api/v1/tables/${FREE_TABLE}/rows`, { "idempotency-key": "deep-1" }],
          ["PATCH", `/api/v1/tables/${FREE_TABLE}/rows/row_free_1`, {}],
          ["POST", `/api/webhooks/${HOOK}`, {}],
        ] as const) {
          const answer = await refusedWrite(
            method,
            path,
            { token: TOKENS.sync, body: tooDeep, headers },
            400,
            "invalid_body",
          );
          expect(answer.json.error.message).toMatch(/nested more than 64 levels/);
        }
      });

      it("thousands of levels (arrays or objects) are refused the same way, without overflowing a stack", async () => {
        for (const body of [nest(5000), `{"a":${nestArrays(20_000)}}`, `{"a":"${"[".repeat(10_000)}"}`]) {
          const answer = await h.send("POST", `/api/v1/tables/${FREE_TABLE}/rows`, { token: TOKENS.sync, body });
          expectHandled(answer, "deep body");
          if (body.startsWith('{"a":"'))
            expect(answer.status).toBe(201); // brackets inside a string are text, not nesting
          else expect(answer.json.error.code).toBe("invalid_body");
        }
      });

      it("exactly the limit is accepted, stored and read back", async () => {
        const atLimit = nest(MAX_JSON_DEPTH, '"bottom"');
        const created = await h.send("POST", `/api/v1/tables/${FREE_TABLE}/rows`, {
          token: TOKENS.sync,
          body: atLimit,
        });
        expect(created.status).toBe(201);
        expect(JSON.stringify(created.json.a)).toBe(atLimit.slice('{"a":'.length, -1));
        const delivered = await h.send("POST", `/api/webhooks/${HOOK}`, { body: atLimit });
        expect(delivered.status).toBe(200);
        await counts(h);
      });

      it("filters and params one level too deep are 400 invalid_parameter", async () => {
        const filters = await h.send(
          "GET",
          `/api/v1/datasets/${HOOK_DATASET}/rows?filters=${q(`{"event":${nest(MAX_JSON_DEPTH)}}`)}`,
          {
            token: TOKENS.sessionAda,
          },
        );
        expectHandled(filters, "deep filters");
        expect(filters.json.error).toMatchObject({ code: "invalid_parameter", details: { parameter: "filters" } });
        const params = await h.send(
          "GET",
          `/api/v1/connections/conn_retail/query?format=geojson&params=${q(nest(5000))}`,
          { token: TOKENS.sessionAda },
        );
        expectHandled(params, "deep params");
        expect(params.json.error).toMatchObject({ code: "invalid_parameter", details: { parameter: "params" } });
      });
    });

    describe("numbers", () => {
      it("a number that is not finite is 400 invalid_body, not a silent null", async () => {
        for (const body of [
          '{"amount":1e400}',
          '{"amount":-1e400}',
          `{"amount":1${"0".repeat(400)}}`,
          '{"list":[1,2,1e999]}',
        ]) {
          await refusedWrite(
            "POST",
            `/api/v1/tables/${FREE_TABLE}/rows`,
            { token: TOKENS.sync, body },
            400,
            "invalid_body",
          );
          await refusedWrite("POST", `/api/webhooks/${HOOK}`, { body }, 400, "invalid_body");
        }
        await refusedWrite(
          "PATCH",
          `/api/v1/tables/${FREE_TABLE}/rows/row_free_1`,
          { token: TOKENS.sync, body: '{"amount":1e400}' },
          400,
          "invalid_body",
        );
        const filters = await h.send("GET", `/api/v1/datasets/${HOOK_DATASET}/rows?filters=${q('{"event":1e400}')}`, {
          token: TOKENS.sessionAda,
        });
        expect(filters.json.error).toMatchObject({ code: "invalid_parameter", details: { parameter: "filters" } });
      });

      it("the largest finite numbers are kept as sent", async () => {
        const created = await h.send("POST", `/api/v1/tables/${FREE_TABLE}/rows`, {
          token: TOKENS.sync,
          body: '{"big":1.7976931348623157e308,"tiny":5e-324}',
        });
        expect(created.status).toBe(201);
        const rows = await h.send("GET", `/api/v1/tables/${FREE_TABLE}/rows?limit=1000`, { token: TOKENS.sync });
        const stored = rows.json.data.find((r: { _id: string }) => r._id === created.json._id);
        expect(stored).toMatchObject({ big: Number.MAX_VALUE, tiny: Number.MIN_VALUE });
      });

      it("offsets are bounded: past 2^31 - 1 is 400 invalid_parameter, up to it an empty page", async () => {
        for (const path of [
          `/api/v1/datasets/ds_orders/rows`,
          `/api/v1/datasets/${HOOK_DATASET}/rows`,
          `/api/v1/tables/${FREE_TABLE}/rows`,
        ]) {
          const past = await h.send("GET", `${path}?offset=${MAX_INT_PARAM + 1}`, { token: TOKENS.sync });
          expectHandled(past, path);
          expect(past.json.error).toMatchObject({ code: "invalid_parameter", details: { parameter: "offset" } });
          const huge = await h.send("GET", `${path}?offset=999999999999999`, { token: TOKENS.sessionAda });
          expect(huge.status).toBe(400);
          const last = await h.send("GET", `${path}?offset=${MAX_INT_PARAM}`, { token: TOKENS.sessionAda });
          expectHandled(last, path);
          expect(last.status).toBe(200);
          expect(last.json.data).toEqual([]);
          expect(last.json.metadata.hasMore).toBe(false);
        }
        const filtered = await h.send(
          "GET",
          `/api/v1/datasets/${HOOK_DATASET}/rows?offset=${MAX_INT_PARAM}&filters=${q('{"event":"seed"}')}`,
          {
            token: TOKENS.sessionAda,
          },
        );
        expect(filtered.status).toBe(200);
        const maxRows = await h.send("GET", `/api/v1/datasets/ds_orders/rows?maxRows=${MAX_INT_PARAM + 1}`, {
          token: TOKENS.sync,
        });
        expect(maxRows.json.error).toMatchObject({ code: "invalid_parameter", details: { parameter: "maxRows" } });
        const connection = await h.send("GET", `/api/v1/connections/conn_retail/query?offset=${MAX_INT_PARAM + 1}`, {
          token: TOKENS.sync,
        });
        expect(connection.json.error).toMatchObject({ code: "invalid_parameter", details: { parameter: "offset" } });
      });
    });

    describe("paths are matched as sent", () => {
      it("percent-encoded dot segments never reach another mount's route", async () => {
        for (const path of [
          `/api/webhooks/%2e%2e/v1/tables/${FREE_TABLE}/rows`,
          `/api/webhooks/%2E%2E/v1/tables/${FREE_TABLE}/rows`,
          `/api/webhooks/.%2e/v1/tables/${FREE_TABLE}/rows`,
          `/api/webhooks/../v1/tables/${FREE_TABLE}/rows`,
          `/api/webhooks/x/%2e%2e/%2e%2e/v1/tables/${FREE_TABLE}/rows`,
          `/api/webhooks\\..\\v1/tables/${FREE_TABLE}/rows`,
        ]) {
          await refusedWrite("POST", path, { token: TOKENS.sync, body: '{"note":"smuggled"}' }, 404, "not_found");
        }
        // A dot segment as an id is just an id (here an unknown one), never a step up the path.
        const dots = await h.send("GET", "/api/v1/datasets/%2e%2e", { token: TOKENS.sync });
        expect(dots.json.error.code).toBe("not_found");
        const up = await h.send("GET", "/api/v1/datasets/%2e%2e/rows", { token: TOKENS.sync });
        expect(up.json.error).toMatchObject({ code: "not_found", message: "dataset not found" });
      });

      it("through the Node adapter and a real socket, a dot-segment path is refused, not served", async () => {
        const server = createServer(toNodeHandler(h.api));
        await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
        try {
          const before = await counts(h);
          const { port } = server.address() as AddressInfo;
          const status = await rawPost(
            port,
            `/api/webhooks/%2e%2e/v1/tables/${FREE_TABLE}/rows`,
            TOKENS.sync,
            '{"note":"smuggled"}',
          );
          expect(status).toBe(404);
          expect(await counts(h)).toEqual(before);
        } finally {
          await new Promise((resolve) => server.close(resolve));
        }
      });
    });

    describe("de-duplication keys", () => {
      it("a short id that looks like a long id's hash is not a duplicate of it", async () => {
        const long = `evt-${"x".repeat(300)}`;
        const before = await counts(h);
        const first = await h.send("POST", `/api/webhooks/${HOOK}`, {
          body: '{"n":1}',
          headers: { "idempotency-key": long },
        });
        expect(first.json).toMatchObject({ ok: true, duplicate: false });
        // What the hashed key used to be, sent as a short id; and the new hashed form, sent as a short id.
        for (const lookalike of [`sha256:${sha256Hex(`h:${long}`)}`, `#${sha256Hex(`h:${long}`)}`]) {
          const second = await h.send("POST", `/api/webhooks/${HOOK}`, {
            body: '{"n":2}',
            headers: { "idempotency-key": lookalike },
          });
          expect(second.json).toMatchObject({ ok: true, duplicate: false });
          expect(second.json.id).not.toBe(first.json.id);
        }
        const again = await h.send("POST", `/api/webhooks/${HOOK}`, {
          body: '{"n":1}',
          headers: { "idempotency-key": long },
        });
        expect(again.json).toEqual({ ok: true, id: first.json.id, duplicate: true });
        expect((await counts(h)).hookRows).toBe(before.hookRows + 3);
      });
    });

    describe("space objects follow a key's allowlist", () => {
      it("dataset-usage and refresh-history list only allowlisted datasets for a key; a session sees its team", async () => {
        const ids = async (object: string, token: string) => {
          const answer = await h.send("GET", `/api/v1/space/${object}?teamId=team_ops`, { token });
          expect(answer.status).toBe(200);
          return new Set<string>(answer.json.rows.map((r: { dataset_id: string }) => r.dataset_id));
        };
        const allowed = new Set(["ds_orders", "ds_stores", "tbl_targets", FREE_TABLE]);
        const keyUsage = await ids("dataset-usage", TOKENS.sync);
        expect([...keyUsage].filter((id) => !allowed.has(id))).toEqual([]);
        expect(keyUsage.has("ds_orders")).toBe(true);
        const keyHistory = await ids("refresh-history", TOKENS.sync);
        expect([...keyHistory]).toEqual(["ds_stores"]);
        expect((await ids("dataset-usage", TOKENS.sessionAda)).has("ds_secret")).toBe(true);
        expect(await ids("refresh-history", TOKENS.sessionAda)).toEqual(new Set(["ds_stores", "ds_secret"]));
      });
    });

    describe("upstream errors never carry secrets", () => {
      it("an ArcGIS error echoing its request URL answers 502 without the token or query string", async () => {
        const token = "tok_SUPER_SECRET_4242";
        const upstream = await fakeArcgis((url) => ({
          error: { code: 498, message: `Invalid token for ${url}; token=${token}` },
        }));
        const own = await store.open();
        const api = await hostileApi(own, { fixture: (f) => withArcgis(f, upstream.url, token) });
        try {
          const answer = await api.send("GET", "/api/v1/connections/conn_gis/query?format=geojson", {
            token: TOKENS.sessionAda,
          });
          expect(answer.status).toBe(502);
          expect(answer.text).not.toContain(token);
          expect(answer.text).not.toContain("f=geojson");
          expect(answer.json.error.message).toMatch(
            /reported an error 498: Invalid token for http:\/\/127\.0\.0\.1:\d+\/arcgis\/0\/query\?\[redacted\]/,
          );
          expect(api.logged).toEqual([]);
        } finally {
          await upstream.close();
          await own.close();
        }
      });

      it("a host connector's failure text is scrubbed of the connection's secrets in the 502 and in the log", async () => {
        const secret = "pg-password-77";
        const own = await store.open();
        const api = await hostileApi(own, {
          fixture: (f) => withCustomConnection(f, `postgres://reader:${secret}@db.internal:5432/sales?sslkey=/k`),
          connectors: {
            custom: {
              isSpatial: () => false,
              async query(connection, query) {
                if (query.limit === 7) throw new Error(`socket hang up talking to ${String(connection.config.url)}`);
                throw new UpstreamUnavailableError(
                  `connect failed: ${String(connection.config.url)} (password ${secret})`,
                );
              },
            },
          },
        });
        try {
          const unavailable = await api.send("GET", "/api/v1/connections/conn_custom/query", {
            token: TOKENS.sessionAda,
          });
          expect(unavailable.status).toBe(502);
          expect(unavailable.text).not.toContain(secret);
          expect(unavailable.text).not.toContain("sslkey");
          expect(unavailable.json.error.message).toContain("postgres://[redacted]@db.internal:5432/sales");
          const crashed = await api.send("GET", "/api/v1/connections/conn_custom/query?limit=7", {
            token: TOKENS.sessionAda,
          });
          expect(crashed.status).toBe(500); // a connector's bug stays a 500 ...
          expect(api.logged.join("\n")).toContain("socket hang up");
          expect(api.logged.join("\n")).not.toContain(secret); // ... but its log line carries no secret
        } finally {
          await own.close();
        }
      });
    });
  });
}

describe("hostile input stores: which ran", () => {
  it("memory and SQLite always run; PostgreSQL unless it is down locally", () => {
    const ran = cases.filter((c) => c.skip === undefined).map((c) => c.name);
    expect(ran).toEqual(expect.arrayContaining(["memory", "sqlite"]));
    if (process.env.CI === "true") expect(ran).toContain("postgres");
  });
});

describe("dedupKeyOf namespaces", () => {
  it("keeps hashed keys apart from every short key", () => {
    const headers = (key: string) => new Headers({ "idempotency-key": key });
    const long = "k".repeat(500);
    const hashed = dedupKeyOf(headers(long), {})!;
    expect(hashed).toBe(`h#${sha256Hex(`h:${long}`)}`);
    expect(dedupKeyOf(headers(`sha256:${sha256Hex(`h:${long}`)}`), {})).not.toBe(hashed);
    expect(dedupKeyOf(headers(`#${sha256Hex(`h:${long}`)}`), {})).toBe(`h:#${sha256Hex(`h:${long}`)}`);
    expect(dedupKeyOf(new Headers(), { id: "p".repeat(500) })).toMatch(/^b#[0-9a-f]{64}$/);
  });
});

describe("the example server", () => {
  it("sets header, request, keep-alive and idle timeouts, and checks them every second", async () => {
    const running = await startServer(
      parseServerArgs(["--port", "0", "--db", ":memory:", "--log", "none"], {
        fixture: "examples/demo/space.json",
        db: ":memory:",
      }),
      { fs: await import("node:fs"), env: {} },
    );
    try {
      const server: Server = running.server;
      expect(server.headersTimeout).toBe(SERVER_TIMEOUTS.headersMs);
      expect(server.requestTimeout).toBe(SERVER_TIMEOUTS.requestMs);
      expect(server.keepAliveTimeout).toBe(SERVER_TIMEOUTS.keepAliveMs);
      expect(server.timeout).toBe(SERVER_TIMEOUTS.idleMs);
      expect(SERVER_TIMEOUTS).toMatchObject({
        headersMs: 15_000,
        requestMs: 120_000,
        keepAliveMs: 65_000,
        idleMs: 60_000,
        checkEveryMs: 1000,
      });
    } finally {
      await running.close();
    }
  });

  it("--webhook-rate 0 turns the webhook limit off; a negative rate is refused", async () => {
    const config = parseServerArgs(["--webhook-rate", "0"], { fixture: "f.json", db: ":memory:" });
    expect(config.webhookRatePerSecond).toBe(0);
    expect(() => parseServerArgs(["--webhook-rate=-1"], { fixture: "f.json", db: ":memory:" })).toThrow(UsageError);
    expect(() => parseServerArgs(["--webhook-rate=-1"], { fixture: "f.json", db: ":memory:" })).toThrow(
      /--webhook-rate must be a number of at least 0/,
    );
    // With the limit off, a burst far past any bucket is stored in full and carries no RateLimit headers.
    const own = await cases[0]!.open();
    const h = await hostileApi(own, { webhookRatePerSecond: config.webhookRatePerSecond });
    const answers = await Promise.all(
      Array.from({ length: 300 }, (_, i) => h.send("POST", `/api/webhooks/${HOOK}`, { body: JSON.stringify({ i }) })),
    );
    expect(answers.map((a) => a.status)).toEqual(answers.map(() => 200));
    expect(answers.some((a) => "ratelimit-limit" in a.headers)).toBe(false);
    await own.close();
    // The same API with a limit refuses part of such a burst (so the check above can fail).
    const limited = await hostileApi(await cases[0]!.open(), { webhookRatePerSecond: 5 });
    const burst = await Promise.all(
      Array.from({ length: 30 }, (_, i) =>
        limited.send("POST", `/api/webhooks/${HOOK}`, { body: JSON.stringify({ i }) }),
      ),
    );
    expect(burst.filter((a) => a.status === 429).length).toBeGreaterThan(0);
  });
});

/** A POST with the path sent byte for byte (Node's client does not normalise it); resolves with the status. */
function rawPost(port: number, path: string, token: string, body: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      {
        host: "127.0.0.1",
        port,
        method: "POST",
        path,
        headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      },
      (res) => {
        res.resume();
        res.on("end", () => resolve(res.statusCode ?? 0));
      },
    );
    req.on("error", reject);
    req.end(body);
  });
}

/** An HTTP server playing an ArcGIS layer that answers every query with `answer(url)`. */
async function fakeArcgis(answer: (url: string) => unknown): Promise<{ url: string; close(): Promise<void> }> {
  const server = createServer((req, res) => {
    const url = `http://${req.headers.host}${req.url}`;
    res.writeHead(200, { "content-type": "application/json" });
    res.end(JSON.stringify(answer(url)));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/arcgis`,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

function withArcgis(fixture: HostileFixture, url: string, token: string) {
  return {
    ...fixture,
    connections: [
      ...fixture.connections,
      {
        id: "conn_gis",
        teamId: "team_ops",
        name: "GIS",
        type: "arcgis",
        config: { url, token },
        createdAt: "2026-10-05T00:00:00Z",
      },
    ],
    datasets: [
      ...fixture.datasets,
      {
        id: "ds_gis",
        teamId: "team_ops",
        name: "Parcels",
        type: "connection",
        connectionId: "conn_gis",
        source: "0",
        columns: [],
        rows: [],
        lastRefreshedAt: null,
        updatedAt: "2026-10-05T00:00:00Z",
      },
    ],
  };
}

function withCustomConnection(fixture: HostileFixture, url: string) {
  return {
    ...fixture,
    connections: [
      ...fixture.connections,
      {
        id: "conn_custom",
        teamId: "team_ops",
        name: "Custom",
        type: "custom",
        config: { url },
        createdAt: "2026-10-05T00:00:00Z",
      },
    ],
    datasets: [
      ...fixture.datasets,
      {
        id: "ds_custom",
        teamId: "team_ops",
        name: "Custom",
        type: "connection",
        connectionId: "conn_custom",
        source: "sales",
        columns: [],
        rows: [],
        lastRefreshedAt: null,
        updatedAt: "2026-10-05T00:00:00Z",
      },
    ],
  };
}
