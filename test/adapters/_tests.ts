import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BIG_ROWS, TOKENS, WEBHOOK_ENDPOINT } from "./_fixture.js";
import type { Target } from "./_utils.js";

/**
 * The HTTP-level tests every adapter passes: one list, run against the Node
 * adapter in-process and against real Bun and Deno processes. A test of a
 * route another part of the project provides skips, saying so, while the
 * served OpenAPI document does not list that route yet.
 */
export function describeAdapter(name: string, start: () => Promise<Target>): void {
  describe(`adapter: ${name}`, () => {
    let target: Target;
    let operations = new Set<string>();
    const url = (path: string) => target.url + path;
    const auth = { authorization: `Bearer ${TOKENS.sync}` };
    const needs = (skip: (note: string) => never, method: string, path: string) => {
      if (!operations.has(`${method} ${path}`)) skip(`${method} ${path} is not in this build's route table yet`);
    };

    beforeAll(async () => {
      target = await start();
      const document = (await (await fetch(url("/api/v1/openapi.json"))).json()) as { paths: Record<string, object> };
      operations = new Set(
        Object.entries(document.paths).flatMap(([path, item]) =>
          Object.keys(item).map((method) => `${method.toUpperCase()} ${path}`),
        ),
      );
    }, 120_000);

    afterAll(async () => {
      await target?.stop();
    });

    it("answers a preflight with 204 and CORS headers, and puts CORS on every response", async () => {
      const preflight = await fetch(url("/api/v1/datasets"), {
        method: "OPTIONS",
        headers: {
          origin: "https://app.example",
          "access-control-request-method": "GET",
          "access-control-request-headers": "authorization",
        },
      });
      expect(preflight.status).toBe(204);
      expect(preflight.headers.get("access-control-allow-origin")).toBe("*");
      expect(preflight.headers.get("access-control-allow-methods")).toBe("GET, POST, PATCH, DELETE, OPTIONS");
      expect(preflight.headers.get("access-control-allow-headers")!.split(", ")).toEqual(
        expect.arrayContaining(["Content-Type", "Authorization", "Idempotency-Key"]),
      );
      const ok = await fetch(url("/api/v1/me"), { headers: { ...auth, origin: "https://app.example" } });
      expect(ok.headers.get("access-control-allow-origin")).toBe("*");
      expect(ok.headers.get("x-request-id")).toMatch(/^[0-9a-f]{16}-[0-9a-z]+$/);
      await ok.body?.cancel();
    });

    it("refuses a request without a token with 401 and accepts the key", async () => {
      const missing = await fetch(url("/api/v1/me"));
      expect(missing.status).toBe(401);
      expect(missing.headers.get("www-authenticate")).toBe("Bearer");
      expect(missing.headers.get("content-type")).toBe("application/json; charset=utf-8");
      const body = (await missing.json()) as { error: { code: string; requestId: string } };
      expect(body.error.code).toBe("unauthorized");
      expect(body.error.requestId).toBe(missing.headers.get("x-request-id"));
      const me = await fetch(url("/api/v1/me"), { headers: auth });
      expect(me.status).toBe(200);
      expect(await me.json()).toMatchObject({ kind: "api-key", name: "Warehouse sync" });
    });

    it("reads dataset rows with query parameters", async () => {
      const filters = encodeURIComponent(JSON.stringify({ region: "EMEA" }));
      const res = await fetch(
        url(`/api/v1/datasets/ds_orders/rows?columns=order_id,amount&filters=${filters}&maxRows=2`),
        { headers: auth },
      );
      expect(res.status).toBe(200);
      const body = (await res.json()) as { data: unknown[]; metadata: Record<string, unknown> };
      expect(body.data).toEqual([
        { order_id: "A-1", amount: 12.5 },
        { order_id: "A-3", amount: 7.25 },
      ]);
      expect(body.metadata).toMatchObject({
        totalRows: 3,
        returnedRows: 2,
        hasMore: true,
        columns: ["order_id", "amount"],
      });
    });

    it("writes a table row, and replays it for the same Idempotency-Key", async ({ skip }) => {
      needs(skip, "POST", "/api/v1/tables/{id}/rows");
      const key = `adapter-${name}-${Date.now()}`;
      const post = () =>
        fetch(url("/api/v1/tables/tbl_targets/rows"), {
          method: "POST",
          headers: { ...auth, "content-type": "application/json", "idempotency-key": key },
          body: JSON.stringify({ region: `LATAM-${name}`, target: 5 }),
        });
      const first = await post();
      expect(first.status).toBe(201);
      const row = (await first.json()) as Record<string, unknown>;
      expect(row).toMatchObject({ region: `LATAM-${name}`, target: 5 });
      expect(row._id).toEqual(expect.any(String));
      const again = await post();
      expect(again.status).toBe(201);
      expect(again.headers.get("idempotent-replayed")).toBe("true");
      expect(((await again.json()) as { _id: string })._id).toBe(row._id);
      const list = await fetch(url("/api/v1/tables/tbl_targets/rows?limit=1000"), { headers: auth });
      const rows = ((await list.json()) as { data: Array<Record<string, unknown>> }).data;
      expect(rows.filter((r) => r.region === `LATAM-${name}`)).toHaveLength(1);
    });

    it("stores a webhook payload with the client address the runtime reports", async ({ skip }) => {
      needs(skip, "POST", "/api/webhooks/{id}");
      const res = await fetch(url(`/api/webhooks/${WEBHOOK_ENDPOINT}`), {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ event: "signup", user: { name: `Ada on ${name}` } }),
      });
      expect(res.status).toBe(200);
      const ack = (await res.json()) as { ok: boolean; id: string; duplicate: boolean };
      expect(ack).toMatchObject({ ok: true, duplicate: false });
      const filters = encodeURIComponent(JSON.stringify({ _id: ack.id }));
      const read = await fetch(url(`/api/v1/datasets/ds_hook/rows?filters=${filters}`), { headers: auth });
      const rows = ((await read.json()) as { data: Array<Record<string, unknown>> }).data;
      expect(rows).toHaveLength(1);
      expect(rows[0]).toMatchObject({ event: "signup", "user.name": `Ada on ${name}`, _id: ack.id });
      expect(rows[0]!._sourceIp).toBe("127.0.0.1");
    });

    it("streams a large rows response in many chunks that form one JSON document", async () => {
      const res = await fetch(url("/api/v1/datasets/ds_big/rows"), { headers: auth });
      expect(res.status).toBe(200);
      expect(res.headers.get("content-length")).toBeNull();
      const reader = res.body!.getReader();
      const decoder = new TextDecoder();
      let text = "";
      let chunks = 0;
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        chunks++;
        text += decoder.decode(value, { stream: true });
      }
      text += decoder.decode();
      expect(chunks).toBeGreaterThan(1);
      const body = JSON.parse(text) as {
        data: Array<{ n: number }>;
        metadata: { totalRows: number; hasMore: boolean };
      };
      expect(body.data).toHaveLength(BIG_ROWS);
      expect(body.data[BIG_ROWS - 1]).toEqual({ n: BIG_ROWS - 1, label: `row number ${BIG_ROWS - 1}`, even: false });
      expect(body.metadata).toMatchObject({ totalRows: BIG_ROWS, hasMore: false });
    });

    it("compresses by Accept-Encoding on this runtime: gzip and brotli, whole pages and streamed ones", async () => {
      for (const coding of ["gzip", "br"]) {
        for (const path of ["/api/v1/datasets/ds_big/rows?maxRows=500", "/api/v1/datasets/ds_big/rows?format=ndjson"]) {
          const res = await fetch(url(path), { headers: { ...auth, "accept-encoding": coding } });
          expect(
            [res.status, res.headers.get("content-encoding"), res.headers.get("vary")],
            `${coding} ${path}`,
          ).toEqual([200, coding, "Accept-Encoding"]);
          // fetch decompresses what it receives.
          const text = await res.text();
          const rows = path.includes("ndjson")
            ? text
                .trimEnd()
                .split("\n")
                .map((line) => JSON.parse(line))
            : (JSON.parse(text) as { data: unknown[] }).data;
          expect(rows).toHaveLength(path.includes("ndjson") ? BIG_ROWS : 500);
          expect(rows[0]).toEqual({ n: 0, label: "row number 0", even: true });
        }
      }
    });

    it("survives a client that aborts a streaming read, and keeps serving", async () => {
      for (let i = 0; i < 3; i++) {
        const controller = new AbortController();
        const res = await fetch(url("/api/v1/datasets/ds_big/rows"), { headers: auth, signal: controller.signal });
        const reader = res.body!.getReader();
        const first = await reader.read();
        expect(first.done).toBe(false);
        controller.abort();
        await expect(reader.read()).rejects.toThrow();
      }
      const me = await fetch(url("/api/v1/me"), { headers: auth });
      expect(me.status).toBe(200);
      await me.body?.cancel();
    });
  });
}
