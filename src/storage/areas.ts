import { STORAGE_AREAS, type Storage, type StorageArea, type StorageAreas } from "../ports/storage.js";

/**
 * The store with every area replaced by `wrap(area, name)`, the lifecycle
 * and any escape hatch (`db`, `state`) inherited from it. The credentials
 * area's `teamsFrom` follows its identity area into the wrapping, so the
 * one-call key lookup stays in use exactly when it was.
 */
export function mapAreas<S extends Storage>(storage: S, wrap: <A extends StorageArea>(area: StorageAreas[A], name: A) => StorageAreas[A]): S {
  const wrapped = Object.create(storage) as S;
  for (const name of STORAGE_AREAS) Object.defineProperty(wrapped, name, { value: wrap(storage[name], name), enumerable: true });
  if (storage.credentials.teamsFrom === storage.identity && wrapped.credentials.teamsFrom !== wrapped.identity) {
    Object.defineProperty(wrapped.credentials, "teamsFrom", { value: wrapped.identity, enumerable: true });
  }
  return wrapped;
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
