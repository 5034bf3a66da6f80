import { HASH_EVERY_TIME, type TokenHashes } from "./token-hashes.js";
import type { Actor, ApiKeyRecord, Membership, Scope, Team, User } from "../domain/model.js";
import { ApiError } from "../base/api-error.js";
import type { Clock } from "../base/clock.js";
import type { SessionAuthenticator } from "../ports/session.js";
import type { Storage } from "../ports/storage.js";

export interface ApiKeyCredential {
  kind: "api-key";
  key: ApiKeyRecord;
  team: Team;
}

export interface SessionCredential {
  kind: "session-token";
  user: User;
  memberships: Membership[];
}

export type Credential = ApiKeyCredential | SessionCredential;

export const unauthorized = (message: string) =>
  new ApiError(401, "unauthorized", message, { headers: { "www-authenticate": "Bearer" } });

/** Resolve `Authorization: Bearer <token>` to a credential, or throw 401. */
export async function authenticate(
  authorization: string | null,
  storage: Storage,
  sessions: SessionAuthenticator,
  hashes: TokenHashes = HASH_EVERY_TIME,
): Promise<Credential> {
  if (!authorization) throw unauthorized("missing Authorization header");
  const token = bearerToken(authorization);
  if (token === null) throw unauthorized("Authorization must be 'Bearer <token>'");
  const tokenHash = hashes.of(token);
  const found = await findKey(storage, tokenHash);
  if (found) {
    // The key's creator matters only to /audit, which loads it there.
    const { key, team } = found;
    if (key.revokedAt !== null || !team) throw unauthorized("invalid or revoked token");
    hashes.remember(token, tokenHash);
    return { kind: "api-key", key, team };
  }
  return await sessionCredential(token, storage, sessions);
}

async function sessionCredential(token: string, storage: Storage, sessions: SessionAuthenticator): Promise<Credential> {
  const session = await sessions(token);
  if (session) {
    const [user, memberships] = await Promise.all([
      storage.identity.getUser(session.userId),
      storage.identity.listMemberships(session.userId),
    ]);
    if (user) return { kind: "session-token", user, memberships };
  }
  throw unauthorized("invalid or revoked token");
}

const BEARER = /^Bearer[ \t]+(\S+)[ \t]*$/i;
/** What nearly every client sends: `Bearer `, then a token of visible ASCII. */
const PLAIN_BEARER = /^Bearer [\x21-\x7e]+$/;

/** The token of `Bearer <token>`, or null. The usual form is tested without capturing. */
export function bearerToken(authorization: string): string | null {
  if (PLAIN_BEARER.test(authorization)) return authorization.slice(7);
  return BEARER.exec(authorization)?.[1] ?? null;
}

type FoundKey = { key: ApiKeyRecord; team: Team | null };

/** A key and its team: in one call when the store offers it for the identity area in use, else two. */
function findKey(storage: Storage, tokenHash: string): Promise<FoundKey | null> {
  const { credentials } = storage;
  if (credentials.findApiKeyWithTeam && credentials.teamsFrom === storage.identity)
    return credentials.findApiKeyWithTeam(tokenHash);
  return findKeyThenTeam(storage, tokenHash);
}

async function findKeyThenTeam(storage: Storage, tokenHash: string): Promise<FoundKey | null> {
  const key = await storage.credentials.findApiKeyByHash(tokenHash);
  return key ? { key, team: key.revokedAt === null ? await storage.identity.getTeam(key.teamId) : null } : null;
}

/** The default session authenticator: the token's SHA-256 looked up in storage. */
export function storageSessions(
  storage: Storage,
  clock: Clock,
  hashes: TokenHashes = HASH_EVERY_TIME,
): SessionAuthenticator {
  return async (token) => {
    const tokenHash = hashes.of(token);
    const userId = await storage.credentials.findSessionUser(tokenHash, clock.now());
    if (!userId) return null;
    hashes.remember(token, tokenHash);
    return { userId };
  };
}

export function planRequired(message = "the Data Access API needs the Pro, Team or Business plan"): ApiError {
  return new ApiError(403, "plan_required", message);
}

/** Keys of a Free-plan team are refused on every call. */
export function assertKeyPlan(credential: Credential): void {
  if (credential.kind === "api-key" && credential.team.plan === "free") throw planRequired();
}

export function assertScope(credential: Credential, scope: Scope | null): void {
  if (scope === null || credential.kind === "session-token") return;
  if (!credential.key.scopes.includes(scope)) {
    throw new ApiError(403, "insufficient_scope", `this key lacks the ${scope} scope`, {
      details: { required: scope },
    });
  }
}

/** Who a write is recorded against: the key (by name) or the signed-in user; never anonymous. */
export function actorOf(credential: Credential): Actor {
  return credential.kind === "api-key"
    ? { type: "api-key", id: credential.key.id, name: credential.key.name }
    : { type: "user", id: credential.user.id, email: credential.user.email };
}
