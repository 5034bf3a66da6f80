import { createHmac } from "node:crypto";
import Stripe from "stripe";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createAdmin } from "../src/admin/index.js";
import { createDataApi, type DataApi } from "../src/server/api.js";
import { verifyDelivery } from "../src/handlers/webhooks.js";
import { createFixedClock } from "../src/memory/fixed-clock.js";
import type { WebhookEndpoint } from "../src/domain/webhook-config.js";
import { NOW, setup } from "./support/api.js";
import { ADMIN_TOKEN, httpAdmin } from "./support/admin.js";
import { TOKENS } from "./support/fixture.js";
import { STORE_KINDS } from "./admin/stores.js";

/**
 * Rotation with overlap (webhook-inbox.md): the secret a rotation replaces
 * stays valid until the overlap ends, on every store and on every instance
 * sharing it; removing the secret removes every secret.
 */
const OLD = "whsec_old0000000000000000000000000000";
const NEW = "whsec_new1111111111111111111111111111";
const HOUR = 3600;

for (const kind of STORE_KINDS) {
  describe(`rotation with overlap on ${kind.name}`, () => {
    let skip: string | undefined;
    const cleanups: Array<() => Promise<void>> = [];
    beforeAll(async () => {
      skip = await kind.skip();
    });
    afterAll(async () => {
      for (const cleanup of cleanups.splice(0)) await cleanup();
    });

    it("keeps the replaced secret valid until the overlap ends, on this instance and another one on the same data", async (t) => {
      if (skip) return t.skip(skip);
      const opened = await kind.open();
      cleanups.push(opened.cleanup);
      const clock = createFixedClock(NOW);
      const ctx = await setup({ storage: opened.storage, adminToken: ADMIN_TOKEN, auditLagSeconds: 0, clock });
      const a = ctx.api;
      // A second instance on the same SQLite file or PostgreSQL schema (the memory store has no other instance).
      const b = opened.again ? createDataApi({ storage: await opened.again(), clock }) : null;
      const admin = httpAdmin(a);

      const created = await admin("PUT", "/connections/conn_rot", {
        teamId: "team_ops",
        name: "Stripe events",
        type: "webhook",
        config: { signingSecret: OLD, signature: { scheme: "stripe" } },
      });
      expect(created.status).toBe(201);
      expect(created.json.config).toEqual({
        endpointId: expect.stringMatching(/^whk_/),
        retainRows: null,
        signature: { scheme: "stripe" },
        signed: true,
      });
      const path = `/api/webhooks/${created.json.config.endpointId}`;
      let n = 0;
      const deliver = async (api: DataApi, secret: string) => {
        const payload = JSON.stringify({ id: `evt_${++n}`, type: "charge.succeeded" });
        const header = Stripe.webhooks.generateTestHeaderString({
          payload,
          secret,
          timestamp: Math.floor(clock.now() / 1000),
        });
        const res = await api.fetch(
          new Request(`http://dataport.test${path}`, {
            method: "POST",
            headers: { "content-type": "application/json", "stripe-signature": header },
            body: payload,
          }),
        );
        const json = (await res.json()) as { error?: { details?: unknown } };
        return res.status === 200 ? 200 : [res.status, json.error?.details];
      };
      const instances = b ? [a, b] : [a];
      for (const api of instances) expect(await deliver(api, OLD)).toBe(200);

      const rotated = await admin("PUT", "/connections/conn_rot/signing-secret", { secret: NEW, overlapSeconds: HOUR });
      expect(rotated.status).toBe(200);
      const end = new Date(Date.parse(NOW) + HOUR * 1000).toISOString();
      expect(rotated.json.config).toMatchObject({ signed: true, previousSecretValidUntil: end });
      expect(JSON.stringify(rotated.json)).not.toContain("whsec_");
      // During the overlap both secrets are taken, by every instance.
      for (const api of instances) {
        expect(await deliver(api, OLD)).toBe(200);
        expect(await deliver(api, NEW)).toBe(200);
      }
      clock.advance(HOUR * 1000 - 1000);
      for (const api of instances) expect(await deliver(api, OLD)).toBe(200);
      clock.advance(1000);
      for (const api of instances) {
        expect(await deliver(api, OLD)).toEqual([401, { reason: "signature_invalid" }]);
        expect(await deliver(api, NEW)).toBe(200);
      }
      expect((await admin("GET", "/connections/conn_rot")).json.config).not.toHaveProperty("previousSecretValidUntil");

      // A plain change has no overlap: the secret it replaces fails at once.
      await admin("PUT", "/connections/conn_rot/signing-secret", { secret: OLD, overlapSeconds: HOUR });
      for (const api of instances) expect(await deliver(api, NEW)).toBe(200);
      await admin("PUT", "/connections/conn_rot/signing-secret", { secret: NEW });
      for (const api of instances) expect(await deliver(api, OLD)).toEqual([401, { reason: "signature_invalid" }]);
      // Removing the secret removes every secret, the previous one too.
      await admin("PUT", "/connections/conn_rot/signing-secret", { secret: OLD, overlapSeconds: HOUR });
      await admin("PUT", "/connections/conn_rot/signing-secret", { secret: null });
      await admin("PUT", "/connections/conn_rot/signing-secret", { secret: "whsec_third222222222222222222222222222" });
      for (const api of instances) {
        expect(await deliver(api, OLD)).toEqual([401, { reason: "signature_invalid" }]);
        expect(await deliver(api, NEW)).toEqual([401, { reason: "signature_invalid" }]);
      }
      // Changing the secret in the connection's config (PUT /connections/{id}) has no overlap either.
      await admin("PUT", "/connections/conn_rot/signing-secret", { secret: OLD, overlapSeconds: HOUR });
      const replaced = await admin("PUT", "/connections/conn_rot", {
        teamId: "team_ops",
        name: "Stripe events",
        type: "webhook",
        config: { signingSecret: NEW },
      });
      expect(replaced.json.config).not.toHaveProperty("previousSecretValidUntil");
      for (const api of instances)
        expect(await deliver(api, "whsec_third222222222222222222222222222")).toEqual([
          401,
          { reason: "signature_invalid" },
        ]);
      // A put that leaves the secret alone keeps the overlap.
      await admin("PUT", "/connections/conn_rot/signing-secret", { secret: OLD, overlapSeconds: HOUR });
      await admin("PUT", "/connections/conn_rot", {
        teamId: "team_ops",
        name: "Renamed",
        type: "webhook",
        config: { retainRows: 50 },
      });
      for (const api of instances) expect(await deliver(api, NEW)).toBe(200);

      // The audit names the overlap's end, never a secret.
      // (On PostgreSQL an event shows once every transaction older than it ended, in the whole cluster: wait for that.)
      type Event = { action: string; target: { id: string } | null; details?: Record<string, unknown> };
      let audit = await ctx.call("GET", "/api/v1/audit?limit=1000&format=raw", { token: TOKENS.sync });
      // The last change (the rename) is the one without details.
      const lastShown = () =>
        (audit.json.events as Event[]).some(
          (e) => e.target?.id === "conn_rot" && e.action === "connection.updated" && !e.details,
        );
      for (let i = 0; i < 100 && !lastShown(); i++) {
        await new Promise((resolve) => setTimeout(resolve, 100));
        audit = await ctx.call("GET", "/api/v1/audit?limit=1000&format=raw", { token: TOKENS.sync });
      }
      const updates = (audit.json.events as Event[]).filter(
        (e) => e.action === "connection.updated" && e.target?.id === "conn_rot",
      );
      expect(updates[0]!.details).toEqual({ signingSecret: "set", previousSecretValidUntil: end });
      expect(updates[1]!.details).toEqual({
        signingSecret: "set",
        previousSecretValidUntil: new Date(Date.parse(end) + HOUR * 1000).toISOString(),
      });
      expect(
        updates.filter((e) => e.details?.signingSecret === "set" && !("previousSecretValidUntil" in e.details)).length,
      ).toBeGreaterThan(0);
      expect(JSON.stringify(audit.json)).not.toContain("whsec_");
    });
  });
}

describe("rotation with overlap: the admin functions and the limits", () => {
  it("rotateWebhookSecret and setWebhookSecret take an overlap of at most 7 days, audited with its end", async () => {
    const ctx = await setup({ adminToken: ADMIN_TOKEN, auditLagSeconds: 0 });
    const admin = createAdmin(ctx.api);
    const hook = await admin.createWebhookConnection({
      teamId: "team_ops",
      name: "GitHub",
      signingSecret: "first-secret",
      signature: { scheme: "github" },
    });
    const { connection, secret } = await admin.rotateWebhookSecret(hook.connectionId, {
      overlapSeconds: 7 * 24 * HOUR,
    });
    const end = new Date(Date.parse(NOW) + 7 * 24 * HOUR * 1000).toISOString();
    expect(connection).toMatchObject({ signed: true, signature: { scheme: "github" }, previousSecretValidUntil: end });
    expect(JSON.stringify(connection)).not.toContain("first-secret");
    expect(JSON.stringify(connection)).not.toContain(secret);
    await expect(
      admin.rotateWebhookSecret(hook.connectionId, { overlapSeconds: 7 * 24 * HOUR + 1 }),
    ).rejects.toMatchObject({
      status: 422,
      code: "validation_failed",
      details: { path: "$.overlapSeconds" },
    });
    await expect(admin.setWebhookSecret(hook.connectionId, "x-secret", { overlapSeconds: -1 })).rejects.toMatchObject({
      status: 422,
    });
    await expect(admin.setWebhookSecret(hook.connectionId, "x-secret", { overlapSeconds: 1.5 })).rejects.toMatchObject({
      status: 422,
    });
    // A refused change changes nothing.
    expect((await admin.getWebhookConnection(hook.connectionId)).previousSecretValidUntil).toBe(end);
    const set = await admin.setWebhookSecret(hook.connectionId, "second-secret", {
      overlapSeconds: 60,
      by: { userId: "usr_ada" },
    });
    expect(set.previousSecretValidUntil).toBe("2026-11-01T12:01:00.000Z");
    expect((await admin.setWebhookSecret(hook.connectionId, "third-secret")).previousSecretValidUntil).toBeNull();
    expect((await admin.removeWebhookSecret(hook.connectionId)).previousSecretValidUntil).toBeNull();

    const audit = await ctx.call("GET", "/api/v1/audit?limit=1000&format=raw", { token: TOKENS.sync });
    const events = (
      audit.json.events as Array<{ action: string; actor: { type: string }; details: Record<string, unknown> }>
    ).filter((e) => e.action.startsWith("webhook.secret"));
    expect(events.map((e) => [e.action, e.actor.type, e.details])).toEqual([
      ["webhook.secret.rotated", "system", { previousSecretValidUntil: end }],
      ["webhook.secret.set", "user", { previousSecretValidUntil: "2026-11-01T12:01:00.000Z" }],
      ["webhook.secret.set", "system", {}],
      ["webhook.secret.removed", "system", {}],
    ]);
    expect(JSON.stringify(audit.json)).not.toMatch(/first-secret|second-secret|third-secret|whsec_/);
  });

  it("over HTTP: more than 7 days, or an overlap with no secret, is 422; an unknown scheme is 422 naming it", async () => {
    const ctx = await setup({ adminToken: ADMIN_TOKEN });
    const admin = httpAdmin(ctx.api);
    await admin("PUT", "/connections/conn_h", {
      teamId: "team_ops",
      name: "Hook",
      type: "webhook",
      config: { signingSecret: "a-secret" },
    });
    const tooLong = await admin("PUT", "/connections/conn_h/signing-secret", {
      secret: "b-secret",
      overlapSeconds: 604_801,
    });
    expect([tooLong.status, tooLong.json.error.code, tooLong.json.error.details]).toEqual([
      422,
      "validation_failed",
      { path: "$.overlapSeconds" },
    ]);
    expect(tooLong.json.error.message).toMatch(/at most 604800/);
    const removing = await admin("PUT", "/connections/conn_h/signing-secret", { secret: null, overlapSeconds: 60 });
    expect([removing.status, removing.json.error.details]).toEqual([422, { path: "$.overlapSeconds" }]);
    expect((await admin("PUT", "/connections/conn_h/signing-secret", { secret: null, overlapSeconds: 0 })).status).toBe(
      200,
    );

    const unknown = await admin("PUT", "/connections/conn_h", {
      teamId: "team_ops",
      name: "Hook",
      type: "webhook",
      config: { signature: { scheme: "stripe-v2" } },
    });
    expect([unknown.status, unknown.json.error.details]).toEqual([422, { path: "$.config.signature.scheme" }]);
    expect(unknown.json.error.message).toContain('unknown signature scheme "stripe-v2"');
    const header = await admin("PUT", "/connections/conn_h", {
      teamId: "team_ops",
      name: "Hook",
      type: "webhook",
      config: { signature: { scheme: "stripe", header: "X-Sig" } },
    });
    expect([header.status, header.json.error.details]).toEqual([422, { path: "$.config.signature.header" }]);
    const ok = await admin("PUT", "/connections/conn_h", {
      teamId: "team_ops",
      name: "Hook",
      type: "webhook",
      config: { signature: { scheme: "hmac-sha256-hex", header: "X-Sig" } },
    });
    expect(ok.json.config.signature).toEqual({ scheme: "hmac-sha256-hex", header: "X-Sig" });
    const back = await admin("PUT", "/connections/conn_h", {
      teamId: "team_ops",
      name: "Hook",
      type: "webhook",
      config: { signature: null },
    });
    expect(back.json.config).not.toHaveProperty("signature");
    await expect(
      createAdmin(ctx.api).setWebhookSignature("conn_h", { scheme: "paypal" as never }),
    ).rejects.toMatchObject({
      status: 422,
      details: { path: "$.signature.scheme" },
      message: expect.stringContaining('unknown signature scheme "paypal"'),
    });
  });

  it("tells the ingest path which secret verified a delivery", () => {
    const endpoint: WebhookEndpoint = {
      connectionId: "conn_x",
      teamId: "team_ops",
      name: "x",
      datasetId: "ds_x",
      endpointId: "whk_x",
      signingSecret: "new-secret",
      retainRows: null,
      signature: { scheme: "hmac-sha256-hex" },
      previousSecret: { secret: "old-secret", validUntilMs: Date.parse(NOW) + 1000 },
    };
    const body = { bytes: Buffer.from('{"a":1}'), contentType: "application/json" };
    const signed = (secret: string) =>
      new Headers({ "x-webhook-signature": createHmac("sha256", secret).update('{"a":1}').digest("hex") });
    const now = Date.parse(NOW);
    expect(verifyDelivery(endpoint, body, signed("new-secret"), now)).toBe("current");
    expect(verifyDelivery(endpoint, body, signed("old-secret"), now)).toBe("previous");
    expect(() => verifyDelivery(endpoint, body, signed("old-secret"), now + 1000)).toThrow(
      expect.objectContaining({ status: 401, details: { reason: "signature_invalid" } }),
    );
    expect(verifyDelivery({ ...endpoint, signingSecret: null }, body, new Headers(), now)).toBeNull();
  });
});
