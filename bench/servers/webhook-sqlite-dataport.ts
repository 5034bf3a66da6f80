/** Dataport through the Node adapter on the SQLite store (a fresh temp file) with the demo fixture. */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { built, type Dataport, type NodeAdapter, type SqliteEntry } from "./built.js";

const { createDataApi, parseFixture } = await built<Dataport>("index.js");
const { toNodeHandler } = await built<NodeAdapter>("adapters/node.js");
const { createSqliteStorage } = await built<SqliteEntry>("sqlite/index.js");

const dir = mkdtempSync(join(tmpdir(), "dataport-bench-sqlite-"));
// BENCH_PAGE_MEMORY=0: no remembered pages, so every rows read reads its page from the file.
const pageMemory = process.env.BENCH_PAGE_MEMORY;
const storage = createSqliteStorage({
  path: join(dir, "dataport.sqlite"),
  ...(pageMemory !== undefined && { pageMemoryBytes: Number(pageMemory) }),
});
await storage.seed(
  parseFixture(JSON.parse(readFileSync(new URL("../../examples/demo/space.json", import.meta.url), "utf8"))),
);
const api = createDataApi({ storage, webhookRatePerSecond: 1e9 });
createServer(toNodeHandler(api)).listen(Number(process.env.PORT), "127.0.0.1", () => console.log("ready"));

const stop = () => {
  void storage.close().finally(() => {
    rmSync(dir, { recursive: true, force: true });
    process.exit(0);
  });
};
process.on("SIGTERM", stop);
process.on("SIGINT", stop);
