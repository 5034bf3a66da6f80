import type { AuthedContext } from "../context.js";

/** GET /me: what the token belongs to. */
export async function describeCredential(ctx: AuthedContext) {
  const { credential } = ctx;
  if (credential.kind === "api-key") {
    const { key, team } = credential;
    return {
      kind: "api-key" as const,
      name: key.name,
      scopes: key.scopes,
      teams: [{ id: team.id, name: team.name }],
      allowlist: {
        datasets: key.allowlist.datasets,
        connections: key.allowlist.connections,
        tables: key.allowlist.tables,
      },
    };
  }
  const teams = await Promise.all(
    credential.memberships.map(async (m) => {
      const team = await ctx.storage.getTeam(m.teamId);
      return { id: m.teamId, name: team?.name ?? m.teamId, isPersonal: team?.isPersonal ?? false, role: m.role };
    }),
  );
  return { kind: "session-token" as const, teams };
}
