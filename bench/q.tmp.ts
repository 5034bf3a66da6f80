import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { parseFixture } from "../src/fixture/load.js";
import { createSqliteStorage } from "../src/sqlite/index.js";
const dir = mkdtempSync(join(tmpdir(), "q-"));
const path = join(dir, "x.sqlite");
const storage = createSqliteStorage({ path });
await storage.seed(parseFixture(JSON.parse(readFileSync("examples/demo/space.json", "utf8"))));
const db = new Database(path);
function t(name: string, f: () => unknown, n = 100000) {
  for (let i = 0; i < 10000; i++) f();
  let best = Infinity;
  for (let r = 0; r < 5; r++) { const b = process.cpuUsage(); for (let i = 0; i < n; i++) f(); const u = process.cpuUsage(b); best = Math.min(best, (u.user + u.system) / n); }
  console.log(name.padEnd(30), best.toFixed(3), "us");
}
const q = db.prepare(`SELECT c.id AS connection_id, c.team_id, c.name, c.config,
              (SELECT d.id FROM datasets d WHERE d.connection_id = c.id ORDER BY d.seq LIMIT 1) AS dataset_id
       FROM connections c WHERE c.endpoint_id = ? AND c.type = 'webhook'`);
const q2 = db.prepare(`SELECT c.id AS connection_id, c.team_id, c.name, c.config FROM connections c WHERE c.endpoint_id = ? AND c.type = 'webhook'`);
const dv = db.prepare("PRAGMA data_version").pluck();
console.log(q.get("wh_demo_shop_events"));
t("endpoint query", () => q.get("wh_demo_shop_events"));
t("endpoint query no subq", () => q2.get("wh_demo_shop_events"));
t("data_version", () => dv.get());
t("getWebhookEndpoint", () => storage.getWebhookEndpoint("wh_demo_shop_events"));
const sel1 = db.prepare("SELECT 1").pluck();
t("select 1", () => sel1.get());
