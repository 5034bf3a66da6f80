import { describe, expect, it } from "vitest";
import type { Change } from "../src/domain/changes.js";
import type { Row } from "../src/domain/model.js";
import type { MemoryStorage } from "../src/memory/memory-storage.js";
import { webhookFixture } from "../src/testing/conformance/webhooks.js";
import { setup } from "./support/api.js";
import { TOKENS } from "./support/fixture.js";

const OTHER_TEAM = TOKENS.noAdmin;

async function env(options: { maxStreamSeconds?: number } = {}) {
  const api = await setup({ fixture: webhookFixture(), ...options });
  const storage = api.storage as MemoryStorage;
  const token: string = TOKENS.sync;
  const changes = (path: string, query = "", t = token) =>
    api.call("GET", `/api/v1/${path}/changes${query}`, { token: t });
  const post = (values: Row) => api.call("POST", "/api/v1/tables/tbl_targets/rows", { token, body: values });
  const patch = (rowId: string, values: Row) =>
    api.call("PATCH", `/api/v1/tables/tbl_targets/rows/${rowId}`, { token, body: values });
  const remove = (rowId: string) => api.call("DELETE", `/api/v1/tables/tbl_targets/rows/${rowId}`, { token });
  return { ...api, storage, token, changes, post, patch, remove };
}

/** A copy kept by applying changes as ../shared/changes.md says. */
function apply(rows: Row[], changes: readonly Change[]): Row[] {
  let out = [...rows];
  for (const change of changes) {
    if (change.op === "insert" || change.op === "update") {
      const at = out.findIndex((r) => change.rowId !== null && r._id === change.rowId);
      if (at >= 0) out[at] = change.row;
      else out.push(change.row);
    } else if (change.op === "delete") out = out.filter((r) => r._id !== change.rowId);
    else if (change.op === "trim") {
      const at = out.findIndex((r) => r._id === change.upTo);
      if (at >= 0) out = out.slice(at + 1);
    } else throw new Error("reset: re-read");
  }
  return out;
}

describe("GET /tables/{id}/changes", () => {
  it("hands a rows read over to the feed: every write after the read once, in order, with the whole row", async () => {
    const e = await env();
    const read = await e.call("GET", "/api/v1/tables/tbl_targets/rows", { token: e.token });
    expect(read.status).toBe(200);
    const from = read.json.metadata.changesCursor as string;
    expect(typeof from).toBe("string");
    const created = await e.post({ region: "APAC", target: 5 });
    const id = created.json._id as string;
    const patched = await e.patch(id, { target: 6 });
    await e.remove("row_1");
    const page = await e.changes("tables/tbl_targets", `?cursor=${from}`);
    expect(page.status).toBe(200);
    expect(page.json).toEqual({
      changes: [
        { op: "insert", rowId: id, row: created.json, at: "2026-11-01T12:00:00.000Z" },
        { op: "update", rowId: id, row: patched.json, at: "2026-11-01T12:00:00.000Z" },
        { op: "delete", rowId: "row_1", at: "2026-11-01T12:00:00.000Z" },
      ],
      cursor: expect.any(String),
      hasMore: false,
      lagSeconds: 0,
    });
    expect(apply(read.json.data, page.json.changes)).toEqual(
      (await e.call("GET", "/api/v1/tables/tbl_targets/rows", { token: e.token })).json.data,
    );
    // An empty page hands back the cursor that was sent.
    const after = await e.changes("tables/tbl_targets", `?cursor=${page.json.cursor}`);
    expect(after.json).toEqual({ changes: [], cursor: page.json.cursor, hasMore: false, lagSeconds: 0 });
  });

  it("pages by limit, each change once along the cursor; no cursor starts at the oldest change kept", async () => {
    const e = await env();
    for (let i = 0; i < 5; i++) await e.post({ region: `R${i}`, target: i });
    const first = await e.changes("tables/tbl_targets", "?limit=2");
    expect(first.json.changes.map((c: Change) => (c.op === "insert" ? c.row.region : c.op))).toEqual(["R0", "R1"]);
    expect(first.json.hasMore).toBe(true);
    const second = await e.changes("tables/tbl_targets", `?limit=2&cursor=${first.json.cursor}`);
    const third = await e.changes("tables/tbl_targets", `?limit=2&cursor=${second.json.cursor}`);
    expect(
      [...second.json.changes, ...third.json.changes].map((c: Change) => (c.op === "insert" ? c.row.region : c.op)),
    ).toEqual(["R2", "R3", "R4"]);
    expect([second.json.hasMore, third.json.hasMore]).toEqual([true, false]);
  });

  it("follows the rows endpoints' access rules: scope, allowlist, team, and 404 for an id outside them", async () => {
    const e = await env();
    expect((await e.changes("tables/tbl_targets", "", TOKENS.readOnly)).json.error.code).toBe("insufficient_scope");
    // Outside the key's allowlist, another team's, unknown: the same 404.
    const hidden = await e.changes("datasets/ds_conn_hook_gh");
    const other = await e.changes("tables/tbl_targets", "", OTHER_TEAM);
    const unknown = await e.changes("tables/tbl_nope");
    for (const res of [hidden, other, unknown]) expect([res.status, res.json.error.code]).toEqual([404, "not_found"]);
    // A signed-in member reads any table of the team.
    expect((await e.changes("tables/tbl_targets", "", TOKENS.sessionAda)).status).toBe(200);
  });

  it("refuses a malformed cursor, or one of another feed, with 400 invalid_parameter", async () => {
    const e = await env();
    const other = (await e.call("GET", "/api/v1/datasets/ds_orders/rows", { token: e.token })).json.metadata
      .changesCursor;
    for (const cursor of ["nope", `${other}x`, other]) {
      const res = await e.changes("tables/tbl_targets", `?cursor=${encodeURIComponent(cursor)}`);
      expect([res.status, res.json.error.code, res.json.error.details.parameter]).toEqual([
        400,
        "invalid_parameter",
        "cursor",
      ]);
    }
    const limit = await e.changes("tables/tbl_targets", "?limit=1001");
    expect([limit.status, limit.json.error.details.parameter]).toEqual([400, "limit"]);
    const wait = await e.changes("tables/tbl_targets", "?wait=31");
    expect([wait.status, wait.json.error.details.parameter]).toEqual([400, "wait"]);
  });

  it("answers 410 cursor_expired for a cursor older than what retention kept", async () => {
    const e = await env();
    const from = (await e.call("GET", "/api/v1/tables/tbl_targets/rows", { token: e.token })).json.metadata
      .changesCursor;
    await e.post({ region: "OLD", target: 1 });
    await e.storage.tables.trimTableChanges(Date.parse("2026-11-02T00:00:00Z"));
    const res = await e.changes("tables/tbl_targets", `?cursor=${from}`);
    expect([res.status, res.json.error.code]).toEqual([410, "cursor_expired"]);
    expect(res.json.error.message).toMatch(/re-read the rows and follow their changesCursor/);
    // A fresh read hands over again.
    const again = (await e.call("GET", "/api/v1/tables/tbl_targets/rows", { token: e.token })).json.metadata
      .changesCursor;
    expect((await e.changes("tables/tbl_targets", `?cursor=${again}`)).json.changes).toEqual([]);
  });

  it("trims changes older than changeRetentionDays as writes and reads go on, so an old cursor expires", async () => {
    const e = await env();
    const from = (await e.call("GET", "/api/v1/tables/tbl_targets/rows", { token: e.token })).json.metadata
      .changesCursor;
    await e.post({ region: "OLD", target: 1 });
    const page = await e.changes("tables/tbl_targets", `?cursor=${from}`);
    expect(page.json.changes).toHaveLength(1);
    // Seven days and an hour later, a write trims what is older than seven days.
    e.clock.advance(7 * 24 * 3600_000 + 3600_000);
    await e.post({ region: "NEW", target: 2 });
    await new Promise((resolve) => setTimeout(resolve, 10));
    const expired = await e.changes("tables/tbl_targets", `?cursor=${from}`);
    expect([expired.status, expired.json.error.code]).toEqual([410, "cursor_expired"]);
    // The cursor after the old change still reads the new one.
    const kept = await e.changes("tables/tbl_targets", `?cursor=${page.json.cursor}`);
    expect(kept.json.changes.map((c: Change) => (c.op === "insert" ? c.row.region : c.op))).toEqual(["NEW"]);
  });

  it("audits a read that returned changes (data_access) and counts it as a read of the table", async () => {
    const e = await env();
    await e.changes("tables/tbl_targets");
    const before = e.storage.state.auditLog.filter((s) => s.event.action === "table.changes.read");
    expect(before).toEqual([]);
    await e.post({ region: "X", target: 1 });
    await e.changes("tables/tbl_targets");
    const events = e.storage.state.auditLog.filter((s) => s.event.action === "table.changes.read").map((s) => s.event);
    expect(events).toEqual([
      expect.objectContaining({
        category: "data_access",
        target: { type: "table", id: "tbl_targets" },
        details: expect.objectContaining({ returnedChanges: 1 }),
      }),
    ]);
    expect(e.storage.state.datasetReads.get("tbl_targets")?.count).toBe(2);
  });
});

describe("GET /datasets/{id}/changes", () => {
  it("follows a webhook dataset from a rows read or a download's Dataport-Changes-Cursor", async () => {
    const e = await env();
    const ada = TOKENS.sessionAda;
    const read = await e.call("GET", "/api/v1/datasets/ds_conn_hook_open/rows", { token: ada });
    const download = await e.call("GET", "/api/v1/datasets/ds_conn_hook_open/rows?format=csv", { token: ada });
    expect(download.headers.get("dataport-changes-cursor")).toBe(read.json.metadata.changesCursor);
    for (const body of [{ a: 1 }, { a: 2 }])
      expect((await e.call("POST", "/api/webhooks/hook-open", { body })).status).toBe(200);
    const page = await e.changes("datasets/ds_conn_hook_open", `?cursor=${read.json.metadata.changesCursor}`, ada);
    expect(page.json.changes.map((c: Change) => [c.op, c.op === "insert" ? c.row.a : null])).toEqual([
      ["insert", 1],
      ["insert", 2],
    ]);
    const final = (await e.call("GET", "/api/v1/datasets/ds_conn_hook_open/rows", { token: ada })).json.data;
    expect(apply(read.json.data, page.json.changes)).toEqual(final);
    expect(page.json.changes[0].rowId).toBe(final[0]._id);
  });

  it("sends an input table's changes to the tables endpoint", async () => {
    const e = await env();
    const res = await e.changes("datasets/tbl_targets");
    expect([res.status, res.json.error.code, res.json.error.details.parameter]).toEqual([
      400,
      "invalid_parameter",
      "id",
    ]);
  });
});

describe("long-poll (wait)", () => {
  it("holds a request with nothing to read until a change is written, then answers it at once", async () => {
    const e = await env();
    const from = (await e.call("GET", "/api/v1/tables/tbl_targets/rows", { token: e.token })).json.metadata
      .changesCursor;
    const started = performance.now();
    const waiting = e.changes("tables/tbl_targets", `?wait=20&cursor=${from}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
    const created = await e.post({ region: "LATE", target: 1 });
    const page = await waiting;
    expect(page.json.changes).toEqual([
      { op: "insert", rowId: created.json._id, row: created.json, at: "2026-11-01T12:00:00.000Z" },
    ]);
    expect(performance.now() - started).toBeLessThan(5000);
  });

  it("answers an empty page with the cursor sent when the wait is up, and one for another feed does not wake it", async () => {
    const e = await env();
    const from = (await e.call("GET", "/api/v1/tables/tbl_targets/rows", { token: e.token })).json.metadata
      .changesCursor;
    const started = performance.now();
    const waiting = e.changes("tables/tbl_targets", `?wait=1&cursor=${from}`);
    await e.call("POST", "/api/webhooks/hook-open", { body: { a: 1 } });
    const page = await waiting;
    expect(page.json).toEqual({ changes: [], cursor: from, hasMore: false, lagSeconds: 0 });
    expect(performance.now() - started).toBeGreaterThanOrEqual(950);
  });

  it("ends waiting requests with an empty page when the instance drains", async () => {
    const e = await env();
    const waiting = e.changes("tables/tbl_targets", "?wait=30");
    await new Promise((resolve) => setTimeout(resolve, 50));
    e.api.drain();
    const page = await waiting;
    expect([page.status, page.json.changes]).toEqual([200, []]);
  });

  it("bounds the requests waiting at once: beyond maxChangeWaiters, 429 with Retry-After", async () => {
    const e = await setupWith({ maxChangeWaiters: 1 });
    const first = e.changes("tables/tbl_targets", "?wait=30");
    await new Promise((resolve) => setTimeout(resolve, 50));
    const second = await e.changes("tables/tbl_targets", "?wait=30");
    expect([second.status, second.json.error.code, second.headers.get("retry-after")]).toEqual([
      429,
      "rate_limited",
      "1",
    ]);
    e.api.drain();
    expect((await first).status).toBe(200);
  });

  it("frees a waiting request's place when its client goes away", async () => {
    const e = await setupWith({ maxChangeWaiters: 1 });
    const controller = new AbortController();
    const gone = e.api.fetch(
      new Request("http://dataport.test/api/v1/tables/tbl_targets/changes?wait=30", {
        headers: { authorization: `Bearer ${e.token}` },
        signal: controller.signal,
      }),
    );
    await new Promise((resolve) => setTimeout(resolve, 50));
    controller.abort();
    await gone.catch(() => undefined);
    const next = e.changes("tables/tbl_targets", "?wait=1");
    expect((await next).status).toBe(200);
  });
});

async function setupWith(options: { maxChangeWaiters: number }) {
  const api = await setup({ fixture: webhookFixture(), ...options });
  const token: string = TOKENS.sync;
  return {
    ...api,
    token,
    changes: (path: string, query = "") => api.call("GET", `/api/v1/${path}/changes${query}`, { token }),
  };
}

describe("Server-Sent Events (Accept: text/event-stream)", () => {
  async function stream(e: Awaited<ReturnType<typeof env>>, headers: Record<string, string>, query = "") {
    const res = await e.api.fetch(
      new Request(`http://dataport.test/api/v1/tables/tbl_targets/changes${query}`, {
        headers: {
          authorization: `Bearer ${e.token}`,
          accept: "text/event-stream",
          "accept-encoding": "gzip",
          ...headers,
        },
      }),
    );
    return res;
  }
  const parse = (text: string) =>
    text
      .split("\n\n")
      .filter((block) => block.startsWith("id: "))
      .map((block) => {
        const [id, event, data] = block.split("\n");
        return { id: id!.slice(4), event: event!.slice(7), data: JSON.parse(data!.slice(6)) as Change };
      });

  it("streams the changes as they are written, id the cursor after each, and ends after maxStreamSeconds", async () => {
    const e = await env({ maxStreamSeconds: 1 });
    await e.post({ region: "S1", target: 1 });
    const started = performance.now();
    const res = await stream(e, {});
    expect([res.status, res.headers.get("content-type"), res.headers.get("content-encoding")]).toEqual([
      200,
      "text/event-stream; charset=utf-8",
      null,
    ]);
    const body = res.text();
    await new Promise((resolve) => setTimeout(resolve, 100));
    await e.post({ region: "S2", target: 2 });
    const events = parse(await body);
    expect(performance.now() - started).toBeGreaterThanOrEqual(900);
    expect(events.map((x) => [x.event, x.data.op === "insert" ? x.data.row.region : x.data.op])).toEqual([
      ["change", "S1"],
      ["change", "S2"],
    ]);
    // Last-Event-ID resumes like cursor: after S1, only S2.
    const again = parse(await (await stream(e, { "last-event-id": events[0]!.id })).text());
    expect(again.map((x) => (x.data.op === "insert" ? x.data.row.region : x.data.op))).toEqual(["S2"]);
    expect(again[0]!.id).toBe(events[1]!.id);
  });

  it("answers a bad Last-Event-ID with 400 before any event", async () => {
    const e = await env();
    const res = await stream(e, { "last-event-id": "nope" });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: { details: { parameter: string } } }).error.details.parameter).toBe(
      "cursor",
    );
  });
});
