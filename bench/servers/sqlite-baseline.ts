/**
 * The SQLite baseline: bare node:http + better-sqlite3, one INSERT committed
 * per request (same pragmas as the Dataport SQLite store: WAL,
 * synchronous=NORMAL), answering 200 only after the commit.
 */
import { createServer } from "node:http";
import { tempSqlite } from "./temp-sqlite.js";

const db = tempSqlite("sqlite-baseline");
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
