import { ApiError } from "../base/api-error.js";
import {
  STORAGE_AREAS,
  type Storage,
  type StorageArea,
  type StorageAreaReads,
  type StorageAreas,
} from "../ports/storage.js";
import { withAreas } from "./areas.js";
import { headBeforePage } from "./change-feeds.js";

/** An area as a host supplies it: its reads (`StorageAreaReads`), and any of its other writes (none: read-only). */
export type SuppliedArea<A extends StorageArea> = StorageAreaReads[A] & Partial<StorageAreas[A]>;

/** The areas a host supplies itself. */
export type HostAreas = { [A in StorageArea]?: SuppliedArea<A> };

/** The 405 a write to a read-only area answers. */
export function readOnlyArea(area: StorageArea): ApiError {
  return new ApiError(
    405,
    "method_not_allowed",
    `the ${area} area is read-only: the host supplies it from its own storage, so change it there`,
  );
}

/**
 * Dataport's store with some areas supplied by the host: `{ ...base,
 * identity: hostIdentity }`, except that a method the host's area lacks (a
 * write it leaves out) answers 405 `method_not_allowed` naming the area.
 * Seeding, `ping` and `close` stay the base store's: a host fills its own
 * areas itself. The one-call key lookup of the base's credentials area is
 * left alone: it applies only while the identity area is the base's own
 * (`KeyWithTeamLookup.teamsFrom`).
 *
 *   const storage = mountStorage(createSqliteStorage({ path }), { identity: myUsersAndTeams });
 */
export function mountStorage(base: Storage, areas: HostAreas): Storage {
  const mounted: Partial<Record<StorageArea, object>> = {};
  for (const [name, supplied] of Object.entries(areas) as [StorageArea, object | undefined][]) {
    if (supplied === undefined) continue;
    if (!STORAGE_AREAS.includes(name)) throw new TypeError(`mountStorage: unknown storage area '${name}'`);
    const area = readOnlyWhereMissing(name, supplied);
    // A host's rows area reads its change feed's head apart from its pages: read before the page, for the hand-off.
    mounted[name] = name === "rows" ? headBeforePage(area as StorageAreas["rows"]) : area;
  }
  return withAreas(base, mounted);
}

const READ_ONLY = Symbol("dataport.readOnlyArea");

/**
 * The host's area as it is, where every method it lacks is a stand-in that
 * answers 405 (and says so to `assertWritable`). What a method is comes
 * from the area's type, not from a list: any name the object lacks.
 */
function readOnlyWhereMissing(area: StorageArea, supplied: object): object {
  const standIns = new Map<string, () => Promise<never>>();
  return new Proxy(supplied, {
    get(target, name, receiver) {
      // `then` is asked by `await` and Promise.resolve: an area is not a promise.
      if (typeof name !== "string" || name in target || name === "then" || name === "toJSON")
        return Reflect.get(target, name, receiver);
      let write = standIns.get(name);
      if (write === undefined) standIns.set(name, (write = readOnlyWrite(area)));
      return write;
    },
  });
}

/**
 * The stand-in for a write a host's area lacks: it answers 405, and says so to `assertWritable` before anything is
 * validated.
 */
function readOnlyWrite(area: StorageArea): () => Promise<never> {
  const write = () => Promise.reject(readOnlyArea(area));
  return Object.assign(write, { [READ_ONLY]: area });
}

/**
 * Throws the 405 of a read-only area when `method` of this area is one of its stand-ins; admin operations call it
 * first.
 */
export function assertWritable<T extends object>(area: T, method: keyof T & string): void {
  const name = (area[method] as { [READ_ONLY]?: StorageArea } | undefined)?.[READ_ONLY];
  if (name !== undefined) throw readOnlyArea(name);
}
