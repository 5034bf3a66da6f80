/**
 * Dataport through the Node adapter on the PostgreSQL store with the demo
 * fixture, in the schema BENCH_PG_SCHEMA of BENCH_PG_URL (run.ts gives every
 * measurement its own, shared by the instances of a two-instance run: the
 * first seeds, the others keep what it loaded).
 */
import { existsSync, readFileSync } from "node:fs";
import { createServer } from "node:http";
import { built, type Dataport, type NodeAdapter, type PostgresEntry } from "./built.js";

const { createDataApi, parseFixture } = await built<Dataport>("index.js");
const { toNodeHandler } = await built<NodeAdapter>("adapters/node.js");
const { createPostgresStorage } = await built<PostgresEntry>("postgres/index.js");

const storage = await createPostgresStorage({
  connectionString: process.env.BENCH_PG_URL,
  schema: process.env.BENCH_PG_SCHEMA,
});
// Another build (BENCH_AB) loads the demo fixture of its own checkout, in the format it reads.
const other = process.env.BENCH_DIST ? `${process.env.BENCH_DIST}/../examples/demo/space.json` : null;
const fixture = other && existsSync(other) ? other : new URL("../../examples/demo/space.json", import.meta.url);
await storage.seed(parseFixture(JSON.parse(readFileSync(fixture, "utf8"))));
const api = createDataApi({ storage, webhookRatePerSecond: 1e9 });
const server = createServer(toNodeHandler(api)).listen(Number(process.env.PORT), "127.0.0.1", () =>
  console.log("ready"),
);

const stop = () => {
  server.close();
  server.closeAllConnections();
  // Requests already dispatched finish their storage calls before the pool goes (else they log its end).
  setTimeout(() => void storage.close().finally(() => process.exit(0)), 200);
};
process.on("SIGTERM", stop);
process.on("SIGINT", stop);
