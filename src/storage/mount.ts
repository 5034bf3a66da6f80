import { ApiError } from "../errors.js";
import type { Storage, StorageArea } from "../ports/storage.js";

/** Every area's methods: `reads` a supplied area must have, `writes` it may leave out (then the area is read-only). */
export const AREA_METHODS = {
  identity: {
    reads: ["getBusiness", "getTeam", "listBusinessTeams", "getUser", "listMemberships", "listBusinesses", "listTeams", "listUsers"],
    writes: ["putBusiness", "deleteBusiness", "putTeam", "deleteTeam", "putUser", "deleteUser", "putMembership", "deleteMembership"],
  },
  credentials: {
    reads: ["findSessionUser", "getSession", "findApiKeyByHash", "getApiKey", "listApiKeys"],
    writes: ["insertSession", "deleteSession", "deleteUserSessions", "insertApiKey", "revokeApiKey", "markKeysCreatorDeleted"],
  },
  catalog: {
    reads: ["getConnection", "listConnections", "listDatasets", "listAllConnections", "listAllDatasets", "getDataset", "readDatasetRows"],
    writes: ["replaceDatasetRows", "putConnection", "deleteConnection", "putDataset", "deleteDataset", "writeDatasetRows"],
  },
  tables: {
    reads: ["getTable", "listTables", "listTableRows", "getTableRow", "listEditLog"],
    writes: [
      "insertTableRow",
      "updateTableRow",
      "deleteTableRow",
      "claimIdempotencyKey",
      "completeIdempotencyKey",
      "releaseIdempotencyKey",
      "putTable",
      "deleteTable",
    ],
  },
  webhooks: {
    reads: ["getWebhookEndpoint"],
    writes: ["ingestWebhookRow", "updateWebhookSettings", "createWebhookConnection"],
  },
  audit: {
    reads: ["readAuditEvents", "isAuditPosition"],
    writes: ["appendAuditEvent", "appendAuditEvents"],
  },
  analytics: {
    reads: [
      "listDashboards",
      "getDashboard",
      "listAllDashboards",
      "viewsByDay",
      "viewsByViewer",
      "spaceDashboardUsage",
      "spaceRefreshHistory",
      "spaceCreditUsage",
      "spaceApiUsage",
      "spaceDatasetUsage",
    ],
    writes: ["recordRefreshRun", "recordApiCall", "putDashboard", "changeDashboard", "deleteDashboard", "appendDashboardViews", "appendRefreshRuns", "appendCreditUsage"],
  },
} as const satisfies { readonly [A in StorageArea]: { readonly reads: readonly (keyof Storage)[]; readonly writes: readonly (keyof Storage)[] } };

/** An area as a host supplies it: every read, and any of the writes (none: read-only). */
export type SuppliedArea<A extends StorageArea> = Pick<Storage, (typeof AREA_METHODS)[A]["reads"][number]> &
  Partial<Pick<Storage, (typeof AREA_METHODS)[A]["writes"][number]>>;

/** The areas a host supplies itself. */
export type HostAreas = { [A in StorageArea]?: SuppliedArea<A> };

/** The 405 a write to a read-only area answers. */
export function readOnlyArea(area: StorageArea): ApiError {
  return new ApiError(405, "method_not_allowed", `the ${area} area is read-only: the host supplies it from its own storage, so change it there`);
}

/**
 * Dataport's store with some areas supplied by the host: every method of a
 * supplied area is the host's (bound to the object it came from), the rest
 * stay the base store's. A write the host's area lacks answers 405
 * `method_not_allowed` naming the area. Seeding, `ping` and `close` stay
 * the base store's: a host fills its own areas itself.
 *
 *   const storage = mountStorage(createSqliteStorage({ path }), { identity: myUsersAndTeams });
 */
export function mountStorage<S extends Storage>(base: S, areas: HostAreas): Storage {
  const mounted: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(base)) mounted[name] = typeof value === "function" ? value.bind(base) : value;
  for (const area of Object.keys(areas) as StorageArea[]) {
    const supplied = areas[area] as Record<string, unknown> | undefined;
    if (!supplied) continue;
    const methods = AREA_METHODS[area];
    if (!methods) throw new TypeError(`mountStorage: unknown storage area '${area}'`);
    const missing = methods.reads.filter((name: string) => typeof supplied[name] !== "function");
    if (missing.length > 0) throw new TypeError(`mountStorage: the ${area} area lacks ${missing.join(", ")}`);
    for (const name of [...methods.reads, ...methods.writes]) {
      const method = supplied[name];
      mounted[name] = typeof method === "function" ? (method as (...args: unknown[]) => unknown).bind(supplied) : readOnlyWrite(area);
    }
  }
  // The one-call key lookup joins identity and credentials: only when both are the base store's.
  if (areas.identity || areas.credentials) delete mounted.findApiKeyWithTeam;
  return mounted as unknown as Storage;
}

const READ_ONLY = Symbol("dataport.readOnlyArea");

/** The stand-in for a write a host's area lacks: it answers 405, and says so to `assertWritable` before anything is validated. */
function readOnlyWrite(area: StorageArea): () => Promise<never> {
  const write = () => Promise.reject(readOnlyArea(area));
  return Object.assign(write, { [READ_ONLY]: area });
}

/** Throws the 405 of a read-only area when `method` of this store is one of its stand-ins; admin operations call it first. */
export function assertWritable(storage: Storage, method: keyof Storage): void {
  const area = (storage[method] as { [READ_ONLY]?: StorageArea } | undefined)?.[READ_ONLY];
  if (area !== undefined) throw readOnlyArea(area);
}
