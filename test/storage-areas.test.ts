import { describe, expect, it } from "vitest";
import { createMemoryStorage } from "../src/memory/index.js";
import type { IdentityStore, RowQuery } from "../src/ports/storage.js";
import { decodeChangeCursor } from "../src/domain/changes.js";
import { hasKeyWithTeamLookup } from "../src/storage/areas.js";
import { assertWritable, mountStorage } from "../src/storage/mount.js";
import { wrapStoreCalls } from "../src/sql/store-calls.js";
import { parseFixture } from "../src/fixture/load.js";
import { ADMIN_TOKEN, httpAdmin } from "./support/admin.js";
import { setup } from "./support/api.js";
import { writeRows } from "./support/datasets.js";
import { testFixture, TOKENS } from "./support/fixture.js";

const bounded = { timeoutMs: 5_000, metrics: null };
const team = { id: "team_ops", name: "Ops", plan: "pro", businessId: null, isPersonal: false } as const;

/** The reads of another memory store's identity area, and no writes. */
function readOnlyIdentity(): IdentityStore {
  const { identity } = createMemoryStorage();
  return {
    getBusiness: (id) => identity.getBusiness(id),
    getTeam: (id) => identity.getTeam(id),
    listBusinessTeams: (id) => identity.listBusinessTeams(id),
    getUser: (id) => identity.getUser(id),
    listMemberships: (id) => identity.listMemberships(id),
    listBusinesses: (page) => identity.listBusinesses(page),
    listTeams: (page) => identity.listTeams(page),
    listUsers: (page) => identity.listUsers(page),
  };
}

describe("storage areas", () => {
  it("uses the one-call key lookup only while the identity area is the one it reads, through wrapping too", () => {
    const base = createMemoryStorage();
    const other = createMemoryStorage();
    expect(hasKeyWithTeamLookup(base)).toBe(true);
    expect(hasKeyWithTeamLookup(wrapStoreCalls(base, bounded))).toBe(true);
    expect(hasKeyWithTeamLookup(mountStorage(base, { identity: other.identity }))).toBe(false);
    expect(hasKeyWithTeamLookup(mountStorage(base, { credentials: other.credentials }))).toBe(false);
    expect(hasKeyWithTeamLookup(wrapStoreCalls(mountStorage(base, { identity: other.identity }), bounded))).toBe(false);
    expect(hasKeyWithTeamLookup({ ...base, identity: other.identity })).toBe(false); // plain spread: nothing to delete
  });

  it("answers 405 naming the area for a write a mounted area lacks, before and after the timing wrapper", async () => {
    const mounted = mountStorage(createMemoryStorage(), { identity: readOnlyIdentity() });
    await expect(mounted.identity.putTeam(team)).rejects.toMatchObject({
      status: 405,
      code: "method_not_allowed",
      message: expect.stringContaining("identity area is read-only"),
    });
    expect(() => assertWritable(mounted.identity, "deleteUser")).toThrow(/identity area is read-only/);
    const timed = wrapStoreCalls(mounted, bounded);
    expect(() => assertWritable(timed.identity, "putTeam")).toThrow(/identity area is read-only/);
    await expect(timed.identity.putTeam(team)).rejects.toMatchObject({ status: 405 });
    // Reads are the host's; the other areas and the lifecycle stay the base store's.
    expect(await timed.identity.getTeam("team_ops")).toBeNull();
    expect(() => assertWritable(timed.catalog, "putDataset")).not.toThrow();
    await expect(timed.ping()).resolves.toBeUndefined();
    // An area is not a promise: awaiting it hands back the area.
    expect(await Promise.resolve(mounted.identity)).toBe(mounted.identity);
  });

  it("mounts a host's dataset rows as the rows area: its reads serve the API, a bulk write it lacks answers 405 over HTTP", async () => {
    const host = createMemoryStorage();
    await host.seed(parseFixture(testFixture()));
    // The host's rows of ds_orders: one row, read through its own store.
    await writeRows(
      host,
      "ds_orders",
      "replace",
      [{ order_id: "H-1", amount: 1 }],
      [
        { name: "order_id", type: "string" },
        { name: "amount", type: "number" },
      ],
    );
    const rows = {
      // A host's store that knows nothing of `changesHead`: mountStorage reads the head before its page.
      readDatasetRows: (id: string, query: RowQuery) => host.rows.readDatasetRows(id, { ...query, changesHead: false }),
      aggregateDatasetRows: host.rows.aggregateDatasetRows,
      replaceDatasetRows: host.rows.replaceDatasetRows,
      // Its rows' change feeds: written with its rows, so served by it too.
      readDatasetChanges: host.rows.readDatasetChanges,
      datasetChangesHead: host.rows.datasetChangesHead,
      trimDatasetChanges: host.rows.trimDatasetChanges,
    };
    const { api, call } = await setup({
      storage: mountStorage(createMemoryStorage(), { rows }),
      adminToken: ADMIN_TOKEN,
    });
    const read = await call("GET", "/api/v1/datasets/ds_orders/rows", { token: TOKENS.sync });
    expect(read.json.data).toEqual([{ order_id: "H-1", amount: 1 }]);
    const head = await host.rows.datasetChangesHead("ds_orders");
    expect(Number(head)).toBeGreaterThan(0);
    expect(decodeChangeCursor(read.json.metadata.changesCursor)).toEqual({ feedId: "ds_orders", position: head });
    const upload = await httpAdmin(api)("POST", "/datasets/ds_orders/rows", [{ order_id: "X" }]);
    expect([upload.status, upload.json.error.code, upload.json.error.message]).toEqual([
      405,
      "method_not_allowed",
      expect.stringContaining("rows area is read-only"),
    ]);
  });

  it("keeps a supplied area's own writes, and refuses an area that does not exist", async () => {
    const host = createMemoryStorage();
    const mounted = mountStorage(createMemoryStorage(), { identity: host.identity });
    expect(await mounted.identity.putTeam(team)).toBe("created");
    expect(await host.identity.getTeam("team_ops")).toEqual(team);
    expect(() => mountStorage(createMemoryStorage(), { analytics: {} } as never)).toThrow(
      /unknown storage area 'analytics'/,
    );
  });
});
