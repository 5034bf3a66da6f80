/**
 * The SQLite read baselines: bare node:http + better-sqlite3 (a temp file,
 * the store's pragmas), answering the bytes Dataport answers (BODY, captured
 * by the scenario's prepare):
 *   - BENCH_BASELINE=me:   SHA-256 of the bearer token, one prepared SELECT of the key by its hash;
 *   - BENCH_BASELINE=rows: one prepared SELECT of the page's 100 stored JSON texts, joined into the envelope.
 */
import { createHash } from "node:crypto";
import { createServer } from "node:http";
import { tempSqlite } from "./temp-sqlite.js";

const mode = process.env.BENCH_BASELINE === "rows" ? "rows" : "me";
const body = process.env.BODY ?? "{}";
const db = tempSqlite("sqlite-read-baseline");
db.exec(
  "CREATE TABLE api_keys (token_hash TEXT PRIMARY KEY, id TEXT NOT NULL, name TEXT NOT NULL, team_id TEXT NOT NULL)",
);
db.exec(
  "CREATE TABLE rows (dataset_id TEXT NOT NULL, pos INTEGER NOT NULL, data TEXT NOT NULL, PRIMARY KEY (dataset_id, pos))",
);
const sha256 = (text: string) => createHash("sha256").update(text).digest("hex");
db.prepare("INSERT INTO api_keys VALUES (?, 'key_demo', 'Demo', 'team_demo')").run(sha256(process.env.TOKEN ?? ""));

let handle: (authorization: string | undefined) => string;
if (mode === "me") {
  const key = db.prepare<[string], { id: string }>("SELECT id, name, team_id FROM api_keys WHERE token_hash = ?");
  handle = (authorization) => {
    const found = key.get(sha256((authorization ?? "").slice(7)));
    return found ? body : "{}";
  };
} else {
  // The page's rows as the store keeps them (JSON text), and the envelope around them.
  const parsed = JSON.parse(body) as { data: unknown[]; metadata: unknown };
  const insert = db.prepare<[number, string]>("INSERT INTO rows VALUES ('ds_orders', ?, ?)");
  parsed.data.forEach((row, i) => insert.run(i, JSON.stringify(row)));
  const page = db
    .prepare<[], string>("SELECT data FROM rows WHERE dataset_id = 'ds_orders' ORDER BY pos LIMIT 100")
    .pluck();
  const suffix = `],"metadata":${JSON.stringify(parsed.metadata)}}`;
  handle = () => `{"success":true,"data":[${page.all().join(",")}${suffix}`;
}

createServer((req, res) => {
  const text = handle(req.headers.authorization);
  res.writeHead(200, { "content-type": "application/json; charset=utf-8", "content-length": Buffer.byteLength(text) });
  res.end(text);
}).listen(Number(process.env.PORT), "127.0.0.1", () => console.log("ready"));
