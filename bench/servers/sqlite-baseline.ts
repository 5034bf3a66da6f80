/**
 * The SQLite baseline: bare node:http + better-sqlite3, one INSERT committed
 * per request (same pragmas as the Dataport SQLite store: WAL,
 * synchronous=NORMAL), answering 200 only after the commit.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";

const dir = mkdtempSync(join(tmpdir(), "dataport-bench-sqlite-baseline-"));
const db = new Database(join(dir, "baseline.sqlite"));
db.pragma("journal_mode = WAL");
db.pragma("synchronous = NORMAL");
db.pragma("busy_timeout = 5000");
db.exec("CREATE TABLE rows (id INTEGER PRIMARY KEY, received_at TEXT NOT NULL, data TEXT NOT NULL)");
const insert = db.prepare<[string, string]>("INSERT INTO rows (received_at, data) VALUES (?, ?)");

createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on("data", (c: Buffer) => chunks.push(c));
  req.on("end", () => {
    const value = JSON.parse(Buffer.concat(chunks).toString("utf8")) as unknown;
    const { lastInsertRowid } = insert.run(new Date().toISOString(), JSON.stringify(value));
    const body = JSON.stringify({ ok: true, id: String(lastInsertRowid), duplicate: false });
    res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(body) });
    res.end(body);
  });
}).listen(Number(process.env.PORT), "127.0.0.1", () => console.log("ready"));

const stop = () => {
  db.close();
  rmSync(dir, { recursive: true, force: true });
  process.exit(0);
};
process.on("SIGTERM", stop);
process.on("SIGINT", stop);
