export { TOKENS, conformanceFixture as testFixture } from "../../src/testing/conformance/fixture.js";

/**
 * A fixture webhook connection of team_ops (unsigned unless a secret is given), for suites that add endpoints to the
 * conformance fixture.
 */
export function fixtureWebhook(id: string, endpointId: string, signingSecret: string | null = null) {
  return {
    id,
    teamId: "team_ops",
    name: id,
    type: "webhook",
    config: { endpointId, signingSecret },
    createdAt: "2026-10-05T00:00:00Z",
  };
}
