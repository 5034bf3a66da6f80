import { describe, expect, it } from "vitest";
import type { AuditEvent, Row } from "../../domain/model.js";
import type { Storage } from "../../ports/storage.js";
import { event } from "./audit.js";
import { type ConformanceOptions, seededStore, type StorageFactory } from "./harness.js";

const NOW = Date.parse("2026-11-01T12:00:00.000Z");
const KEY = { type: "api-key", id: "key_sync", name: "Warehouse sync" } as const;

/** A call of the store, named for the failure message. */
type Call = readonly [name: string, call: (store: Storage) => Promise<unknown>];

/** Reads of every area that must ask the backend (the store is fresh: nothing of it is remembered yet). */
const READS: readonly Call[] = [
  ["identity.getTeam", (s) => s.identity.getTeam("team_ops")],
  ["identity.listUsers", (s) => s.identity.listUsers({ after: null, limit: 10 })],
  ["credentials.getApiKey", (s) => s.credentials.getApiKey("key_sync")],
  ["catalog.getDataset", (s) => s.catalog.getDataset("ds_orders")],
  ["catalog.listConnections", (s) => s.catalog.listConnections("team_ops")],
  ["rows.readDatasetRows", (s) => readAll(s, "ds_orders")],
  ["tables.getTable", (s) => s.tables.getTable("tbl_targets")],
  ["tables.getTableRow", (s) => s.tables.getTableRow("tbl_targets", "row_1")],
  ["webhooks.getWebhookEndpoint", (s) => s.webhooks.getWebhookEndpoint("wh_conformance_unknown")],
  [
    "webhooks.listWebhookDeliveries",
    (s) =>
      s.webhooks.listWebhookDeliveries("conn_retail", { limit: 10, order: "newest", keep: { size: 10, afterMs: 0 } }),
  ],
  [
    "webhooks.getWebhookDelivery",
    (s) => s.webhooks.getWebhookDelivery("conn_retail", "whd_none", { size: 10, afterMs: 0 }),
  ],
  [
    "webhooks.webhookDeliveryCounts",
    (s) => s.webhooks.webhookDeliveryCounts({ teamId: "team_ops", fromDay: "2026-10-31", toDay: "2026-11-01" }),
  ],
  ["audit.readAuditEvents", (s) => s.audit.readAuditEvents(auditQuery)],
  ["dashboards.listDashboards", (s) => s.dashboards.listDashboards(["team_ops"])],
  [
    "usage.spaceCreditUsage",
    (s) => s.usage.spaceCreditUsage({ teamId: "team_ops", fromDay: "2026-10-31", toDay: "2026-11-01" }),
  ],
];

/** Writes of every area, the core's own among them (a table row, a webhook delivery, an audit event). */
const WRITES: readonly Call[] = [
  [
    "identity.putTeam",
    (s) => s.identity.putTeam({ id: "team_new", name: "New", plan: "pro", businessId: null, isPersonal: false }),
  ],
  ["credentials.revokeApiKey", (s) => s.credentials.revokeApiKey("key_sync", new Date(NOW).toISOString())],
  ["catalog.deleteDataset", (s) => s.catalog.deleteDataset("ds_orders")],
  [
    "tables.insertTableRow",
    (s) =>
      s.tables.insertTableRow({
        tableId: "tbl_targets",
        rowId: "row_new",
        values: { region: "APAC" },
        actor: KEY,
        now: NOW,
        auditEvent: rowEvent,
      }),
  ],
  [
    "webhooks.ingestWebhookRow",
    (s) =>
      s.webhooks.ingestWebhookRow({
        datasetId: "ds_orders",
        dedupKey: "fault:1",
        row: { _id: "wh_fault_1", n: 1 } as Row,
        columns: [
          { name: "_id", type: "string" },
          { name: "n", type: "number" },
        ],
        retainRows: 100,
        receivedAt: new Date(NOW).toISOString(),
      }),
  ],
  [
    "webhooks.recordWebhookDeliveries",
    (s) =>
      s.webhooks.recordWebhookDeliveries({
        refusals: [],
        counts: [{ connectionId: "conn_retail", day: "2026-11-01", kind: "refused:invalid_body", n: 1 }],
        keep: { size: 10, afterMs: 0 },
      }),
  ],
  [
    "audit.appendAuditEvent",
    (s) => s.audit.appendAuditEvent(event("evt_fault", "team_ops", "audit", "2026-11-01T11:00:00Z"), NOW),
  ],
  ["dashboards.deleteDashboard", (s) => s.dashboards.deleteDashboard("dash_none")],
  [
    "usage.appendCreditUsage",
    (s) =>
      s.usage.appendCreditUsage([
        { teamId: "team_ops", at: "2026-11-01T10:00:00Z", category: "query", credits: 1, userId: null },
      ]),
  ],
];

const auditQuery = {
  teamIds: ["team_ops"],
  categories: ["audit" as const],
  after: null,
  since: null,
  storedBefore: NOW,
  limit: 10,
};

const rowEvent: AuditEvent = {
  ...event("evt_fault_row", "team_ops", "audit", "2026-11-01T11:00:00Z"),
  action: "table.row.created",
  target: { type: "table_row", id: "row_new" },
};

/**
 * The fault clause of the storage port (`Storage`, "Faults"): a store cut off
 * its backend (`ConformanceOptions.makeUnavailable`) answers every area's
 * reads and writes with 503 `storage_unavailable` and `Retry-After`, neither
 * a driver's error nor a wait without end. Skipped for a store that cannot
 * fail (no `makeUnavailable`: memory).
 */
export function describeFaultConformance(
  name: string,
  factory: StorageFactory,
  options: ConformanceOptions = {},
): void {
  const { makeUnavailable } = options;
  const skip =
    options.skip ?? (makeUnavailable === undefined ? "the store cannot fail (no makeUnavailable)" : undefined);
  describe.skipIf(skip !== undefined)(`${name}: faults`, () => {
    const seeded = seededStore(factory, options);
    const cutOff = async () => {
      const store = await seeded();
      await makeUnavailable!(store);
      return store;
    };

    it("answers every area's reads with 503 storage_unavailable and Retry-After once its backend is gone", async () => {
      expect(await failures(await cutOff(), READS)).toEqual(READS.map(([call]) => `${call}: 503`));
    }, 60_000);

    it("answers every area's writes with 503 storage_unavailable and Retry-After once its backend is gone", async () => {
      expect(await failures(await cutOff(), WRITES)).toEqual(WRITES.map(([call]) => `${call}: 503`));
    }, 60_000);
  });
}

/** Each call's outcome: `name: 503` when it rejected as the fault clause says, else what it did instead. */
async function failures(store: Storage, calls: readonly Call[]): Promise<string[]> {
  const out: string[] = [];
  for (const [name, call] of calls) {
    try {
      await call(store);
      out.push(`${name}: answered`);
    } catch (error) {
      out.push(`${name}: ${describeFailure(error)}`);
    }
  }
  return out;
}

function describeFailure(error: unknown): string {
  const { status, code, headers } = error as { status?: unknown; code?: unknown; headers?: Record<string, string> };
  if (status === 503 && code === "storage_unavailable") {
    const retryAfter = headers?.["retry-after"];
    return retryAfter !== undefined && /^[1-9][0-9]*$/.test(retryAfter)
      ? "503"
      : `503 without a Retry-After of whole seconds (${retryAfter})`;
  }
  return `${String(status ?? "no status")} ${String(code ?? (error as Error)?.name)}: ${String((error as Error)?.message)}`;
}

/**
 * A read of a dataset's rows to the end: a store may meet the fault when the call is made or while its rows are read.
 */
async function readAll(store: Storage, datasetId: string): Promise<number> {
  const page = await store.rows.readDatasetRows(datasetId, { offset: 0, limit: null, columns: null, filters: null });
  let n = 0;
  for await (const _ of page.rows) n++;
  return n;
}
