/**
 * A diagnosis server for rows-sqlite (not a scenario of its own): the bare
 * rows baseline plus the records a Dataport read keeps, written as the
 * SQLite store writes them — an audit event (the store's audit_events table
 * and indexes) and the usage counters (one UPSERT each for the turn), in one
 * IMMEDIATE transaction per turn of the event loop, each answer sent after
 * that commit. What reads cost at the least when they are recorded:
 *
 *   BENCH_DATAPORT=sqlite-read-recorded npm run bench -- rows-sqlite
 */
import { createHash, randomUUID } from "node:crypto";
import { createServer, type ServerResponse } from "node:http";
import { tempSqlite } from "./temp-sqlite.js";

const body = process.env.BODY ?? "{}";
const db = tempSqlite("sqlite-read-recorded");
db.exec(`
  CREATE TABLE api_keys (token_hash TEXT PRIMARY KEY, id TEXT NOT NULL, name TEXT NOT NULL, team_id TEXT NOT NULL);
  CREATE TABLE rows (dataset_id TEXT NOT NULL, pos INTEGER NOT NULL, data TEXT NOT NULL, PRIMARY KEY (dataset_id, pos));
  CREATE TABLE audit_events (
    position INTEGER PRIMARY KEY AUTOINCREMENT, team_id TEXT NOT NULL, category TEXT NOT NULL, time_ms INTEGER NOT NULL,
    stored_at INTEGER NOT NULL, target_id TEXT, event TEXT NOT NULL, event_id TEXT
  );
  CREATE INDEX audit_events_by_stored_at ON audit_events (stored_at, position);
  CREATE UNIQUE INDEX audit_events_by_event_id ON audit_events (event_id);
  CREATE TABLE api_usage (key TEXT PRIMARY KEY, day TEXT NOT NULL, team_id TEXT, calls INTEGER NOT NULL);
  CREATE TABLE dataset_reads (dataset_id TEXT PRIMARY KEY, reads INTEGER NOT NULL) WITHOUT ROWID;
`);
const sha256 = (text: string) => createHash("sha256").update(text).digest("hex");
db.prepare("INSERT INTO api_keys VALUES (?, 'key_demo', 'Demo', 'team_demo')").run(sha256(process.env.TOKEN ?? ""));
const parsed = JSON.parse(body) as { data: unknown[]; metadata: unknown };
const insertRow = db.prepare<[number, string]>("INSERT INTO rows VALUES ('ds_orders', ?, ?)");
parsed.data.forEach((row, i) => insertRow.run(i, JSON.stringify(row)));

const key = db.prepare<[string], { id: string }>("SELECT id, name, team_id FROM api_keys WHERE token_hash = ?");
const page = db
  .prepare<[], string>("SELECT data FROM rows WHERE dataset_id = 'ds_orders' ORDER BY pos LIMIT 100")
  .pluck();
const suffix = `],"metadata":${JSON.stringify(parsed.metadata)}}`;
const audit = db.prepare(
  "INSERT INTO audit_events (event_id, team_id, category, time_ms, stored_at, target_id, event) VALUES (?, ?, ?, ?, ?, ?, ?)",
);
const usage = db.prepare(
  "INSERT INTO api_usage (key, day, team_id, calls) VALUES (?, ?, ?, ?) ON CONFLICT (key) DO UPDATE SET calls = calls + excluded.calls",
);
const reads = db.prepare(
  "INSERT INTO dataset_reads VALUES (?, ?) ON CONFLICT (dataset_id) DO UPDATE SET reads = reads + excluded.reads",
);

interface Answer {
  res: ServerResponse;
  text: string;
}
let turn: Answer[] = [];
const commitTurn = db.transaction((answers: Answer[]) => {
  for (const _ of answers) {
    const now = Date.now();
    const id = `evt_${randomUUID()}`;
    const event = {
      id,
      time: new Date(now).toISOString(),
      teamId: "team_demo",
      category: "data_access",
      action: "dataset.rows.read",
      target: { type: "dataset", id: "ds_orders" },
      outcome: "success",
      details: { offset: 0, returnedRows: 100 },
    };
    audit.run(id, "team_demo", "data_access", now, now, "ds_orders", JSON.stringify(event));
  }
  usage.run(
    JSON.stringify(["2026-11-24", "team_demo", "GET", "/api/v1/datasets/{id}/rows"]),
    "2026-11-24",
    "team_demo",
    answers.length,
  );
  reads.run("ds_orders", answers.length);
}).immediate;
const flush = () => {
  const answers = turn;
  turn = [];
  commitTurn(answers);
  for (const { res, text } of answers) {
    res.writeHead(200, {
      "content-type": "application/json; charset=utf-8",
      "content-length": Buffer.byteLength(text),
    });
    res.end(text);
  }
};

createServer((req, res) => {
  const found = key.get(sha256((req.headers.authorization ?? "").slice(7)));
  const text = found ? `{"success":true,"data":[${page.all().join(",")}${suffix}` : "{}";
  if (turn.length === 0) setImmediate(flush);
  turn.push({ res, text });
}).listen(Number(process.env.PORT), "127.0.0.1", () => console.log("ready"));
