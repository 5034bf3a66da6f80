/**
 * The PostgreSQL baselines: bare node:http + a pg pool of 10 (Dataport's
 * default) on the database and schema Dataport uses in the same run.
 *
 * - BENCH_BASELINE=insert: reads the body, JSON.parses it, one autocommit
 *   INSERT of the payload (json) per request, answering 200 with the new id
 *   only after the commit;
 * - BENCH_BASELINE=select: one SELECT per request (the bearer token's
 *   SHA-256 looked up in a one-row table), answering the bytes in BODY.
 */
import { createHash } from "node:crypto";
import { createServer } from "node:http";
import pg from "pg";

const schema = `"${(process.env.BENCH_PG_SCHEMA ?? "bench_baseline").replaceAll('"', '""')}"`;
const pool = new pg.Pool({ connectionString: process.env.BENCH_PG_URL, max: 10 });
pool.on("error", () => {});
await pool.query(`create schema if not exists ${schema}`);
await pool.query(
  `create table if not exists ${schema}.baseline_rows (id bigserial primary key, received_at text not null, data json not null)`,
);
await pool.query(
  `create table if not exists ${schema}.baseline_keys (token_hash text primary key, name text not null)`,
);
const token = "dp_demo_full_access_0000000000001";
await pool.query(`insert into ${schema}.baseline_keys values ($1, 'demo') on conflict do nothing`, [
  createHash("sha256").update(token).digest("hex"),
]);

const insert = {
  name: "baseline-insert",
  text: `insert into ${schema}.baseline_rows (received_at, data) values ($1, $2) returning id`,
};
const select = { name: "baseline-select", text: `select name from ${schema}.baseline_keys where token_hash = $1` };
const reply = Buffer.from(process.env.BODY ?? "{}");

const server = createServer((req, res) => {
  if (process.env.BENCH_BASELINE === "select") {
    const bearer = (req.headers.authorization ?? "").slice(7);
    pool.query(select, [createHash("sha256").update(bearer).digest("hex")]).then(
      (result) => {
        if (result.rowCount !== 1) {
          res.writeHead(401).end();
          return;
        }
        res.writeHead(200, { "content-type": "application/json; charset=utf-8", "content-length": reply.length });
        res.end(reply);
      },
      () => res.writeHead(500).end(),
    );
    return;
  }
  const chunks: Buffer[] = [];
  req.on("data", (c: Buffer) => chunks.push(c));
  req.on("end", () => {
    const value = JSON.parse(Buffer.concat(chunks).toString("utf8")) as unknown;
    pool.query<{ id: string }>(insert, [new Date().toISOString(), JSON.stringify(value)]).then(
      (result) => {
        const body = JSON.stringify({ ok: true, id: result.rows[0]!.id, duplicate: false });
        res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(body) });
        res.end(body);
      },
      () => res.writeHead(500).end(),
    );
  });
}).listen(Number(process.env.PORT), "127.0.0.1", () => console.log("ready"));

const stop = () => {
  server.close();
  server.closeAllConnections();
  setTimeout(() => void pool.end().finally(() => process.exit(0)), 200);
};
process.on("SIGTERM", stop);
process.on("SIGINT", stop);
