import { describe, expect, it } from "vitest";
import { signHex } from "../../src/domain/signatures.js";
import { consoleErrorLogger, createJsonLogger } from "../../src/server/logging.js";
import { createFixedClock } from "../../src/memory/fixed-clock.js";
import { createMemoryStorage } from "../../src/memory/memory-storage.js";
import { createRequestObserver } from "../../src/server/observe.js";
import type { ErrorLogFields, Logger, RequestLogLine } from "../../src/ports/logger.js";
import type { Storage } from "../../src/ports/storage.js";
import { WEBHOOK_SECRETS, webhookFixture } from "../../src/testing/conformance/webhooks.js";
import { NOW, setup } from "../support/api.js";
import { TOKENS } from "../support/fixture.js";

function recordingLogger() {
  const lines: RequestLogLine[] = [];
  const errors: Array<{ message: string; error: unknown; fields: ErrorLogFields | undefined }> = [];
  const logger: Logger = {
    request: (line) => lines.push(line),
    error: (message, error, fields) => errors.push({ message, error, fields }),
  };
  return { logger, lines, errors };
}

describe("request log lines", () => {
  it("carry the request id, method, route template, status, duration and credential, and nothing from the URL or headers", async () => {
    const { logger, lines } = recordingLogger();
    const { call } = await setup({ logger });
    const res = await call(
      "GET",
      `/api/v1/datasets/ds_orders/rows?maxRows=1&filters=%7B%22region%22%3A%22EMEA%22%7D&access_token=${TOKENS.readOnly}`,
      {
        token: TOKENS.sync,
      },
    );
    expect(res.status).toBe(200);
    expect(lines).toHaveLength(1);
    const line = lines[0]!;
    expect(line).toEqual({
      time: NOW,
      requestId: res.headers.get("x-request-id"),
      method: "GET",
      route: "/api/v1/datasets/:id/rows",
      status: 200,
      errorCode: null,
      durationMs: expect.any(Number),
      credentialKind: "api-key",
      keyId: "key_sync",
      userId: null,
    });
    expect(line.durationMs).toBeGreaterThan(0);
    expect(line.durationMs).toBeLessThan(5000);
    const text = JSON.stringify(line);
    for (const secret of [TOKENS.sync, TOKENS.readOnly, "access_token", "maxRows", "EMEA", "ds_orders", "?"])
      expect(text).not.toContain(secret);
  });

  it("names a session's user, an anonymous caller, a refused token's error code, and no route for an unknown path", async () => {
    const { logger, lines } = recordingLogger();
    const { call } = await setup({ logger });
    await call("GET", "/api/v1/datasets?teamId=team_ops", { token: TOKENS.sessionAda });
    await call("GET", "/api/v1/me", { token: "dp_test_not_a_real_token_000000" });
    await call("GET", "/api/v1/no/such/thing?token=abc");
    expect(
      lines.map(({ route, status, errorCode, credentialKind, keyId, userId }) => ({
        route,
        status,
        errorCode,
        credentialKind,
        keyId,
        userId,
      })),
    ).toEqual([
      {
        route: "/api/v1/datasets",
        status: 200,
        errorCode: null,
        credentialKind: "session-token",
        keyId: null,
        userId: "usr_ada",
      },
      {
        route: "/api/v1/me",
        status: 401,
        errorCode: "unauthorized",
        credentialKind: "anonymous",
        keyId: null,
        userId: null,
      },
      { route: null, status: 404, errorCode: "not_found", credentialKind: "anonymous", keyId: null, userId: null },
    ]);
    expect(JSON.stringify(lines)).not.toContain("dp_test_not_a_real_token");
  });

  it("never carries a webhook's signature or payload", async () => {
    const { logger, lines } = recordingLogger();
    const { call } = await setup({ logger, fixture: webhookFixture() });
    const body = JSON.stringify({ card: "4111-1111-1111-1111" });
    const signature = signHex(WEBHOOK_SECRETS.github, body);
    const res = await call("POST", "/api/webhooks/hook-gh", { body, headers: { "x-hub-signature-256": signature } });
    expect(res.status).toBe(200);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({
      method: "POST",
      route: "/api/webhooks/:id",
      status: 200,
      credentialKind: "anonymous",
    });
    const text = JSON.stringify(lines);
    for (const secret of [signature, signature.slice(7), "4111", "hook-gh", WEBHOOK_SECRETS.github])
      expect(text).not.toContain(secret);
  });

  it("logs a 500's cause with its stack and request id, while the client sees only the id", async () => {
    const { logger, lines, errors } = recordingLogger();
    const store = createMemoryStorage();
    const broken: Storage = {
      ...store,
      catalog: {
        ...store.catalog,
        getDataset: async () => {
          throw new Error("disk on fire at /var/lib/secret-path");
        },
      },
    };
    const { call } = await setup({ logger, storage: broken });
    const res = await call("GET", "/api/v1/datasets/ds_orders", { token: TOKENS.sync });
    expect(res.status).toBe(500);
    expect(res.json.error).toEqual({
      code: "internal",
      message: "internal error",
      requestId: res.headers.get("x-request-id"),
    });
    expect(res.text).not.toContain("disk on fire");
    const unexpected = errors.filter((e) => e.message === "unexpected error");
    expect(unexpected).toHaveLength(1);
    expect(unexpected[0]!.fields).toEqual({ requestId: res.json.error.requestId });
    expect((unexpected[0]!.error as Error).stack).toContain("disk on fire");
    expect(lines.at(-1)).toMatchObject({ requestId: res.json.error.requestId, status: 500, errorCode: "internal" });
  });

  it("keeps the older function form of logger: errors only, with the request id in the message", async () => {
    const seen: string[] = [];
    const store = createMemoryStorage();
    const broken: Storage = {
      ...store,
      catalog: { ...store.catalog, getDataset: () => Promise.reject(new Error("boom")) },
    };
    const { call } = await setup({ logger: (message) => seen.push(message), storage: broken });
    const res = await call("GET", "/api/v1/datasets/ds_orders", { token: TOKENS.sync });
    expect(seen).toContain(`unexpected error (request ${res.json.error.requestId})`);
  });

  it("builds no per-request hook at all when there is no request logger and no metrics (the hot path pays one if)", () => {
    const clock = createFixedClock(NOW);
    expect(createRequestObserver(consoleErrorLogger, null, clock)).toBeNull();
    expect(createRequestObserver({ error: () => {} }, null, clock)).toBeNull();
    expect(createRequestObserver({ request: () => {}, error: () => {} }, null, clock)).toBeTypeOf("function");
  });

  it("never fails a request because the request logger throws; the failure goes to logger.error", async () => {
    const errors: string[] = [];
    const { call } = await setup({
      logger: {
        request: () => {
          throw new Error("log disk full");
        },
        error: (message) => errors.push(message),
      },
    });
    expect((await call("GET", "/api/v1/me", { token: TOKENS.sync })).status).toBe(200);
    expect(errors).toEqual(["could not log or count a request"]);
  });
});

describe("createJsonLogger", () => {
  it("writes one JSON object per line: request lines and error lines with the stack", async () => {
    const written: string[] = [];
    const logger = createJsonLogger({ write: (line) => written.push(line), now: () => Date.parse(NOW) });
    const store = createMemoryStorage();
    const broken: Storage = {
      ...store,
      catalog: { ...store.catalog, getDataset: () => Promise.reject(new TypeError("bad row")) },
    };
    const { call } = await setup({ logger, storage: broken });
    await call("GET", "/api/v1/me", { token: TOKENS.sync });
    const failed = await call("GET", "/api/v1/datasets/ds_orders", { token: TOKENS.sync });
    const parsed = written.map((line) => JSON.parse(line) as Record<string, any>);
    expect(written.every((line) => !line.includes("\n"))).toBe(true);
    expect(parsed[0]).toEqual({
      level: "info",
      msg: "request",
      time: NOW,
      requestId: expect.any(String),
      method: "GET",
      route: "/api/v1/me",
      status: 200,
      errorCode: null,
      durationMs: expect.any(Number),
      credentialKind: "api-key",
      keyId: "key_sync",
      userId: null,
    });
    const error = parsed.find((p) => p.level === "error")!;
    expect(error).toMatchObject({ msg: "unexpected error", time: NOW, requestId: failed.json.error.requestId });
    expect(error.error).toMatchObject({ name: "TypeError", message: "bad row" });
    expect(error.error.stack).toContain("TypeError: bad row");
    expect(parsed.at(-1)).toMatchObject({
      level: "info",
      status: 500,
      errorCode: "internal",
      requestId: failed.json.error.requestId,
    });
  });

  it("writes errors only with requests: false", () => {
    const written: string[] = [];
    const logger = createJsonLogger({ write: (line) => written.push(line), requests: false });
    expect(logger.request).toBeUndefined();
    logger.error("could not record an API call", "plain reason");
    expect(JSON.parse(written[0]!)).toMatchObject({
      level: "error",
      msg: "could not record an API call",
      error: '"plain reason"',
    });
  });
});
