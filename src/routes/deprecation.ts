/**
 * A route's deprecation, as its definition states it (`deprecated` in
 * src/core/routing.ts) and as its answers say it: `Deprecation` (RFC 9745,
 * `@<unix seconds>`), `Sunset` (RFC 8594, an HTTP-date) and
 * `Link: <…>; rel="deprecation"` pointing to what explains the change.
 */
export interface Deprecation {
  /** When the route is (or will be) deprecated: an ISO 8601 date or timestamp (`2027-01-01`). */
  since: string;
  /** When it stops answering: an ISO 8601 date or timestamp, not before `since`. Absent: no date yet. */
  sunset?: string;
  /** Where the change is explained (its successor, a migration note). Default: the API reference, `{appUrl}/api/v1/docs`. */
  link?: string;
}

/** The headers every answer of a deprecated route carries (a fresh object; names lower-case). */
export function deprecationHeaders(deprecation: Deprecation, appUrl: string): Record<string, string> {
  const since = instantOf(deprecation.since, "since");
  const headers: Record<string, string> = { deprecation: `@${Math.floor(since / 1000)}` };
  if (deprecation.sunset !== undefined) {
    const sunset = instantOf(deprecation.sunset, "sunset");
    if (sunset < since) throw new TypeError(`deprecated.sunset (${deprecation.sunset}) is before deprecated.since (${deprecation.since})`);
    headers.sunset = new Date(sunset).toUTCString();
  }
  const link = deprecation.link ?? `${appUrl}/api/v1/docs`;
  if (/[<>\s]/.test(link)) throw new TypeError(`deprecated.link must be a URI without spaces or angle brackets: ${link}`);
  headers.link = `<${link}>; rel="deprecation"`;
  return headers;
}

/** The headers of each deprecated route of a table, worked out once (a bad date fails at start-up, not per request). */
export function deprecationsOf(routes: Iterable<{ deprecated?: Deprecation }>, appUrl: string): Map<object, Readonly<Record<string, string>>> {
  const byRoute = new Map<object, Readonly<Record<string, string>>>();
  for (const route of routes) if (route.deprecated) byRoute.set(route, Object.freeze(deprecationHeaders(route.deprecated, appUrl)));
  return byRoute;
}

function instantOf(text: string, field: string): number {
  const at = /^\d{4}-\d{2}-\d{2}(T.+)?$/.test(text) ? Date.parse(text) : Number.NaN;
  if (Number.isNaN(at)) throw new TypeError(`deprecated.${field} must be an ISO 8601 date or timestamp, not ${JSON.stringify(text)}`);
  return at;
}
