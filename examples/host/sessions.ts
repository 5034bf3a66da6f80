import { createHash, randomBytes } from "node:crypto";
import type pg from "pg";
import type { SessionAuthenticator } from "dataport";
import { quoteIdent } from "./schema.js";

/** How long a sign-in lasts. */
const SESSION_MS = 12 * 60 * 60 * 1000;

/**
 * The host's own sign-in and the authenticator Dataport calls with the
 * bearer token of a request. DEMO ONLY: signing in takes an email and no
 * password. A real host keeps its existing sign-in; what carries over is
 * the token handling: random, stored as a SHA-256 hash, with an expiry.
 */
export function hostSessions(pool: pg.Pool, schema: string) {
  const s = quoteIdent(schema);
  return {
    /** A new session token for the user with this email, or null when no single user has it. */
    async signIn(email: string): Promise<{ token: string; userId: string; expiresAt: string } | null> {
      const { rows } = await pool.query<{ id: string }>(
        `select id from ${s}.users where lower(email) = lower($1) limit 2`,
        [email],
      );
      if (rows.length !== 1) return null;
      const userId = rows[0]!.id;
      const token = randomBytes(32).toString("base64url");
      const expiresAt = new Date(Date.now() + SESSION_MS);
      await pool.query(`insert into ${s}.sessions (token_hash, user_id, expires_at) values ($1, $2, $3)`, [
        sha256(token),
        userId,
        expiresAt,
      ]);
      return { token, userId, expiresAt: expiresAt.toISOString() };
    },

    /** Ends the session of this token; false when there was none. */
    async signOut(token: string): Promise<boolean> {
      return ((await pool.query(`delete from ${s}.sessions where token_hash = $1`, [sha256(token)])).rowCount ?? 0) > 0;
    },

    /** Dataport's `sessions` option: the user of a live session, or null (Dataport answers 401). */
    authenticate: (async (token) => {
      const { rows } = await pool.query<{ user_id: string }>(
        `select user_id from ${s}.sessions where token_hash = $1 and expires_at > now()`,
        [sha256(token)],
      );
      return rows[0] ? { userId: rows[0].user_id } : null;
    }) satisfies SessionAuthenticator,
  };
}

function sha256(token: string): string {
  return createHash("sha256").update(token).digest("hex");
}
