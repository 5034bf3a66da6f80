/** Dataport through the Node adapter on the SQLite store (a fresh temp file) with the demo fixture. */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { toNodeHandler } from "../../adapters/node.js";
import { createDataApi } from "../../src/api.js";
import { parseFixture } from "../../src/fixture/load.js";
import { createSqliteStorage } from "../../src/sqlite/index.js";

const dir = mkdtempSync(join(tmpdir(), "dataport-bench-sqlite-"));
const storage = createSqliteStorage({ path: join(dir, "dataport.sqlite") });
await storage.seed(parseFixture(JSON.parse(readFileSync(new URL("../../examples/demo/space.json", import.meta.url), "utf8"))));
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
