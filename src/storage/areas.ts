import { STORAGE_AREAS, type Storage, type StorageArea, type StorageAreas } from "../ports/storage.js";

/**
 * The store with every area replaced by `wrap(area, name)`: a plain object
 * with the store's lifecycle (bound to it) and any escape hatch (`db`,
 * `state`). The credentials area's `teamsFrom` follows its identity area
 * into the wrapping, so the one-call key lookup stays in use exactly when it was.
 */
export function mapAreas<S extends Storage>(
  storage: S,
  wrap: <A extends StorageArea>(area: StorageAreas[A], name: A) => StorageAreas[A],
): S {
  const areas: Partial<Record<StorageArea, unknown>> = {};
  for (const name of STORAGE_AREAS) areas[name] = wrap(storage[name], name);
  const wrapped = withAreas(storage, areas) as S;
  if (storage.credentials.teamsFrom === storage.identity && wrapped.credentials.teamsFrom !== wrapped.identity) {
    Object.defineProperty(wrapped.credentials, "teamsFrom", { value: wrapped.identity, enumerable: true });
  }
  return wrapped;
}

/**
 * A plain object: every property of `storage` (a class-based store's
 * prototype methods too, bound to it), then `areas` over its own.
 */
export function withAreas(storage: Storage, areas: Partial<Record<StorageArea, unknown>>): Storage {
  const copy: Record<string, unknown> = {};
  for (let o: object | null = storage; o && o !== Object.prototype; o = Object.getPrototypeOf(o)) {
    for (const key of Object.getOwnPropertyNames(o)) {
      if (key === "constructor" || key in copy) continue;
      const value = (storage as unknown as Record<string, unknown>)[key];
      copy[key] = typeof value === "function" ? value.bind(storage) : value;
    }
  }
  return Object.assign(copy, areas) as unknown as Storage;
}

/**
 * Whether the credentials area's one-call key lookup applies: it exists and
 * reads the teams of the identity area in use (see `KeyWithTeamLookup`).
 * When not, the caller asks `findApiKeyByHash` and then `identity.getTeam`.
 */
export function hasKeyWithTeamLookup(storage: Pick<Storage, "identity" | "credentials">): boolean {
  const { credentials } = storage;
  return typeof credentials.findApiKeyWithTeam === "function" && credentials.teamsFrom === storage.identity;
}
