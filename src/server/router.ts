import { IttyRouter } from "itty-router";
import { LRUCache } from "lru-cache";
import { ApiError } from "../base/api-error.js";
import { checkText } from "../http/body.js";
import { type RawQuery, rawQuery } from "../http/query.js";
import type { RouteDef } from "../routes/route-def.js";

/** Every route of one path pattern, by method. */
export interface RouteGroup {
  /** Mount and pattern, `/api/v1/datasets/:id/rows`: what logs, metrics and the usage log name. */
  readonly template: string;
  /** The route of each method; HEAD is the GET route's where there is one. */
  readonly byMethod: ReadonlyMap<string, RouteDef>;
  /** The `Allow` header of a 405: the group's methods (HEAD with GET) and OPTIONS. */
  readonly allow: string;
}

/** Where a request target falls: its group, its query and its path parameters. */
export class RouteMatch {
  #params: Readonly<Record<string, string>> | null = null;
  constructor(
    readonly group: RouteGroup,
    /** The path parameters as sent, percent-encoded. */
    private readonly sent: Readonly<Record<string, string>>,
    readonly query: RawQuery,
  ) {}

  /**
   * The path parameters percent-decoded, on first read (after the 404 and
   * 405 checks): malformed encoding is 404; NUL or an unpaired surrogate is
   * 400 invalid_parameter (checkText).
   */
  get params(): Readonly<Record<string, string>> {
    return (this.#params ??= Object.freeze(decodeParams(this.sent)));
  }

  /** The name of the first path parameter that cannot be decoded or breaks the text rule, or null when all are fine. */
  invalidParam(): string | null {
    for (const key in this.sent) {
      try {
        decodeParams({ [key]: this.sent[key]! });
      } catch {
        return key;
      }
    }
    return null;
  }
}

export interface Router {
  /** Every route with its mount, in table order. */
  readonly routes: ReadonlyArray<{ mount: string; route: RouteDef }>;
  /** The group whose pattern the target's path matches, or null (404). */
  match(target: string): RouteMatch | null;
}

/**
 * The route table as a router. itty-router compiles each mount + pattern
 * (`/api/v1/datasets/:id/rows`) into a regular expression; a target is
 * matched against them in table order and the first match wins.
 */
export function createRouter(mounts: ReadonlyArray<{ base: string; routes: readonly RouteDef[] }>): Router {
  const itty = IttyRouter();
  const groups = new Map<string, { template: string; byMethod: Map<string, RouteDef>; allow: string }>();
  const routes: Array<{ mount: string; route: RouteDef }> = [];
  for (const { base, routes: table } of mounts) {
    for (const route of table) {
      routes.push({ mount: base, route });
      const template = base + route.path;
      let group = groups.get(template);
      if (!group) {
        const found = (group = { template, byMethod: new Map<string, RouteDef>(), allow: "" });
        groups.set(template, found);
        itty.all(template, () => found);
      }
      group.byMethod.set(route.method, route);
    }
  }
  // HEAD is GET without the body (RFC 9110): a GET route answers it, and the pipeline drops the body.
  for (const group of groups.values()) {
    const get = group.byMethod.get("GET");
    if (get && !group.byMethod.has("HEAD")) group.byMethod.set("HEAD", get);
    group.allow = [...group.byMethod.keys(), "OPTIONS"].join(", ");
  }

  /** The group of a path: itty's patterns in table order, the first that matches. */
  function scan(path: string, search: string): RouteMatch | null {
    for (const [, pattern, handlers] of itty.routes) {
      const found = pattern.exec(path);
      if (found === null) continue;
      const group = (handlers[0] as () => RouteGroup)();
      return new RouteMatch(
        group,
        found.groups ?? {},
        search === "" ? EMPTY_QUERY : rawQuery(new URLSearchParams(search)),
      );
    }
    return null;
  }

  // Matches by target, for targets without a query string (the hot paths: a
  // webhook endpoint, /me): a hit skips trying the patterns one by one and
  // decoding the parameters again. Only the match of the same target string
  // is reused, so it is the same match; nothing in it changes once decoded.
  const remembered = new LRUCache<string, RouteMatch>({ max: ROUTE_CACHE_SIZE });

  return {
    routes,
    match(target) {
      const cacheable = target.length <= ROUTE_CACHE_TARGET_LENGTH && !target.includes("?");
      const known = cacheable ? remembered.get(target) : undefined;
      if (known !== undefined) return known;
      const { path, search } = splitTarget(target);
      const found = scan(path, search);
      if (found !== null && cacheable) remembered.set(target, found);
      return found;
    },
  };
}

/** Targets remembered by a router (see `match`). */
const ROUTE_CACHE_SIZE = 1000;
/** Longer targets are matched afresh every time, so the cache holds at most about 256 KB of them. */
const ROUTE_CACHE_TARGET_LENGTH = 256;

/** The query of a target without one (shared, never written). */
const EMPTY_QUERY: RawQuery = Object.freeze(Object.create(null) as RawQuery);

/**
 * Path and query string of a request target. An adapter's target
 * (`/api/v1/me?x=1`) is split at `?` by hand, never parsed as a URL: a URL
 * parser resolves dot segments (`%2e%2e` included), and
 * `/api/webhooks/%2e%2e/v1/tables/{id}/rows` would be served by another
 * mount. An absolute URL (a Web Request's) was parsed by its runtime already.
 */
function splitTarget(target: string): { path: string; search: string } {
  if (!target.startsWith("/")) {
    const url = new URL(target);
    return { path: url.pathname, search: url.search.slice(1) };
  }
  const hash = target.indexOf("#");
  const sent = hash < 0 ? target : target.slice(0, hash);
  const mark = sent.indexOf("?");
  return mark < 0 ? { path: sent, search: "" } : { path: sent.slice(0, mark), search: sent.slice(mark + 1) };
}

/**
 * Path parameters percent-decoded: malformed encoding is 404; NUL or an unpaired surrogate is 400 invalid_parameter
 * (checkText).
 */
function decodeParams(params: Record<string, string>): Record<string, string> {
  const out: Record<string, string> = Object.create(null);
  for (const key in params) {
    let value = params[key]!;
    if (value.includes("%")) {
      try {
        value = decodeURIComponent(value);
      } catch {
        throw new ApiError(404, "not_found", "no such endpoint");
      }
    }
    checkText(value, key);
    out[key] = value;
  }
  return out;
}
