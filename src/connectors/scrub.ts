/**
 * Upstream error text with what may be secret taken out, before it reaches a
 * client (a 502 message) or a log. Upstreams echo their request in errors
 * (`Invalid token for https://host/query?token=…`), so this removes:
 * each of `secrets` verbatim and URL-encoded (a connection's token and
 * password, see connectionSecrets); credentials in URLs
 * (`https://user:pass@host`); URL query strings and fragments; `name=value`
 * or `name: value` pairs whose name says secret (token, key, password,
 * secret, signature, auth…); `Bearer`/`Basic` credentials. What is left is
 * cut to `maxLength` characters.
 */
export function scrubUpstreamText(text: string, secrets: readonly string[] = [], maxLength = 300): string {
  let out = text;
  for (const secret of secrets) {
    if (secret.length < MIN_SECRET_LENGTH) continue;
    for (const form of new Set([
      secret,
      encodeURIComponent(secret),
      new URLSearchParams({ s: secret }).toString().slice(2),
    ])) {
      out = out.split(form).join(REDACTED);
    }
  }
  out = out
    .replace(
      URL_PATTERN,
      (_match, scheme: string, userinfo: string | undefined, rest: string, query: string | undefined) =>
        `${scheme}${userinfo ? `${REDACTED}@` : ""}${rest}${query ? `?${REDACTED}` : ""}`,
    )
    .replace(AUTH_SCHEME, (_match, scheme: string) => `${scheme} ${REDACTED}`)
    .replace(SECRET_PAIR, (_match, name: string, separator: string) => `${name}${separator}${REDACTED}`);
  return out.length <= maxLength ? out : `${out.slice(0, maxLength)}…`;
}

/**
 * The secrets in a connection's configuration, for scrubUpstreamText: string
 * values under a secret-sounding key (token, password, apiKey, secret…) at
 * any depth, and the password and query values of every URL-valued string
 * (a connection string's password).
 */
export function connectionSecrets(config: Readonly<Record<string, unknown>>): string[] {
  const found = new Set<string>();
  const visit = (value: unknown, key: string, depth: number): void => {
    if (typeof value === "string") {
      if (SECRET_NAME.test(key)) found.add(value);
      if (value.includes("://")) {
        try {
          const url = new URL(value);
          if (url.password) found.add(decodeURIComponent(url.password));
          if (url.username && url.password) found.add(decodeURIComponent(url.username));
          for (const [, item] of url.searchParams) found.add(item);
        } catch {
          // not a URL after all
        }
      }
    } else if (value !== null && typeof value === "object" && depth < 8) {
      for (const [name, item] of Object.entries(value)) visit(item, name, depth + 1);
    }
  };
  visit(config, "", 0);
  // Longest first: a secret containing another is removed whole.
  return [...found].filter((s) => s.length >= MIN_SECRET_LENGTH).sort((a, b) => b.length - a.length);
}

const REDACTED = "[redacted]";
/** Shorter values would redact ordinary words. */
const MIN_SECRET_LENGTH = 4;
const SECRET_NAME = /token|secret|passw|pwd|api[-_]?key|apikey|auth|credential|signature|^key$|private/i;
/** scheme://, optional userinfo@, host and path, optional ?query and #fragment. */
const URL_PATTERN = /\b([a-z][a-z0-9+.-]*:\/\/)([^\s/?#@]*@)?([^\s?#]*)(?:(\?[^\s#]*)?(#\S*)?)/gi;
const SECRET_PAIR =
  /\b((?:access_?|refresh_?|id_?)?token|api[-_]?key|apikey|key|password|passwd|pwd|secret|client_secret|signature|sig|auth|authorization|session(?:id)?)(\s*[=:]\s*)(?![a-z][a-z0-9+.-]*:\/\/|\[redacted\])(?:"[^"]*"|'[^']*'|[^\s&"',;)]+)/gi;
const AUTH_SCHEME = /\b(Bearer|Basic)\s+[A-Za-z0-9\-._~+/]+=*/g;
