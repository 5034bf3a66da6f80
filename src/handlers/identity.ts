import type { ApiKeyCredential, SessionCredential } from "../core/auth.js";
import type { KeyBodies } from "../core/caches.js";
import type { AuthedContext } from "../context/handler.js";
import { Reply } from "../http/reply.js";

/** GET /me: what the token belongs to (an API key's answer needs no storage call, so no promise). */
export function describeCredential(ctx: AuthedContext) {
  const { credential } = ctx;
  if (credential.kind === "api-key") return Reply.jsonText(200, apiKeyBody(ctx.caches.keyBodies, credential));
  return describeSession(ctx, credential);
}

async function describeSession(ctx: AuthedContext, credential: SessionCredential) {
  const teams = await Promise.all(
    credential.memberships.map(async (m) => {
      const team = await ctx.storage.identity.getTeam(m.teamId);
      return { id: m.teamId, name: team?.name ?? m.teamId, isPersonal: team?.isPersonal ?? false, role: m.role };
    }),
  );
  return { kind: "session-token" as const, teams };
}

/** An API key's /me body; remembered per instance for records that cannot change (`KeyBodies`, src/core/caches.ts). */
function apiKeyBody(bodies: KeyBodies, { key, team }: ApiKeyCredential): string {
  const known = bodies.get(key, team);
  if (known !== undefined) return known;
  const text = JSON.stringify({
    kind: "api-key",
    name: key.name,
    scopes: key.scopes,
    teams: [{ id: team.id, name: team.name }],
    allowlist: {
      datasets: key.allowlist.datasets,
      connections: key.allowlist.connections,
      tables: key.allowlist.tables,
    },
  });
  bodies.remember(key, team, text);
  return text;
}
