import { once } from "node:events";
import http, { type IncomingMessage, type ServerResponse } from "node:http";
import net, { type AddressInfo } from "node:net";
import { gunzipSync } from "node:zlib";
import compression from "compression";
import express from "express";
import { afterEach, describe, expect, it } from "vitest";
import { toNodeHandler } from "../adapters/node.js";
import type { Row } from "../src/domain/model.js";
import { ApiError } from "../src/base/api-error.js";
import type { ApiReply, ApiRequest } from "../src/http/types.js";
import { setup } from "./support/api.js";
import { testFixture, TOKENS } from "./support/fixture.js";

const servers: http.Server[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => new Promise((r) => s.close(r))));
});

async function listen(handler: (req: IncomingMessage, res: ServerResponse) => void): Promise<string> {
  const server = http.createServer(handler);
  servers.push(server);
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

function raw(
  url: string,
  path: string,
  headers: Record<string, string>,
  options: { method?: string; agent?: http.Agent } = {},
): Promise<{ status: number; headers: http.IncomingHttpHeaders; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request(`${url}${path}`, { headers, ...options }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (d) => (body += d));
      res.on("end", () => resolve({ status: res.statusCode!, headers: res.headers, body }));
    });
    req.on("error", reject);
    req.end();
  });
}

describe("Node adapter over a real socket", () => {
  it("answers HEAD with GET's headers and length and no body, keeping the connection usable", async () => {
    const { api } = await setup();
    const url = await listen(toNodeHandler(api));
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    const send = (method: string) =>
      raw(url, "/api/v1/me", { authorization: `Bearer ${TOKENS.sync}` }, { method, agent });
    try {
      const head = await send("HEAD");
      const get = await send("GET");
      expect([head.status, head.body, head.headers["content-length"]]).toEqual([
        200,
        "",
        String(Buffer.byteLength(get.body)),
      ]);
      expect(JSON.parse(get.body).name).toBe("Warehouse sync");
    } finally {
      agent.destroy();
    }
  });

  it("reads request headers as IncomingMessage.headers combines them: any case, repeats joined, single-valued ones first-wins", async () => {
    const seen: Record<string, unknown> = {};
    const url = await listen(
      toNodeHandler({
        async handle(request) {
          for (const name of ["authorization", "X-Forwarded-For", "cookie", "x-acme-delivery", "user-agent", "absent"])
            seen[name] = request.headers.get(name);
          seen.keys = [...request.headers.keys!()].sort();
          return { status: 204, headers: {}, body: null };
        },
      }),
    );
    const status = await new Promise<number>((resolve, reject) => {
      const req = http.request(`${url}/api/v1/me`, {
        headers: {
          Authorization: ["Bearer first", "Bearer second"],
          "X-Forwarded-For": ["10.0.0.1", "10.0.0.2"],
          Cookie: ["a=1", "b=2"],
          "X-Acme-Delivery": "d-1",
        },
      });
      req.on("response", (res) => {
        res.resume();
        resolve(res.statusCode!);
      });
      req.on("error", reject);
      req.end();
    });
    expect(status).toBe(204);
    expect(seen).toEqual({
      authorization: "Bearer first",
      "X-Forwarded-For": "10.0.0.1, 10.0.0.2",
      cookie: "a=1; b=2",
      "x-acme-delivery": "d-1",
      "user-agent": null,
      absent: null,
      keys: ["authorization", "connection", "cookie", "host", "x-acme-delivery", "x-forwarded-for"],
    });
  });

  it("answers with status, CORS, request id and an exact content-length", async () => {
    const { api } = await setup();
    const url = await listen(toNodeHandler(api));
    const res = await raw(url, "/api/v1/me", { authorization: `Bearer ${TOKENS.sync}` });
    expect(res.status).toBe(200);
    expect(res.headers["access-control-allow-origin"]).toBe("*");
    expect(res.headers["x-request-id"]).toMatch(/^[0-9a-f]{16}-[0-9a-z]+$/);
    expect(res.headers["content-length"]).toBe(String(Buffer.byteLength(res.body)));
    expect(JSON.parse(res.body).name).toBe("Warehouse sync");
  });

  it("is not confused by a hostile Host header", async () => {
    const { api } = await setup();
    const url = await listen(toNodeHandler(api));
    const res = await raw(url, "/api/v1/me", { authorization: `Bearer ${TOKENS.sync}`, host: "%%%:not a host" });
    expect(res.status).toBe(200);
  });

  it("streams a large read chunked and the body is complete JSON", async () => {
    const fixture = testFixture();
    fixture.datasets[0]!.rows = Array.from({ length: 30_000 }, (_, i) => ({
      order_id: `C-${i}`,
      amount: i,
      region: "AMER",
    }));
    const { api } = await setup({ fixture });
    const url = await listen(toNodeHandler(api));
    const res = await raw(url, "/api/v1/datasets/ds_orders/rows", { authorization: `Bearer ${TOKENS.sync}` });
    expect(res.headers["transfer-encoding"]).toBe("chunked");
    const body = JSON.parse(res.body);
    expect(body.data).toHaveLength(30_000);
    expect(body.data[29_999]).toEqual({ order_id: "C-29999", amount: 29_999, region: "AMER" });
  });

  it("stops reading from storage when the client goes away mid-stream", async () => {
    const fixture = testFixture();
    fixture.datasets[0]!.rows = Array.from({ length: 200_000 }, (_, i) => ({
      order_id: `D-${i}`,
      amount: i,
      region: "APAC",
    }));
    const { api, storage } = await setup({ fixture });
    let produced = 0;
    let closed = false;
    const read = storage.rows.readDatasetRows.bind(storage.catalog);
    storage.rows.readDatasetRows = async (id, query) => {
      const page = await read(id, query);
      async function* counted(): AsyncGenerator<Row> {
        try {
          for await (const row of page.rows) {
            produced++;
            yield row;
          }
        } finally {
          closed = true;
        }
      }
      return {
        totalRows: page.totalRows,
        rows: counted(),
        lastKey: () => page.lastKey(),
        changesHead: page.changesHead,
      };
    };
    const url = await listen(toNodeHandler(api));
    await new Promise<void>((resolve) => {
      const req = http.request(
        `${url}/api/v1/datasets/ds_orders/rows`,
        { headers: { authorization: `Bearer ${TOKENS.sync}` } },
        (res) => {
          res.once("data", () => {
            req.destroy();
            resolve();
          });
        },
      );
      req.end();
    });
    for (let i = 0; i < 100 && !closed; i++) await new Promise((r) => setTimeout(r, 20));
    expect(closed).toBe(true);
    expect(produced).toBeLessThan(200_000);
  });

  it("receives a webhook with the peer address and de-duplicates on any X-<vendor>-Delivery header", async () => {
    const { webhookFixture } = await import("../src/testing/conformance/webhooks.js");
    const { api } = await setup({ fixture: webhookFixture() });
    const url = await listen(toNodeHandler(api));
    const post = () =>
      fetch(`${url}/api/webhooks/hook-open`, {
        method: "POST",
        headers: { "content-type": "application/json", "x-acme-delivery": "delivery-42" },
        body: JSON.stringify({ event: "ping" }),
      }).then(async (r) => ({ status: r.status, body: await r.json() }));
    const first = await post();
    const second = await post();
    expect(first).toEqual({ status: 200, body: { ok: true, id: first.body.id, duplicate: false } });
    expect(second).toEqual({ status: 200, body: { ok: true, id: first.body.id, duplicate: true } });
    const rows = await fetch(`${url}/api/v1/datasets/ds_conn_hook_open/rows`, {
      headers: { authorization: `Bearer ${TOKENS.sessionAda}` },
    });
    const body = await rows.json();
    expect(body.data).toHaveLength(1);
    expect(body.data[0]).toMatchObject({ _id: first.body.id, _sourceIp: "127.0.0.1", event: "ping" });
  });

  /**
   * Writes a request by hand in pieces, so the body arrives in several chunks (or never completes). Resolves with the
   * raw response.
   */
  function rawPost(
    url: string,
    head: string,
    pieces: Array<string | Buffer>,
    opts: { leave?: boolean } = {},
  ): Promise<string> {
    const { hostname, port } = new URL(url);
    return new Promise((resolve, reject) => {
      const socket = net.connect(Number(port), hostname, async () => {
        socket.write(head);
        for (const piece of pieces) {
          await new Promise((r) => setTimeout(r, 15));
          socket.write(piece);
        }
        if (opts.leave) {
          socket.destroy();
          resolve("");
        }
      });
      let received = "";
      socket.on("data", (d) => {
        received += d.toString("utf8");
        if (/\r\n\r\n/.test(received) && /"ok":true|"error"/.test(received)) {
          socket.end();
          resolve(received);
        }
      });
      socket.on("error", reject);
    });
  }

  async function rowsOf(url: string): Promise<Row[]> {
    const res = await fetch(`${url}/api/v1/datasets/ds_conn_hook_open/rows`, {
      headers: { authorization: `Bearer ${TOKENS.sessionAda}` },
    });
    return ((await res.json()) as { data: Row[] }).data;
  }

  it("receives a declared-length body that arrives in several pieces, and a chunked one", async () => {
    const { webhookFixture } = await import("../src/testing/conformance/webhooks.js");
    const { api } = await setup({ fixture: webhookFixture() });
    const url = await listen(toNodeHandler(api));
    const body = JSON.stringify({ event: "split", note: "é".repeat(50) });
    const bytes = Buffer.from(body);
    // Split inside the two-byte "é", so a piece ends mid-character.
    const cut = bytes.indexOf(Buffer.from("é")) + 1;
    const declared = await rawPost(
      url,
      `POST /api/webhooks/hook-open HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${bytes.length}\r\n\r\n`,
      [bytes.subarray(0, cut), bytes.subarray(cut)],
    );
    expect(declared).toMatch(/^HTTP\/1.1 200 OK/);
    const chunked = await rawPost(
      url,
      `POST /api/webhooks/hook-open HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n`,
      [
        `${Buffer.byteLength('{"event":').toString(16)}\r\n{"event":\r\n`,
        `${Buffer.byteLength('"chunked"}').toString(16)}\r\n"chunked"}\r\n0\r\n\r\n`,
      ],
    );
    expect(chunked).toMatch(/^HTTP\/1.1 200 OK/);
    const rows = await rowsOf(url);
    expect(rows.map((r) => r.event)).toEqual(["split", "chunked"]);
    expect(rows[0]!.note).toBe("é".repeat(50));
  });

  it("stores nothing, logs no error and keeps serving when a client leaves in the middle of a body", async () => {
    const { webhookFixture } = await import("../src/testing/conformance/webhooks.js");
    const logged: string[] = [];
    const { api } = await setup({
      fixture: webhookFixture(),
      logger: (message, error) => logged.push(`${message}: ${String(error)}`),
    });
    const url = await listen(toNodeHandler(api));
    for (const length of [100, 200_000]) {
      // 100 bytes are read before handling; 200 000 are over that bound and read when the route asks.
      await rawPost(
        url,
        `POST /api/webhooks/hook-open HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${length}\r\n\r\n`,
        ['{"event":"cut'],
        {
          leave: true,
        },
      );
    }
    await new Promise((r) => setTimeout(r, 50));
    const after = await fetch(`${url}/api/webhooks/hook-open`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: '{"event":"after"}',
    });
    expect(after.status).toBe(200);
    expect((await rowsOf(url)).map((r) => r.event)).toEqual(["after"]);
    // The cut-off body read on demand is a 400 for nobody, not an unexpected (500) error.
    expect(logged).toEqual([]);
  });

  it("reads a body over the read-ahead bound when the route asks, and refuses one over the limit with 413", async () => {
    const { webhookFixture } = await import("../src/testing/conformance/webhooks.js");
    const { api } = await setup({ fixture: webhookFixture(), maxBodyBytes: 150_000 });
    const url = await listen(toNodeHandler(api));
    const post = (size: number) =>
      fetch(`${url}/api/webhooks/hook-open`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ event: "big", pad: "x".repeat(size) }),
      });
    const big = await post(100_000);
    expect(big.status).toBe(200);
    const over = await post(200_000);
    expect([over.status, ((await over.json()) as { error: { code: string } }).error.code]).toEqual([
      413,
      "payload_too_large",
    ]);
    const rows = await rowsOf(url);
    expect(rows.map((r) => [r.event, String(r.pad).length])).toEqual([["big", 100_000]]);
  });

  it("answers 500, and logs why, when a body parser mounted before it has already read the body", async () => {
    const { webhookFixture } = await import("../src/testing/conformance/webhooks.js");
    const logged: string[] = [];
    const { api } = await setup({
      fixture: webhookFixture(),
      logger: (message, error) => logged.push(`${message}: ${String(error)}`),
    });
    const dataport = toNodeHandler(api);
    // What express.json() does: read the whole stream, then hand on.
    const url = await listen((req, res) => {
      req.resume();
      req.on("end", () => dataport(req, res, () => res.end("not for Dataport")));
    });
    const res = await fetch(`${url}/api/webhooks/hook-open`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: '{"event":"x"}',
    });
    expect(res.status).toBe(500);
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe("internal");
    expect(logged.join("\n")).toMatch(
      /the request body was read before Dataport saw it: mount toNodeHandler before body-parsing middleware/,
    );
    expect(await rowsOf(url)).toEqual([]);
  });

  it("passes other paths to next() as Express/Connect middleware", async () => {
    const { api } = await setup();
    const handler = toNodeHandler(api);
    const url = await listen((req, res) =>
      handler(req, res, () => {
        res.writeHead(200, { "content-type": "text/plain" });
        res.end("from the host app");
      }),
    );
    expect((await raw(url, "/dashboard", {})).body).toBe("from the host app");
    expect((await raw(url, "/api/v1/me", {})).status).toBe(401);
  });
});

describe("Node adapter as Express middleware under a mount path", () => {
  /** An Express app with Dataport mounted at `mount` and a host route beside it; its origin. */
  async function expressHost(mount: string | null): Promise<string> {
    const { webhookFixture } = await import("../src/testing/conformance/webhooks.js");
    const { api } = await setup({ fixture: webhookFixture() });
    const app = express();
    if (mount === null) app.use(toNodeHandler(api));
    else app.use(mount, toNodeHandler(api));
    app.use((req, res) => res.status(418).type("text/plain").send(`host: ${req.originalUrl}`));
    return listen(app);
  }
  const me = (url: string, path: string) =>
    fetch(`${url}${path}`, { headers: { authorization: `Bearer ${TOKENS.sessionAda}` } });

  it.each([
    [null, "/api/v1/me"],
    ["/bi", "/bi/api/v1/me"],
    ["/api", "/api/v1/me"],
    ["/bi/api", "/bi/api/v1/me"],
    ["/api/v1", "/api/v1/me"],
  ])("mounted at %s, answers %s and leaves the host's paths to the host", async (mount, path) => {
    const url = await expressHost(mount);
    const res = await me(url, path);
    expect(res.status).toBe(200);
    expect(((await res.json()) as { kind: string }).kind).toBe("session-token");
    const other = await fetch(`${url}/reports`);
    expect([other.status, await other.text()]).toEqual([418, "host: /reports"]);
  });

  it("under /bi, serves the API only below the mount: /api/v1 at the root and a prefix deeper in are the host's", async () => {
    const url = await expressHost("/bi");
    const root = await me(url, "/api/v1/me");
    expect([root.status, await root.text()]).toEqual([418, "host: /api/v1/me"]);
    const beside = await fetch(`${url}/bi/reports`);
    expect([beside.status, await beside.text()]).toEqual([418, "host: /bi/reports"]);
    const deeper = await me(url, "/bi/reports/api/v1/me");
    expect([deeper.status, await deeper.text()]).toEqual([418, "host: /bi/reports/api/v1/me"]);
    const unknown = await me(url, "/bi/api/v1/nothing-here");
    expect([unknown.status, ((await unknown.json()) as { error: { code: string } }).error.code]).toEqual([
      404,
      "not_found",
    ]);
  });

  it("under /bi, receives a webhook (query string and body intact) and reads it back", async () => {
    const url = await expressHost("/bi");
    const post = await fetch(`${url}/bi/api/webhooks/hook-open?source=mounted`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ event: "mounted" }),
    });
    expect(post.status).toBe(200);
    const rows = await me(url, "/bi/api/v1/datasets/ds_conn_hook_open/rows?columns=event,_sourceIp");
    expect(((await rows.json()) as { data: Row[] }).data).toEqual([{ event: "mounted", _sourceIp: "127.0.0.1" }]);
  });
});

describe("Node adapter behind Express's compression()", () => {
  it("streams a 20,000-row CSV export through it with one drain listener, so Node never warns MaxListenersExceededWarning", async () => {
    const fixture = testFixture();
    fixture.datasets[0]!.rows = Array.from({ length: 20_000 }, (_, i) => ({
      order_id: `Z-${i}`,
      amount: i,
      region: `EMEA ${"n".repeat(100)}`,
    }));
    // Dataport's own compression off: the host's middleware compresses.
    const { api } = await setup({ fixture, compression: false });
    const app = express();
    app.use(compression());
    app.use(toNodeHandler(api));
    const url = await listen(app);
    const warnings: Error[] = [];
    const onWarning = (warning: Error) => warnings.push(warning);
    process.on("warning", onWarning);
    try {
      const body = await new Promise<{ encoding: string | undefined; bytes: Buffer }>((resolve, reject) => {
        const headers = { authorization: `Bearer ${TOKENS.sync}`, "accept-encoding": "gzip" };
        const req = http.request(`${url}/api/v1/datasets/ds_orders/rows?format=csv`, { headers }, (res) => {
          const parts: Buffer[] = [];
          res.on("data", (chunk: Buffer) => parts.push(chunk));
          res.on("end", () => resolve({ encoding: res.headers["content-encoding"], bytes: Buffer.concat(parts) }));
        });
        req.on("error", reject);
        req.end();
      });
      // Warnings are emitted on the next tick.
      await new Promise((resolve) => setImmediate(resolve));
      expect(body.encoding).toBe("gzip");
      const lines = gunzipSync(body.bytes).toString("utf8").trimEnd().split("\r\n");
      expect(lines).toHaveLength(20_001);
      expect(lines[20_000]).toBe(`Z-19999,19999,EMEA ${"n".repeat(100)}`);
      expect(warnings.map((w) => w.name)).toEqual([]);
    } finally {
      process.off("warning", onWarning);
    }
  });
});

describe("Node adapter: client addresses", () => {
  it("stores an IPv4 peer of a dual-stack listener (::ffff:127.0.0.1) as 127.0.0.1", async () => {
    const { webhookFixture } = await import("../src/testing/conformance/webhooks.js");
    const { api } = await setup({ fixture: webhookFixture() });
    const server = http.createServer(toNodeHandler(api));
    servers.push(server);
    let peer = "";
    server.on("connection", (socket: net.Socket) => void (peer = socket.remoteAddress ?? ""));
    server.listen(0, "::");
    await once(server, "listening");
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const post = await fetch(`${url}/api/webhooks/hook-open`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: '{"event":"v4"}',
    });
    expect(post.status).toBe(200);
    expect(peer).toBe("::ffff:127.0.0.1");
    const rows = await fetch(`${url}/api/v1/datasets/ds_conn_hook_open/rows?columns=_sourceIp`, {
      headers: { authorization: `Bearer ${TOKENS.sessionAda}` },
    });
    expect(((await rows.json()) as { data: Row[] }).data).toEqual([{ _sourceIp: "127.0.0.1" }]);
  });
});

describe("Node adapter: a body streamed on demand (streamBody)", () => {
  /**
   * An API whose one route hands `request.streamBody(limit)` to `consume` and answers with its result (or its
   * ApiError).
   */
  function streamingApi(
    limit: number,
    consume: (chunks: AsyncIterable<Uint8Array>) => Promise<unknown>,
    seen: unknown[] = [],
  ) {
    return {
      async handle(request: ApiRequest): Promise<ApiReply> {
        try {
          const result = await consume(request.streamBody!(limit));
          return { status: 200, headers: { "content-type": "application/json" }, body: JSON.stringify(result) };
        } catch (error) {
          seen.push(error);
          if (!(error instanceof ApiError)) throw error;
          return {
            status: error.status,
            headers: { "content-type": "application/json" },
            body: JSON.stringify({ code: error.code, message: error.message }),
          };
        }
      },
    };
  }

  async function summary(chunks: AsyncIterable<Uint8Array>): Promise<{ chunks: number; bytes: number; text: string }> {
    const parts: Buffer[] = [];
    for await (const chunk of chunks) parts.push(Buffer.from(chunk));
    const whole = Buffer.concat(parts);
    return { chunks: parts.length, bytes: whole.length, text: whole.length <= 100 ? whole.toString("utf8") : "" };
  }

  it("yields a small body it read ahead as one chunk, and an empty body as none", async () => {
    const url = await listen(toNodeHandler(streamingApi(1000, summary)));
    const small = await fetch(`${url}/api/x`, {
      method: "PUT",
      headers: { "content-type": "text/csv" },
      body: "a,b\n1,2\n",
    });
    expect(await small.json()).toEqual({ chunks: 1, bytes: 8, text: "a,b\n1,2\n" });
    const empty = await fetch(`${url}/api/x`, { method: "PUT", body: "" });
    expect(await empty.json()).toEqual({ chunks: 0, bytes: 0, text: "" });
  });

  it("streams a large body chunk by chunk, whole and in order", async () => {
    const url = await listen(toNodeHandler(streamingApi(50_000_000, summary)));
    const body = Buffer.alloc(3_000_000);
    for (let i = 0; i < body.length; i++) body[i] = i % 251;
    const hashed = async (chunks: AsyncIterable<Uint8Array>) => {
      const { createHash } = await import("node:crypto");
      const hash = createHash("sha256");
      let count = 0;
      for await (const chunk of chunks) {
        hash.update(chunk);
        count++;
      }
      return { count, sha: hash.digest("hex") };
    };
    const hashUrl = await listen(toNodeHandler(streamingApi(50_000_000, hashed)));
    const res = await fetch(`${hashUrl}/api/x`, { method: "PUT", body });
    const got = (await res.json()) as { count: number; sha: string };
    const { createHash } = await import("node:crypto");
    expect(got.sha).toBe(createHash("sha256").update(body).digest("hex"));
    expect(got.count).toBeGreaterThan(1);
    expect((await (await fetch(`${url}/api/x`, { method: "PUT", body })).json()).bytes).toBe(3_000_000);
  });

  it("pauses the socket while the consumer is busy (back-pressure): a stalled consumer does not pull the body into memory", async () => {
    const sockets: net.Socket[] = [];
    let bytesReadWhileStalled = -1;
    let consumed = 0;
    const slow = async (chunks: AsyncIterable<Uint8Array>) => {
      for await (const chunk of chunks) {
        consumed += chunk.byteLength;
        if (bytesReadWhileStalled === -1) {
          await new Promise((r) => setTimeout(r, 400));
          bytesReadWhileStalled = sockets[0]!.bytesRead;
        }
      }
      return { consumed };
    };
    const handler = toNodeHandler(streamingApi(100_000_000, slow));
    const url = await listen((req, res) => {
      sockets.push(req.socket);
      handler(req, res);
    });
    const size = 32 * 1024 * 1024;
    const res = await fetch(`${url}/api/x`, { method: "PUT", body: Buffer.alloc(size, 120) });
    expect(await res.json()).toEqual({ consumed: size });
    // Flowing, the server would have read the whole 32 MiB from the socket in 400 ms; paused, Node stops
    // reading once its own small buffers fill (the rest waits in the kernel and the client's write blocks).
    expect(bytesReadWhileStalled).toBeGreaterThan(0);
    expect(bytesReadWhileStalled).toBeLessThan(4 * 1024 * 1024);
  });

  it("refuses a body over the limit with 413, counted or declared, and still answers on the connection", async () => {
    const url = await listen(toNodeHandler(streamingApi(100_000, summary)));
    const declared = await fetch(`${url}/api/x`, { method: "PUT", body: Buffer.alloc(200_000, 97) });
    expect(declared.status).toBe(413);
    expect(await declared.json()).toEqual({
      code: "payload_too_large",
      message: "request body is larger than 100000 bytes",
    });
    // Chunked, no declared length: counted as it arrives.
    const chunked = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      // Connection: close: a server keeps a connection answered before its request ended busy until its keep-alive
      // timeout.
      const req = http.request(`${url}/api/x`, { method: "PUT", headers: { connection: "close" } }, (res) => {
        let body = "";
        res.on("data", (d) => (body += d));
        res.on("end", () => resolve({ status: res.statusCode!, body }));
      });
      req.on("error", reject);
      for (let i = 0; i < 10; i++) req.write(Buffer.alloc(30_000, 98));
      req.end();
    });
    expect(chunked.status).toBe(413);
    expect(JSON.parse(chunked.body).code).toBe("payload_too_large");
  });

  it("answers when the consumer stops early (a refused row), reading and dropping the rest of the body", async () => {
    const firstOnly = async (chunks: AsyncIterable<Uint8Array>) => {
      for await (const _ of chunks) throw new ApiError(422, "validation_failed", "line 1: refused");
      return {};
    };
    const url = await listen(toNodeHandler(streamingApi(100_000_000, firstOnly)));
    for (let round = 0; round < 2; round++) {
      const res = await fetch(`${url}/api/x`, { method: "PUT", body: Buffer.alloc(5_000_000, 99) });
      expect(res.status).toBe(422);
      expect(await res.json()).toEqual({ code: "validation_failed", message: "line 1: refused" });
    }
  });

  it("throws 400 'the request body was cut off' when the client goes away mid-body, and keeps serving", async () => {
    const seen: unknown[] = [];
    const url = await listen(toNodeHandler(streamingApi(100_000_000, summary, seen)));
    const { hostname, port } = new URL(url);
    await new Promise<void>((resolve) => {
      const socket = net.connect(Number(port), hostname, () => {
        socket.write(`PUT /api/x HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000\r\n\r\n`);
        socket.write(Buffer.alloc(200_000, 100), () => setTimeout(() => (socket.destroy(), resolve()), 50));
      });
    });
    for (let i = 0; i < 50 && seen.length === 0; i++) await new Promise((r) => setTimeout(r, 10));
    expect(seen).toHaveLength(1);
    expect(seen[0]).toMatchObject({ status: 400, code: "invalid_body", message: "the request body was cut off" });
    const after = await fetch(`${url}/api/x`, { method: "PUT", body: "ok" });
    expect(await after.json()).toEqual({ chunks: 1, bytes: 2, text: "ok" });
  });
});
