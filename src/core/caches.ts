import { LRUCache } from "lru-cache";
import type { AggregateAnswer } from "../domain/aggregate-query.js";
import type { ApiKeyRecord, Team } from "../domain/model.js";
import type { Clock } from "../base/clock.js";
import { createTokenHashes, type TokenHashes } from "./token-hashes.js";

/**
 * Every cache the request core keeps, in one place: one set per API
 * instance (built by `createDataApi`, reached by the pipeline and, as
 * `ctx.caches`, by handlers), each bounded and built on lru-cache. Nothing
 * is kept in module state. docs/performance.md says what each one saves.
 *
 * The one cache not here is the router's own (request target → matched
 * route, src/server/router.ts), which lives inside the routing module. Stores keep
 * theirs behind the storage port; connection query results go through the
 * Cache port by design.
 */
export interface Caches {
  /** SHA-256 of bearer tokens that recently authenticated (src/core/token-hashes.ts). */
  readonly tokenHashes: TokenHashes;
  /** GET /me bodies of API keys (src/handlers/identity.ts). */
  readonly keyBodies: KeyBodies;
  /**
   * Serialised OpenAPI documents, `api` and `admin` (src/routes/openapi.ts); the route table and settings never change.
   */
  readonly documents: Documents;
  /** Aggregate answers by their target's version and query (src/handlers/aggregates.ts). */
  readonly aggregates: AggregateAnswers;
}

/**
 * Aggregate answers, each under a key naming its target's record (which
 * every write of its rows changes) and the parsed query: a hit is the
 * answer of the same aggregate over the same rows. Bounded by the groups
 * held (AGGREGATE_GROUPS in all), so by memory.
 */
export interface AggregateAnswers {
  get(key: string): AggregateAnswer | undefined;
  set(key: string, answer: AggregateAnswer): void;
}

/** Groups (and totals lines) held by the remembered aggregate answers, in all. */
const AGGREGATE_GROUPS = 100_000;

/** Texts by name (an LRU of two). */
export interface Documents {
  get(name: "api" | "admin"): string | undefined;
  set(name: "api" | "admin", text: string): void;
  readonly size: number;
}

/**
 * An API key's /me body by key id, with the key and team records it was
 * serialised from. Reused only for those very records, and only remembered
 * for records that are deeply frozen (the memory store's, and PostgreSQL's
 * for a key read again): a changed key or team is another record, so a hit
 * can never be stale.
 */
export interface KeyBodies {
  /** The body serialised from exactly these records, if remembered. */
  get(key: ApiKeyRecord, team: Team): string | undefined;
  /** Remember `text` for these records, when they can never change. */
  remember(key: ApiKeyRecord, team: Team, text: string): void;
}

/** At most this many keys' /me bodies (about 300 bytes each). */
const KEY_BODIES = 1024;

export function createCaches(settings: { tokenHashCacheSize: number }, clock: Clock): Caches {
  return {
    tokenHashes: createTokenHashes(settings.tokenHashCacheSize, clock),
    keyBodies: createKeyBodies(),
    documents: new LRUCache<"api" | "admin", string>({ max: 2 }) as Documents,
    aggregates: new LRUCache<string, AggregateAnswer>({
      max: 1024,
      maxSize: AGGREGATE_GROUPS,
      sizeCalculation: (answer) => answer.groups.length + 1,
    }) as AggregateAnswers,
  };
}

function createKeyBodies(): KeyBodies {
  const bodies = new LRUCache<string, { key: ApiKeyRecord; team: Team; text: string }>({ max: KEY_BODIES });
  return {
    get(key, team) {
      const known = bodies.get(key.id);
      return known !== undefined && known.key === key && known.team === team ? known.text : undefined;
    },
    remember(key, team, text) {
      if (isDeeplyFrozen(key, team)) bodies.set(key.id, { key, team, text });
    },
  };
}

/** Every object a /me body reads is frozen (its strings are immutable anyway). */
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
