import { Volume } from "memfs";
import { describe, expect, it } from "vitest";
import { FixtureError, parseFixture, readFixtureFile } from "../src/fixture/load.js";
import { testFixture } from "./support/fixture.js";

function refusal(mutate: (f: ReturnType<typeof testFixture>) => void): FixtureError {
  const fixture = testFixture();
  mutate(fixture);
  try {
    parseFixture(fixture);
  } catch (error) {
    if (error instanceof FixtureError) return error;
    throw error;
  }
  throw new Error("the fixture was accepted");
}

describe("fixture loader", () => {
  it("loads the test fixture with hashed tokens and counted rows", () => {
    const space = parseFixture(testFixture());
    expect(space.apiKeys[0]).not.toHaveProperty("token");
    expect(space.apiKeys[0]!.tokenHash).toMatch(/^[0-9a-f]{64}$/);
    expect(space.sessions[0]!.tokenHash).toMatch(/^[0-9a-f]{64}$/);
    expect(space.datasets.find((d) => d.id === "ds_orders")!.rowCount).toBe(5);
    expect(space.memberships).toContainEqual({ userId: "usr_bob", teamId: "team_mkt", role: "editor" });
  });

  it("names the JSON path of the first shape problem", () => {
    expect(refusal((f) => ((f.teams[1] as { plan: string }).plan = "gold")).path).toBe("$.teams[1].plan");
    expect(refusal((f) => ((f as { version: number }).version = 2)).path).toBe("$.version");
    expect(refusal((f) => ((f.apiKeys[0] as { scopes: string[] }).scopes = ["data:write"])).path).toBe(
      "$.apiKeys[0].scopes[0]",
    );
    expect(refusal((f) => ((f.tables[0]!.rows[0] as { _id: unknown })._id = 7)).path).toBe("$.tables[0].rows[0]._id");
  });

  it("refuses unknown references as a whole, naming where", () => {
    const allow = refusal((f) => f.apiKeys[0]!.allowlist.datasets.push("ds_missing"));
    expect(allow.path).toBe("$.apiKeys[0].allowlist.datasets[2]");
    expect(allow.message).toContain("unknown dataset ds_missing");
    expect(refusal((f) => (f.datasets[1]!.connectionId = "conn_missing")).path).toBe("$.datasets[1].connectionId");
    const view = refusal((f) =>
      Object.assign(f, {
        dashboardViews: [{ dashboardId: "dash_missing", at: "2026-10-01T00:00:00Z", visitorId: "v1" }],
      }),
    );
    expect(view.path).toBe("$.dashboardViews[0].dashboardId");
    expect(refusal((f) => f.teams.push({ ...f.teams[0]! })).path).toBe("$.teams[3].id");
  });

  it("substitutes ${ENV} strings in connection configs and refuses missing ones", () => {
    const fixture = testFixture();
    fixture.connections.push({
      id: "conn_pg",
      teamId: "team_ops",
      name: "PG",
      type: "postgres",
      config: { url: "${DATAPORT_TEST_PG}" } as never,
      createdAt: "2026-09-01T00:00:00Z",
    });
    const space = parseFixture(fixture, { env: { DATAPORT_TEST_PG: "postgres://u@h/db" } });
    expect(space.connections.find((c) => c.id === "conn_pg")!.config).toEqual({ url: "postgres://u@h/db" });
    expect(() => parseFixture(fixture, { env: {} })).toThrow(
      "$.connections[1].config.url: environment variable DATAPORT_TEST_PG is not set",
    );
  });

  it("reads files through an injected fs and reports unreadable or non-JSON files", () => {
    const fs = Volume.fromJSON({ "/f/good.json": JSON.stringify(testFixture()), "/f/bad.json": "{nope" });
    expect(readFixtureFile(fs as never, "/f/good.json").teams).toHaveLength(3);
    expect(() => readFixtureFile(fs as never, "/f/bad.json")).toThrow(/^\$: not valid JSON/);
    expect(() => readFixtureFile(fs as never, "/f/missing.json")).toThrow(/^\$: cannot read \/f\/missing.json/);
  });

  it("gives a webhook connection without a dataset one of its own", () => {
    const fixture = testFixture();
    fixture.connections.push({
      id: "conn_hook",
      teamId: "team_ops",
      name: "Hook",
      type: "webhook",
      config: { endpointId: "wh_1" } as never,
      createdAt: "2026-09-01T00:00:00Z",
    });
    const space = parseFixture(fixture);
    expect(space.datasets.find((d) => d.connectionId === "conn_hook")).toMatchObject({
      id: "ds_conn_hook",
      type: "connection",
      rowCount: 0,
    });
  });

  it("checks a webhook connection's signature scheme", () => {
    const hook = (signature: unknown) => (f: ReturnType<typeof testFixture>) => {
      f.connections.push({
        id: "conn_hook",
        teamId: "team_ops",
        name: "Hook",
        type: "webhook",
        config: { endpointId: "wh_1", signature } as never,
        createdAt: "2026-09-01T00:00:00Z",
      });
    };
    const unknown = refusal(hook({ scheme: "paypal" }));
    expect([unknown.path, unknown.message]).toEqual([
      "$.connections[1].config.signature.scheme",
      '$.connections[1].config.signature.scheme: unknown signature scheme "paypal"; one of auto, hmac-sha256-hex, github, standard-webhooks, stripe, shopify, slack',
    ]);
    expect(refusal(hook({ scheme: "slack", header: "X-Sig" })).path).toBe("$.connections[1].config.signature.header");
    expect(refusal(hook("stripe")).path).toBe("$.connections[1].config.signature");
    const fixture = testFixture();
    hook({ scheme: "hmac-sha256-hex", header: "X-Signature" })(fixture);
    expect(parseFixture(fixture).connections.find((c) => c.id === "conn_hook")!.config.signature).toEqual({
      scheme: "hmac-sha256-hex",
      header: "X-Signature",
    });
  });
});
