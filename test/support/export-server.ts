/**
 * A server process for the export memory test: the Node adapter on a SQLite
 * file (argv[2]) holding the conformance fixture plus `ds_export`, ROWS rows
 * (argv[3]) written through the admin functions, as a host loads them.
 * Prints `listening on http://…` once the rows are in.
 */
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { toNodeHandler } from "../../adapters/node.js";
import { createAdmin } from "../../src/admin/index.js";
import { createDataApi } from "../../src/server/api.js";
import type { Row } from "../../src/domain/model.js";
import { parseFixture } from "../../src/fixture/load.js";
import { createSqliteStorage } from "../../src/sqlite/index.js";
import { testFixture } from "./fixture.js";

/** Row i of `ds_export`: about 300 bytes of CSV. */
export function exportRow(i: number): Row {
  return { id: i, lane: `L-${i % 100}`, weightKg: i / 10, note: `parcel ${i}, "fragile"; ${"x".repeat(240)}` };
}

export const EXPORT_COLUMNS = [
  { name: "id", type: "number" },
  { name: "lane", type: "string" },
  { name: "weightKg", type: "number" },
  { name: "note", type: "string" },
] as const;

async function* rows(count: number): AsyncGenerator<Row> {
  for (let i = 0; i < count; i++) yield exportRow(i);
}

if (process.argv[1]?.endsWith("export-server.ts")) {
  const storage = createSqliteStorage({ path: process.argv[2]! });
  await storage.seed(parseFixture(testFixture()));
  const api = createDataApi({ storage });
  const admin = createAdmin(api);
  await admin.putDataset("ds_export", {
    teamId: "team_ops",
    name: "Export",
    type: "upload",
    connectionId: null,
    source: null,
    columns: EXPORT_COLUMNS.map((c) => ({ ...c })),
  });
  await admin.writeDatasetRows("ds_export", "replace", rows(Number(process.argv[3])));
  const server = createServer(toNodeHandler(api)).listen(0, "127.0.0.1", () =>
    console.log(`listening on http://127.0.0.1:${(server.address() as AddressInfo).port}`),
  );
  process.on("SIGTERM", () => {
    server.closeAllConnections();
    void storage.close().finally(() => process.exit(0));
  });
}
