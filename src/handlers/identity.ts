import type { ApiKeyCredential, SessionCredential } from "../auth.js";
import type { AuthedContext } from "../context.js";
import type { ApiKeyRecord, Team } from "../domain/model.js";
import { Reply } from "../http/reply.js";

/** GET /me: what the token belongs to (an API key's answer needs no storage call, so no promise). */
export function describeCredential(ctx: AuthedContext) {
  const { credential } = ctx;
  if (credential.kind === "api-key") return Reply.jsonText(200, apiKeyBody(credential));
  return describeSession(ctx, credential);
}

async function describeSession(ctx: AuthedContext, credential: SessionCredential) {
  const teams = await Promise.all(
    credential.memberships.map(async (m) => {
      const team = await ctx.storage.getTeam(m.teamId);
      return { id: m.teamId, name: team?.name ?? m.teamId, isPersonal: team?.isPersonal ?? false, role: m.role };
    }),
  );
  return { kind: "session-token" as const, teams };
}

/**
 * An API key's /me body by key record, for records that cannot change: a
 * deeply frozen key and team (the memory store hands out such records and
 * replaces them on every change, so a revoked or edited key is a new record).
 * Polling /me with an unchanged key then costs no serialisation. Records
 * that are not frozen (the SQL stores build fresh ones per lookup) are
 * serialised every time; nothing is remembered for them.
 */
const bodyByKey = new WeakMap<ApiKeyRecord, { team: Team; text: string }>();

function apiKeyBody({ key, team }: ApiKeyCredential): string {
  // Only deeply frozen records are remembered, and nothing thaws: a hit needs no new check.
  const known = bodyByKey.get(key);
  if (known !== undefined && known.team === team) return known.text;
  const immutable = isDeeplyFrozen(key, team);
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
  if (immutable) bodyByKey.set(key, { team, text });
  return text;
}

/** Every object the body reads is frozen (its strings are immutable anyway). */
function isDeeplyFrozen(key: ApiKeyRecord, team: Team): boolean {
  const { allowlist } = key;
  return (
    Object.isFrozen(key) &&
    Object.isFrozen(team) &&
    Object.isFrozen(key.scopes) &&
    Object.isFrozen(allowlist) &&
    Object.isFrozen(allowlist.datasets) &&
    Object.isFrozen(allowlist.connections) &&
    Object.isFrozen(allowlist.tables)
  );
}
