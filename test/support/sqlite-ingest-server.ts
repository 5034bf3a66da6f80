/**
 * A minimal server for the durability test that drives the SQLite store's
 * `ingestWebhookRow` directly (no receiver, no API): POST / stores the JSON
 * body as one row and answers 200 only after the promise resolves (the row
 * is committed); an `x-dedup` header is its de-duplication key; GET /
 * returns every stored row. Prints `listening on URL` (port 0: one the
 * kernel picks, as the test files do, several of which may run at once).
 *   node --import tsx test/support/sqlite-ingest-server.ts <db> <port>
 */
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { inferColumns } from "../../src/domain/columns.js";
import { parseFixture } from "../../src/fixture/load.js";
import { createSqliteStorage } from "../../src/sqlite/index.js";
import { conformanceFixture } from "../../src/testing/conformance/fixture.js";

const [db, port] = process.argv.slice(2);
const storage = createSqliteStorage({ path: db! });
const fixture = conformanceFixture() as ReturnType<typeof conformanceFixture> & { connections: unknown[] };
fixture.connections.push({
  id: "conn_hook",
  teamId: "team_ops",
  name: "Hook",
  type: "webhook",
  config: { endpointId: "ep", signingSecret: null, retainRows: 1_000_000 },
  createdAt: "2026-09-01T00:00:00Z",
});
await storage.seed(parseFixture(fixture));
let ids = 0;
const prefix = `row_${process.pid}_${Date.now()}`;

const server = createServer((req, res) => {
  if (req.method === "GET") {
    void (async () => {
      const page = await storage.rows.readDatasetRows("ds_conn_hook", {
        offset: 0,
        limit: null,
        columns: null,
        filters: null,
      });
      const rows: unknown[] = [];
      for await (const row of page.rows) rows.push(row);
      res.end(JSON.stringify({ data: rows }));
    })();
    return;
  }
  const chunks: Buffer[] = [];
  req.on("data", (c: Buffer) => chunks.push(c));
  req.on("end", () => {
    const row = { _id: `${prefix}_${++ids}`, ...(JSON.parse(Buffer.concat(chunks).toString("utf8")) as object) };
    const dedup = req.headers["x-dedup"];
    Promise.resolve(
      storage.webhooks.ingestWebhookRow({
        datasetId: "ds_conn_hook",
        dedupKey: typeof dedup === "string" ? dedup : null,
        row,
        columns: inferColumns([row]),
        retainRows: 1_000_000,
        receivedAt: new Date().toISOString(),
      }),
    ).then(
      (result) => res.end(JSON.stringify({ ok: true, ...result })),
      () => {
        res.statusCode = 500;
        res.end();
      },
    );
  });
});
server.listen(Number(port), "127.0.0.1", () =>
  console.log(`listening on http://127.0.0.1:${(server.address() as AddressInfo).port}`),
);
