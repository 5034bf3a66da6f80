import { readFileSync } from "node:fs";
import { context, propagation, SpanKind, SpanStatusCode, trace } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import { W3CTraceContextPropagator } from "@opentelemetry/core";
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  type ReadableSpan,
  SimpleSpanProcessor,
} from "@opentelemetry/sdk-trace-base";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { INSTRUMENTATION_VERSION, parseTraceparent } from "../src/server/tracing.js";
import type { RequestLogLine } from "../src/ports/logger.js";
import { setup } from "./support/api.js";
import { fixtureWebhook, testFixture, TOKENS } from "./support/fixture.js";

/** The host's OpenTelemetry SDK, as a host sets it up: a provider, a context manager, the W3C propagator. */
let exporter: InMemorySpanExporter;
let provider: BasicTracerProvider;

beforeEach(() => {
  exporter = new InMemorySpanExporter();
  provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  propagation.setGlobalPropagator(new W3CTraceContextPropagator());
  trace.setGlobalTracerProvider(provider);
});

afterEach(async () => {
  await provider.shutdown();
  trace.disable();
  context.disable();
  propagation.disable();
});

const TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736";
const PARENT_ID = "00f067aa0ba902b7";
const TRACEPARENT = `00-${TRACE_ID}-${PARENT_ID}-01`;

const spans = () => exporter.getFinishedSpans();
const server = () => spans().filter((s) => s.kind === SpanKind.SERVER);
const childrenOf = (parent: ReadableSpan) =>
  spans().filter((s) => s.parentSpanContext?.spanId === parent.spanContext().spanId);

describe("OpenTelemetry, with the host's SDK registered", () => {
  it("makes a request a SERVER span inside the caller's trace, named after its route, with the HTTP conventions' attributes", async () => {
    const { call } = await setup();
    const res = await call("GET", "/api/v1/datasets/ds_orders/rows?maxRows=2", {
      token: TOKENS.sync,
      headers: { traceparent: TRACEPARENT, "user-agent": "probe/1" },
    });
    expect(res.status).toBe(200);
    const [span] = server();
    expect(span).toBeDefined();
    expect(span!.name).toBe("GET /api/v1/datasets/{id}/rows");
    expect(span!.spanContext().traceId).toBe(TRACE_ID);
    expect(span!.parentSpanContext).toMatchObject({ traceId: TRACE_ID, spanId: PARENT_ID, isRemote: true });
    expect(span!.attributes).toEqual({
      "http.request.method": "GET",
      "url.path": "/api/v1/datasets/ds_orders/rows",
      "user_agent.original": "probe/1",
      "http.route": "/api/v1/datasets/{id}/rows",
      "http.response.status_code": 200,
      "dataport.request_id": res.headers.get("x-request-id"),
      "client.address": "198.51.100.7",
    });
    expect(span!.status.code).toBe(SpanStatusCode.UNSET);
    expect(span!.instrumentationScope).toMatchObject({ name: "dataport", version: INSTRUMENTATION_VERSION });
  });

  it("makes each store call a child span of the request, in the same trace", async () => {
    const { call } = await setup();
    await call("GET", "/api/v1/datasets/ds_orders/rows?maxRows=2", {
      token: TOKENS.sync,
      headers: { traceparent: TRACEPARENT },
    });
    const [request] = server();
    const names = childrenOf(request!).map((s) => s.name);
    expect(names).toEqual(
      expect.arrayContaining([
        "storage catalog.getDataset",
        "storage rows.readDatasetRows",
        "storage audit.appendAuditEvent",
      ]),
    );
    const read = spans().find((s) => s.name === "storage rows.readDatasetRows")!;
    expect(read.kind).toBe(SpanKind.INTERNAL);
    expect(read.spanContext().traceId).toBe(TRACE_ID);
    expect(read.attributes).toEqual({
      "dataport.storage.area": "rows",
      "dataport.storage.operation": "readDatasetRows",
    });
  });

  it("makes upstream queries CLIENT spans and cache calls child spans of the request", async () => {
    const { call } = await setup();
    const res = await call("GET", "/api/v1/connections/conn_retail/query?limit=1", { token: TOKENS.sync });
    expect(res.status).toBe(200);
    const [request] = server();
    expect(request!.name).toBe("GET /api/v1/connections/{id}/query");
    const upstream = spans().find((s) => s.name === "upstream memory")!;
    expect(upstream.kind).toBe(SpanKind.CLIENT);
    expect(upstream.attributes).toEqual({
      "dataport.connection.id": "conn_retail",
      "dataport.connection.type": "memory",
    });
    expect(upstream.spanContext().traceId).toBe(request!.spanContext().traceId);
    const cacheCalls = spans().filter((s) => s.name.startsWith("cache "));
    expect(cacheCalls.map((s) => s.name)).toEqual(expect.arrayContaining(["cache get", "cache set"]));
    for (const span of [upstream, ...cacheCalls])
      expect(span.spanContext().traceId).toBe(request!.spanContext().traceId);
  });

  it("starts a trace of its own without a traceparent, and ignores a malformed one", async () => {
    const { call } = await setup();
    await call("GET", "/api/v1/me", { token: TOKENS.sync });
    await call("GET", "/api/v1/me", {
      token: TOKENS.sync,
      headers: { traceparent: "00-00000000000000000000000000000000-00f067aa0ba902b7-01" },
    });
    const [a, b] = server();
    expect(a!.parentSpanContext).toBeUndefined();
    expect(b!.parentSpanContext).toBeUndefined();
    expect(a!.spanContext().traceId).not.toBe(b!.spanContext().traceId);
    expect(a!.name).toBe("GET /api/v1/me");
  });

  it("reads the traceparent itself when the host registered no propagator", async () => {
    propagation.disable();
    const { call } = await setup();
    await call("GET", "/api/v1/me", { token: TOKENS.sync, headers: { traceparent: TRACEPARENT } });
    const [span] = server();
    expect(span!.spanContext().traceId).toBe(TRACE_ID);
    expect(span!.parentSpanContext?.spanId).toBe(PARENT_ID);
  });

  it("writes the trace and span ids in the request log line", async () => {
    const lines: RequestLogLine[] = [];
    const { call } = await setup({ logger: { request: (line) => lines.push(line), error: () => {} } });
    await call("GET", "/api/v1/me", { token: TOKENS.sync, headers: { traceparent: TRACEPARENT } });
    const [span] = server();
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ route: "/api/v1/me", traceId: TRACE_ID, spanId: span!.spanContext().spanId });
  });

  it("marks a 5xx as an error (error.type, the exception) and leaves a 4xx unset; an unknown path is named by its method", async () => {
    const fixture = testFixture();
    const { call, storage } = await setup({ fixture, logger: { error: () => {} } });
    storage.catalog.listDatasets = async () => {
      throw new Error("database on fire");
    };
    expect((await call("GET", "/api/v1/datasets", { token: TOKENS.sync })).status).toBe(500);
    expect((await call("GET", "/api/v1/datasets/ds_nowhere", { token: TOKENS.sync })).status).toBe(404);
    expect((await call("GET", "/api/v1/nothing-here")).status).toBe(404);
    const [failed, missing, unknown] = server();
    expect(failed!.status.code).toBe(SpanStatusCode.ERROR);
    expect(failed!.attributes["error.type"]).toBe("500");
    expect(failed!.events.map((e) => e.name)).toEqual(["exception"]);
    // The store call that failed says so too.
    expect(spans().find((s) => s.name === "storage catalog.listDatasets")!.status).toMatchObject({
      code: SpanStatusCode.ERROR,
      message: "database on fire",
    });
    expect([missing!.status.code, missing!.attributes["http.response.status_code"]]).toEqual([
      SpanStatusCode.UNSET,
      404,
    ]);
    expect([unknown!.name, unknown!.attributes["http.route"]]).toEqual(["GET", undefined]);
  });

  it("ends a streamed answer's span once its body is read", async () => {
    const fixture = testFixture();
    fixture.datasets[0]!.rows = Array.from({ length: 5000 }, (_, i) => ({
      order_id: `C-${i}`,
      amount: i,
      region: "EMEA",
    }));
    const { api } = await setup({ fixture });
    const response = await api.fetch(
      new Request("http://dataport.test/api/v1/datasets/ds_orders/rows?format=ndjson", {
        headers: { authorization: `Bearer ${TOKENS.sync}` },
      }),
    );
    expect(server()).toHaveLength(0);
    expect((await response.text()).split("\n")).toHaveLength(5001);
    expect(server().map((s) => s.name)).toEqual(["GET /api/v1/datasets/{id}/rows"]);
  });

  it("keeps a webhook endpoint's secret id out of url.path", async () => {
    const fixture = testFixture() as ReturnType<typeof testFixture> & { connections: unknown[] };
    fixture.connections.push(fixtureWebhook("conn_hook", "hook-secret-0123456789"));
    const { call } = await setup({ fixture });
    expect((await call("POST", "/api/webhooks/hook-secret-0123456789", { body: { event: "x" } })).status).toBe(200);
    const [span] = server();
    expect(span!.name).toBe("POST /api/webhooks/{id}");
    expect(span!.attributes["url.path"]).toBe("/api/webhooks/{id}");
    expect(JSON.stringify(spans().map((s) => s.attributes))).not.toContain("hook-secret");
  });

  it("uses the tracer it is given instead of the registered one, and none with tracer: null", async () => {
    const own = new InMemorySpanExporter();
    const ownProvider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(own)] });
    const given = await setup({ tracer: ownProvider.getTracer("host") });
    await given.call("GET", "/api/v1/me", { token: TOKENS.sync });
    expect(own.getFinishedSpans().map((s) => s.name)).toContain("GET /api/v1/me");
    expect(server()).toHaveLength(0);
    const off = await setup({ tracer: null });
    await off.call("GET", "/api/v1/me", { token: TOKENS.sync });
    expect(spans()).toHaveLength(0);
    await ownProvider.shutdown();
  });
});

describe("without a registered tracer provider", () => {
  it("traces nothing", async () => {
    trace.disable();
    const { call } = await setup();
    expect(
      (await call("GET", "/api/v1/me", { token: TOKENS.sync, headers: { traceparent: TRACEPARENT } })).status,
    ).toBe(200);
    expect(spans()).toHaveLength(0);
  });
});

describe("parseTraceparent", () => {
  it.each([
    [TRACEPARENT, { traceId: TRACE_ID, spanId: PARENT_ID, traceFlags: 1 }],
    [`00-${TRACE_ID}-${PARENT_ID}-00`, { traceId: TRACE_ID, spanId: PARENT_ID, traceFlags: 0 }],
    [`01-${TRACE_ID}-${PARENT_ID}-03-future`, { traceId: TRACE_ID, spanId: PARENT_ID, traceFlags: 1 }],
    [`00-${TRACE_ID}-${PARENT_ID}-01-extra`, null],
    [`ff-${TRACE_ID}-${PARENT_ID}-01`, null],
    [`00-${TRACE_ID.toUpperCase()}-${PARENT_ID}-01`, null],
    [`00-${TRACE_ID}-0000000000000000-01`, null],
    ["garbage", null],
    [null, null],
  ])("%s", (header, expected) => {
    expect(parseTraceparent(header)).toEqual(expected);
  });

  it("names the package's version as the instrumentation scope's", () => {
    const pkg = JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8")) as { version: string };
    expect(INSTRUMENTATION_VERSION).toBe(pkg.version);
  });
});
