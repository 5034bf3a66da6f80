import { createHmac } from "node:crypto";
import { sign as signGithub, verify as verifyGithub } from "@octokit/webhooks-methods";
import { Webhook as StandardWebhook } from "standardwebhooks";
import Stripe from "stripe";
import { describe, expect, it } from "vitest";
import { createAdmin } from "../src/admin/index.js";
import type { SignatureScheme, WebhookSignature } from "../src/domain/signature-schemes.js";
import { verifySignature } from "../src/domain/signatures.js";
import { webhookFixture } from "../src/testing/conformance/webhooks.js";
import { NOW, setup as baseSetup } from "./support/api.js";
import { TOKENS } from "./support/fixture.js";

/**
 * Each signature scheme against its sender: deliveries signed by the
 * sender's own library (Stripe, Standard Webhooks, GitHub's
 * @octokit/webhooks-methods), or by the documented algorithm where the
 * sender ships no small signer (Shopify, Slack, a plain hex HMAC), are
 * stored; a wrong secret, a changed body and an old timestamp are refused
 * with their reason.
 */
const setup = () => baseSetup({ fixture: webhookFixture() });
type Api = Awaited<ReturnType<typeof setup>>;

const NOW_S = Date.parse(NOW) / 1000;

/** What a sender puts on a delivery of `body` signed with `secret` at `timestamp` (Unix seconds). */
type Signer = (secret: string, body: string, timestamp: number) => Promise<Record<string, string>>;

const hmac = (key: string, text: string) => createHmac("sha256", key).update(text);

interface Sender {
  signature: WebhookSignature;
  secret: string;
  otherSecret: string;
  sign: Signer;
  /** Whether the scheme signs a timestamp (refused beyond five minutes). */
  timestamped: boolean;
}

const SENDERS: Record<Exclude<SignatureScheme, "auto">, Sender> = {
  stripe: {
    signature: { scheme: "stripe" },
    // Stripe's secrets are whsec_ + base62; the whole string is the HMAC key.
    secret: "whsec_5f8d0c6e2a4b4c1e9a7d3b2f1e0c9a8b",
    otherSecret: "whsec_0000000000000000000000000000000a",
    sign: async (secret, payload, timestamp) => ({
      "stripe-signature": Stripe.webhooks.generateTestHeaderString({ payload, secret, timestamp }),
    }),
    timestamped: true,
  },
  "standard-webhooks": {
    signature: { scheme: "standard-webhooks" },
    secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
    otherSecret: "whsec_QUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUE=",
    async sign(secret, body, timestamp) {
      const id = `msg_${timestamp}_${body.length}`;
      const signature = new StandardWebhook(secret).sign(id, new Date(timestamp * 1000), body);
      return { "webhook-id": id, "webhook-timestamp": String(timestamp), "webhook-signature": signature };
    },
    timestamped: true,
  },
  github: {
    signature: { scheme: "github" },
    secret: "It's a Secret to Everybody",
    otherSecret: "It's a Secret to Nobody",
    sign: async (secret, body) => ({ "x-hub-signature-256": await signGithub(secret, body) }),
    timestamped: false,
  },
  "hmac-sha256-hex": {
    signature: { scheme: "hmac-sha256-hex", header: "X-Signature" },
    secret: "plain-shared-secret",
    otherSecret: "another-shared-secret",
    sign: async (secret, body) => ({ "x-signature": hmac(secret, body).digest("hex") }),
    timestamped: false,
  },
  // shopify.dev, "Verify webhooks": base64 of HMAC-SHA256 of the raw body with the app's client secret.
  shopify: {
    signature: { scheme: "shopify" },
    secret: "shpss_0123456789abcdef0123456789abcdef",
    otherSecret: "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",
    sign: async (secret, body) => ({ "x-shopify-hmac-sha256": hmac(secret, body).digest("base64") }),
    timestamped: false,
  },
  // api.slack.com, "Verifying requests from Slack": v0= + hex HMAC-SHA256 of "v0:{timestamp}:{body}" with the signing
  // secret.
  slack: {
    signature: { scheme: "slack" },
    secret: "8f742231b10e8888abcd99yyyzzz85a5",
    otherSecret: "8f742231b10e8888abcd99yyyzzz85a6",
    async sign(secret, body, timestamp) {
      return {
        "x-slack-request-timestamp": String(timestamp),
        "x-slack-signature": `v0=${hmac(secret, `v0:${timestamp}:${body}`).digest("hex")}`,
      };
    },
    timestamped: true,
  },
};

async function connectionFor(api: Api, sender: Sender) {
  const admin = createAdmin(api.api);
  const hook = await admin.createWebhookConnection({
    teamId: "team_ops",
    name: sender.signature.scheme,
    signingSecret: sender.secret,
    signature: sender.signature,
  });
  expect(hook.signature).toEqual(sender.signature);
  const deliver = (body: string, headers: Record<string, string>) =>
    api.call("POST", `/api/webhooks/${hook.endpointId}`, {
      body,
      headers: { "content-type": "application/json", ...headers },
    });
  const rowCount = async () =>
    (await api.call("GET", `/api/v1/datasets/${hook.datasetId}`, { token: TOKENS.sessionAda })).json.rowCount as number;
  return { hook, deliver, rowCount };
}

function expectRefused(res: { status: number; json: any }, reason: string): void {
  expect(res.status).toBe(401);
  expect(res.json.error).toMatchObject({ code: "invalid_signature", details: { reason } });
}

describe("signature schemes, each signed by its sender", () => {
  for (const [scheme, sender] of Object.entries(SENDERS)) {
    it(`${scheme}: stores a signed delivery; refuses a wrong secret, a changed body${sender.timestamped ? ", an old timestamp" : ""} and none`, async () => {
      const api = await setup();
      const { deliver, rowCount } = await connectionFor(api, sender);
      const body = JSON.stringify({ id: `evt_${scheme}`, type: "order.paid", amount: 4200 });

      const stored = await deliver(body, await sender.sign(sender.secret, body, NOW_S));
      expect(stored.status).toBe(200);
      expect(stored.json).toEqual({ ok: true, id: expect.any(String), duplicate: false });

      expectRefused(await deliver(body, await sender.sign(sender.otherSecret, body, NOW_S)), "signature_invalid");
      const tampered = JSON.stringify({ id: `evt_${scheme}_2`, type: "order.paid", amount: 1 });
      expectRefused(
        await deliver(
          tampered.replace('"amount":1', '"amount":100'),
          await sender.sign(sender.secret, tampered, NOW_S),
        ),
        "signature_invalid",
      );
      expectRefused(await deliver(body, {}), "signature_missing");
      if (sender.timestamped) {
        const other = JSON.stringify({ id: `evt_${scheme}_3` });
        // Within five minutes either way it is taken; beyond, it is a replay.
        expect((await deliver(other, await sender.sign(sender.secret, other, NOW_S - 300))).status).toBe(200);
        expectRefused(
          await deliver(body, await sender.sign(sender.secret, body, NOW_S - 301)),
          "timestamp_out_of_tolerance",
        );
        expectRefused(
          await deliver(body, await sender.sign(sender.secret, body, NOW_S + 301)),
          "timestamp_out_of_tolerance",
        );
        expect(await rowCount()).toBe(2);
      } else {
        expect(await rowCount()).toBe(1);
      }
    });
  }

  it("a named scheme reads only its own headers; auto reads none of Stripe's, Shopify's or Slack's", async () => {
    const api = await setup();
    const body = JSON.stringify({ id: "evt_cross" });
    // A valid GitHub signature made with the Stripe connection's own secret is no Stripe signature.
    const stripe = await connectionFor(api, SENDERS.stripe);
    expectRefused(
      await stripe.deliver(body, await SENDERS.github.sign(SENDERS.stripe.secret, body, NOW_S)),
      "signature_missing",
    );
    const github = await connectionFor(api, SENDERS.github);
    expectRefused(
      await github.deliver(body, { "x-webhook-signature": hmac(SENDERS.github.secret, body).digest("hex") }),
      "signature_missing",
    );
    // GitHub always prefixes sha256=: bare hex in its header is not its signature.
    expectRefused(
      await github.deliver(body, { "x-hub-signature-256": hmac(SENDERS.github.secret, body).digest("hex") }),
      "signature_invalid",
    );

    const admin = createAdmin(api.api);
    const auto = await admin.createWebhookConnection({
      teamId: "team_ops",
      name: "auto",
      signingSecret: SENDERS.stripe.secret,
    });
    expect(auto.signature).toEqual({ scheme: "auto" });
    const post = (headers: Record<string, string>) =>
      api.call("POST", `/api/webhooks/${auto.endpointId}`, {
        body,
        headers: { "content-type": "application/json", ...headers },
      });
    for (const scheme of ["stripe", "shopify", "slack"] as const) {
      expectRefused(await post(await SENDERS[scheme].sign(SENDERS.stripe.secret, body, NOW_S)), "signature_missing");
    }
    expect((await post(await SENDERS.github.sign(SENDERS.stripe.secret, body, NOW_S))).status).toBe(200);
  });

  it("the sender libraries agree with the verdicts (Stripe, Standard Webhooks, GitHub)", async () => {
    const body = JSON.stringify({ id: "evt_agree", object: "event" });
    const verdict = (sender: Sender, headers: Record<string, string>, secret = sender.secret) =>
      verifySignature({
        signature: sender.signature,
        secrets: { current: secret, previous: null },
        body: Buffer.from(body),
        headers: new Headers(headers),
        nowMs: Date.parse(NOW),
      });

    const stripeHeader = (await SENDERS.stripe.sign(SENDERS.stripe.secret, body, NOW_S))["stripe-signature"]!;
    expect(
      Stripe.webhooks.constructEvent(body, stripeHeader, SENDERS.stripe.secret, 300, undefined, Date.parse(NOW)).id,
    ).toBe("evt_agree");
    expect(verdict(SENDERS.stripe, { "stripe-signature": stripeHeader })).toEqual({ ok: true, verifiedBy: "current" });
    expect(() =>
      Stripe.webhooks.constructEvent(body, stripeHeader, SENDERS.stripe.otherSecret, 300, undefined, Date.parse(NOW)),
    ).toThrow();
    expect(verdict(SENDERS.stripe, { "stripe-signature": stripeHeader }, SENDERS.stripe.otherSecret)).toEqual({
      ok: false,
      reason: "signature_invalid",
    });
    // Stripe sends a v1 per active secret during its own rolls: one valid is enough.
    const rolled = `${stripeHeader},v1=${"0".repeat(64)}`;
    expect(verdict(SENDERS.stripe, { "stripe-signature": rolled }).ok).toBe(true);

    // The Standard Webhooks library checks the timestamp against the real clock: signed now, checked now.
    const realNow = Date.now();
    const std = await SENDERS["standard-webhooks"].sign(
      SENDERS["standard-webhooks"].secret,
      body,
      Math.floor(realNow / 1000),
    );
    expect(new StandardWebhook(SENDERS["standard-webhooks"].secret).verify(body, std)).toEqual({
      id: "evt_agree",
      object: "event",
    });
    const standardVerdict = (secret: string) =>
      verifySignature({
        signature: { scheme: "standard-webhooks" },
        secrets: { current: secret, previous: null },
        body: Buffer.from(body),
        headers: new Headers(std),
        nowMs: realNow,
      });
    expect(standardVerdict(SENDERS["standard-webhooks"].secret)).toEqual({ ok: true, verifiedBy: "current" });
    expect(() => new StandardWebhook(SENDERS["standard-webhooks"].otherSecret).verify(body, std)).toThrow();
    expect(standardVerdict(SENDERS["standard-webhooks"].otherSecret)).toEqual({
      ok: false,
      reason: "signature_invalid",
    });

    const gh = await SENDERS.github.sign(SENDERS.github.secret, body, NOW_S);
    expect(await verifyGithub(SENDERS.github.secret, body, gh["x-hub-signature-256"]!)).toBe(true);
    expect(verdict(SENDERS.github, gh)).toEqual({ ok: true, verifiedBy: "current" });
    expect(await verifyGithub(SENDERS.github.otherSecret, body, gh["x-hub-signature-256"]!)).toBe(false);
    expect(verdict(SENDERS.github, gh, SENDERS.github.otherSecret)).toEqual({ ok: false, reason: "signature_invalid" });
  });

  it("malformed values of every scheme are a 401 signature_invalid, never a 500", async () => {
    const api = await setup();
    const body = JSON.stringify({ id: "evt_bad" });
    const malformed: Record<Exclude<SignatureScheme, "auto">, Array<Record<string, string>>> = {
      stripe: [
        { "stripe-signature": "" },
        { "stripe-signature": "v1=abc" },
        { "stripe-signature": `t=abc,v1=${"a".repeat(64)}` },
        { "stripe-signature": `t=${NOW_S}` },
        { "stripe-signature": "t=,,,=,v1=" },
      ],
      "standard-webhooks": [
        { "webhook-signature": "v1,AAAA" },
        { "webhook-signature": "v1,!!", "webhook-id": "x", "webhook-timestamp": String(NOW_S) },
      ],
      github: [{ "x-hub-signature-256": "sha1=abc" }, { "x-hub-signature-256": "sha256=" }],
      "hmac-sha256-hex": [{ "x-signature": "zz" }, { "x-signature": "sha256=" + "g".repeat(64) }],
      shopify: [{ "x-shopify-hmac-sha256": "not base64!" }, { "x-shopify-hmac-sha256": "" }],
      slack: [
        { "x-slack-signature": `v0=${"a".repeat(64)}` },
        { "x-slack-signature": "v1=abc", "x-slack-request-timestamp": String(NOW_S) },
        { "x-slack-signature": "", "x-slack-request-timestamp": "later" },
      ],
    };
    for (const [scheme, cases] of Object.entries(malformed) as Array<
      [keyof typeof SENDERS, Array<Record<string, string>>]
    >) {
      const { deliver } = await connectionFor(api, SENDERS[scheme]);
      for (const headers of cases) expectRefused(await deliver(body, headers), "signature_invalid");
    }
  });
});
