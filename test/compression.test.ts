import { once } from "node:events";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { brotliDecompressSync, gunzipSync } from "node:zlib";
import { afterEach, describe, expect, it } from "vitest";
import { toNodeHandler } from "../adapters/node.js";
import { chooseCoding } from "../src/http/compression.js";
import { setup } from "./support/api.js";
import { testFixture, TOKENS } from "./support/fixture.js";

/** The test fixture with ds_orders holding `count` rows of about 110 bytes of JSON each. */
function fixtureWith(count: number) {
  const fixture = testFixture();
  fixture.datasets[0]!.rows = Array.from({ length: count }, (_, i) => ({
    order_id: `C-${i}`,
    amount: i / 4,
    region: `EMEA north-west ${i % 7}`,
  }));
  return fixture;
}

async function bytesOf(response: Response): Promise<Buffer> {
  return Buffer.from(await response.arrayBuffer());
}

describe("compression by Accept-Encoding", () => {
  it("sends a 1,000-row page gzip-compressed, with Vary and the ETag of the compressed bytes, and the same JSON inside", async () => {
    const { api } = await setup({ fixture: fixtureWith(1000) });
    const get = (headers: Record<string, string>) =>
      api.fetch(
        new Request("http://dataport.test/api/v1/datasets/ds_orders/rows?maxRows=1000", {
          headers: { authorization: `Bearer ${TOKENS.sync}`, ...headers },
        }),
      );
    const plain = await get({});
    const plainBytes = await bytesOf(plain);
    expect([plain.headers.get("content-encoding"), plain.headers.get("vary")]).toEqual([null, "Accept-Encoding"]);
    const gzipped = await get({ "accept-encoding": "gzip" });
    const bytes = await bytesOf(gzipped);
    expect([gzipped.status, gzipped.headers.get("content-encoding"), gzipped.headers.get("vary")]).toEqual([
      200,
      "gzip",
      "Accept-Encoding",
    ]);
    expect(gunzipSync(bytes).equals(plainBytes)).toBe(true);
    expect(bytes.length).toBeLessThan(plainBytes.length / 5);
    expect(gzipped.headers.get("etag")).toBe(`${plain.headers.get("etag")!.slice(0, -1)}-gzip"`);
    // The compressed page's tag revalidates it.
    const again = await get({ "accept-encoding": "gzip", "if-none-match": gzipped.headers.get("etag")! });
    expect([again.status, again.headers.get("etag")]).toEqual([304, gzipped.headers.get("etag")]);
  });

  it("prefers brotli when the client takes both, and follows q-values", async () => {
    const { api } = await setup({ fixture: fixtureWith(1000) });
    const get = (acceptEncoding: string) =>
      api.fetch(
        new Request("http://dataport.test/api/v1/datasets/ds_orders/rows", {
          headers: { authorization: `Bearer ${TOKENS.sync}`, "accept-encoding": acceptEncoding },
        }),
      );
    const br = await get("gzip, deflate, br");
    expect(br.headers.get("content-encoding")).toBe("br");
    const page = JSON.parse(brotliDecompressSync(await bytesOf(br)).toString("utf8"));
    expect([page.data.length, page.data[999]]).toEqual([
      1000,
      { order_id: "C-999", amount: 249.75, region: "EMEA north-west 5" },
    ]);
    expect((await get("br;q=0, gzip")).headers.get("content-encoding")).toBe("gzip");
    expect((await get("gzip;q=0.5, br;q=0.4")).headers.get("content-encoding")).toBe("gzip");
    expect((await get("identity")).headers.get("content-encoding")).toBeNull();
    expect((await get("*")).headers.get("content-encoding")).toBe("br");
    expect((await get("*;q=0")).headers.get("content-encoding")).toBeNull();
  });

  it("streams a 20,000-row NDJSON download compressed, chunk by chunk, whole once decompressed", async () => {
    const { api } = await setup({ fixture: fixtureWith(20_000) });
    for (const [coding, decompress] of [
      ["gzip", gunzipSync],
      ["br", brotliDecompressSync],
    ] as const) {
      const res = await api.fetch(
        new Request("http://dataport.test/api/v1/datasets/ds_orders/rows?format=ndjson", {
          headers: { authorization: `Bearer ${TOKENS.sync}`, "accept-encoding": coding },
        }),
      );
      expect([res.headers.get("content-encoding"), res.headers.get("content-type")]).toEqual([
        coding,
        "application/x-ndjson",
      ]);
      const lines = decompress(await bytesOf(res))
        .toString("utf8")
        .trimEnd()
        .split("\n");
      expect(lines).toHaveLength(20_000);
      expect(JSON.parse(lines[19_999]!)).toEqual({ order_id: "C-19999", amount: 4999.75, region: "EMEA north-west 0" });
    }
  });

  it("leaves tiny answers alone: no Content-Encoding and no Vary on /me, a webhook receipt or an error", async () => {
    const { call } = await setup();
    const me = await call("GET", "/api/v1/me", { token: TOKENS.sync, headers: { "accept-encoding": "gzip, br" } });
    expect([me.status, me.headers.get("content-encoding"), me.headers.get("vary")]).toEqual([200, null, null]);
    const error = await call("GET", "/api/v1/datasets/ds_nowhere", {
      token: TOKENS.sync,
      headers: { "accept-encoding": "gzip, br" },
    });
    expect([error.status, error.headers.get("content-encoding")]).toEqual([404, null]);
  });

  it("compresses the OpenAPI document", async () => {
    const { api } = await setup();
    const res = await api.fetch(
      new Request("http://dataport.test/api/v1/openapi.json", { headers: { "accept-encoding": "gzip" } }),
    );
    expect(res.headers.get("content-encoding")).toBe("gzip");
    expect(JSON.parse(gunzipSync(await bytesOf(res)).toString("utf8")).openapi).toBe("3.1.0");
  });

  it("is off with compression: false (a proxy in front compresses)", async () => {
    const { api } = await setup({ fixture: fixtureWith(1000), compression: false });
    const res = await api.fetch(
      new Request("http://dataport.test/api/v1/datasets/ds_orders/rows", {
        headers: { authorization: `Bearer ${TOKENS.sync}`, "accept-encoding": "gzip, br" },
      }),
    );
    expect([res.headers.get("content-encoding"), res.headers.get("vary")]).toEqual([null, null]);
    expect(((await res.json()) as { data: unknown[] }).data).toHaveLength(1000);
  });

  it("takes compressionMinBytes as the threshold of whole answers", async () => {
    const { api } = await setup({ compressionMinBytes: 100 });
    const me = await api.fetch(
      new Request("http://dataport.test/api/v1/me", {
        headers: { authorization: `Bearer ${TOKENS.sync}`, "accept-encoding": "gzip" },
      }),
    );
    expect(me.headers.get("content-encoding")).toBe("gzip");
    expect(JSON.parse(gunzipSync(await bytesOf(me)).toString("utf8")).name).toBe("Warehouse sync");
  });
});

describe("compression through the Node adapter", () => {
  const servers: http.Server[] = [];
  afterEach(async () => {
    await Promise.all(servers.splice(0).map((s) => new Promise((r) => s.close(r))));
  });

  it("sends the compressed length as Content-Length, answers HEAD uncompressed, and fetch reads it transparently", async () => {
    const { api } = await setup({ fixture: fixtureWith(1000) });
    const server = http.createServer(toNodeHandler(api)).listen(0, "127.0.0.1");
    servers.push(server);
    await once(server, "listening");
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/api/v1/datasets/ds_orders/rows?maxRows=1000`;
    const raw = (method: string) =>
      new Promise<{ headers: http.IncomingHttpHeaders; bytes: Buffer }>((resolve, reject) => {
        const req = http.request(
          url,
          { method, headers: { authorization: `Bearer ${TOKENS.sync}`, "accept-encoding": "gzip" } },
          (res) => {
            const parts: Buffer[] = [];
            res.on("data", (chunk: Buffer) => parts.push(chunk));
            res.on("end", () => resolve({ headers: res.headers, bytes: Buffer.concat(parts) }));
          },
        );
        req.on("error", reject);
        req.end();
      });
    const get = await raw("GET");
    expect(get.headers["content-encoding"]).toBe("gzip");
    expect(get.headers["content-length"]).toBe(String(get.bytes.length));
    expect(JSON.parse(gunzipSync(get.bytes).toString("utf8")).data).toHaveLength(1000);
    const head = await raw("HEAD");
    expect([head.headers["content-encoding"], head.bytes.length]).toEqual([undefined, 0]);
    // Node's fetch asks for gzip itself and decompresses.
    const viaFetch = await fetch(url, { headers: { authorization: `Bearer ${TOKENS.sync}` } });
    expect(viaFetch.headers.get("content-encoding")).toBe("gzip");
    expect(((await viaFetch.json()) as { data: unknown[] }).data).toHaveLength(1000);
  });
});

describe("chooseCoding", () => {
  it.each([
    [null, null],
    ["", null],
    ["gzip", "gzip"],
    ["GZIP", "gzip"],
    ["x-gzip", "gzip"],
    ["deflate", null],
    ["br, gzip", "br"],
    ["gzip;q=1, br;q=0.9", "gzip"],
    ["gzip;q=abc", null],
    ["*, br;q=0", "gzip"],
  ])("%s → %s", (header, expected) => {
    expect(chooseCoding(header)).toBe(expected);
  });
});
