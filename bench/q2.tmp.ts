import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
const dir = mkdtempSync(join(tmpdir(), "q2-"));
const db = new Database(join(dir, "b.sqlite"));
db.pragma("journal_mode = WAL"); db.pragma("synchronous = NORMAL");
db.exec("CREATE TABLE rows (id INTEGER PRIMARY KEY, received_at TEXT NOT NULL, data TEXT NOT NULL)");
const insert = db.prepare<[string, string]>("INSERT INTO rows (received_at, data) VALUES (?, ?)");
const payload = Buffer.from(JSON.stringify({ event: "order.created", order: { id: "NW-9999", region: "EMEA", items: [{ sku: "LATTE", qty: 2 }], customer: { name: "Ada", tier: "gold" } }, note: "x".repeat(820) }));
function once() { const v = JSON.parse(payload.toString("utf8")); const { lastInsertRowid } = insert.run(new Date().toISOString(), JSON.stringify(v)); return JSON.stringify({ ok: true, id: String(lastInsertRowid), duplicate: false }); }
for (let i = 0; i < 20000; i++) once();
let best = Infinity;
for (let r = 0; r < 5; r++) { const b = process.cpuUsage(); for (let i = 0; i < 30000; i++) once(); const u = process.cpuUsage(b); best = Math.min(best, (u.user + u.system) / 30000); }
console.log("baseline in-process", best.toFixed(2), "us");
