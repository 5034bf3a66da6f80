/**
 * Resolves a session token (issued by the host's own sign-in) to a user id.
 * Return null for an unknown or expired token. The default authenticator
 * looks the token's SHA-256 up in storage (the fixture's sessions).
 */
export type SessionAuthenticator = (token: string) => Promise<{ userId: string } | null>;
