import { type Credential, planRequired } from "./auth.js";
import type { Team } from "../domain/model.js";
import { ApiError, notFound } from "../base/api-error.js";
import type { Storage } from "../ports/storage.js";

/** Allowlist kinds of an API key. */
export type AllowKind = "datasets" | "connections" | "tables";

/**
 * The team an endpoint that takes `teamId` works in. A session token must
 * send it (400 team_required) and be a member (else 404); an API key works
 * in its own team, and any other teamId is 404. Free-plan teams: 403.
 */
export async function resolveTeam(credential: Credential, teamId: string | undefined, storage: Storage): Promise<Team> {
  if (credential.kind === "api-key") {
    if (teamId !== undefined && teamId !== credential.team.id) throw notFound("team");
    return credential.team;
  }
  if (teamId === undefined || teamId === "") {
    throw new ApiError(400, "team_required", "a session token must send teamId (see GET /me)", {
      details: { parameter: "teamId" },
    });
  }
  if (!credential.memberships.some((m) => m.teamId === teamId)) throw notFound("team");
  const team = await storage.identity.getTeam(teamId);
  if (!team) throw notFound("team");
  if (team.plan === "free") throw planRequired();
  return team;
}

/**
 * Whether the credential may reach an object. For a key: the id is in the
 * allowlist of one of `kinds` and the object is in the key's team. For a
 * session: the person is a member of the object's team.
 */
export function canReach(
  credential: Credential,
  kinds: readonly AllowKind[],
  object: { id: string; teamId: string },
): boolean {
  if (credential.kind === "api-key") {
    if (object.teamId !== credential.team.id) return false;
    return kinds.some((kind) => credential.key.allowlist[kind].includes(object.id));
  }
  return credential.memberships.some((m) => m.teamId === object.teamId);
}

/**
 * Load-and-check in one step: returns the object when the credential may
 * reach it and throws the same 404 as an unknown id otherwise (the body does
 * not reveal which). For a session whose team is on the Free plan: 403.
 */
export async function reachable<T extends { id: string; teamId: string }>(
  credential: Credential,
  kinds: readonly AllowKind[],
  object: T | null,
  what: string,
  storage: Storage,
): Promise<T> {
  if (!object || !canReach(credential, kinds, object)) throw notFound(what);
  if (credential.kind === "session-token") {
    const team = await storage.identity.getTeam(object.teamId);
    if (team?.plan === "free") throw planRequired();
  }
  return object;
}
