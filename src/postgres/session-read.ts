import type { Membership, Team, User } from "../domain/model.js";

/**
 * What one authentication statement read besides the API key it looks for:
 * the session with that token hash (when no key has it), the session's
 * user, the user's memberships and their teams. Authentication asks for
 * them right after (`findSessionUser`, then `getUser` and
 * `listMemberships`, then `/me` the teams), in the same turn of the event
 * loop: they are answered from here instead of four more round trips.
 *
 * Kept only until the end of the current turn (a macrotask later), and
 * forgotten at once when this store writes identity or credentials, so an
 * answer is never older than the statement it came with: as if all had been
 * asked in that statement.
 */
export interface SessionReads {
  /** The session found by token hash (expiry in epoch ms, null: never), with what was read along. */
  rememberSession(tokenHash: string, session: { userId: string; expiresMs: number | null }, read: SessionRead): void;
  /** A session read this turn, or undefined when none was (null: read, and there was none). */
  session(tokenHash: string): { userId: string; expiresMs: number | null } | null | undefined;
  /** No session has this token hash (read this turn). */
  rememberNoSession(tokenHash: string): void;
  remember(userId: string, read: SessionRead): void;
  user(userId: string): User | null | undefined;
  memberships(userId: string): Membership[] | undefined;
  team(teamId: string): Team | null | undefined;
  forget(): void;
}

export interface SessionRead {
  user: User | null;
  memberships: Membership[];
  /** The teams of the memberships (null: a membership's team is gone). */
  teams: ReadonlyMap<string, Team | null>;
}

export function sessionReads(): SessionReads {
  const byUser = new Map<string, SessionRead>();
  const teams = new Map<string, Team | null>();
  const sessions = new Map<string, { userId: string; expiresMs: number | null } | null>();
  let clearing = false;
  const forget = () => {
    byUser.clear();
    teams.clear();
    sessions.clear();
  };
  const clearSoon = () => {
    if (clearing) return;
    clearing = true;
    setImmediate(() => {
      clearing = false;
      forget();
    });
  };
  const remember = (userId: string, read: SessionRead) => {
    byUser.set(userId, read);
    for (const [id, team] of read.teams) teams.set(id, team);
    clearSoon();
  };
  return {
    rememberSession(tokenHash, session, read) {
      sessions.set(tokenHash, session);
      remember(session.userId, read);
    },
    session: (tokenHash) => sessions.get(tokenHash),
    rememberNoSession(tokenHash) {
      sessions.set(tokenHash, null);
      clearSoon();
    },
    remember,
    user: (userId) => byUser.get(userId)?.user,
    memberships: (userId) => byUser.get(userId)?.memberships,
    team: (teamId) => teams.get(teamId),
    forget,
  };
}
