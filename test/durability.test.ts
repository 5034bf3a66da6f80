/**
 * Durability proof (issue 8 §5): kill -9 the example server on SQLite while a
 * client posts distinct webhook payloads as fast as it can; after a restart
 * on the same file every payload that got a 200 is stored exactly once.
 * A Jepsen-style set check: acknowledged, lost, unexpected (never sent),
 * duplicated, and indeterminate (sent, no answer — may or may not be stored).
 */
import type { ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import type { SqliteDriverName } from "../src/sqlite/driver.js";
import { chooseDriver, openDatabase } from "../src/sqlite/drivers.js";
import { startServerProcess, stopProcess } from "./support/server-process.js";

/**
 * The SQLite binding the servers run on: DATAPORT_SQLITE_DRIVER, which the
 * store reads, or the runtime's default (test/sqlite/drivers.test.ts runs
 * this file on Node 22 with node:sqlite and on Bun with bun:sqlite).
 */
const DRIVER = (process.env.DATAPORT_SQLITE_DRIVER as SqliteDriverName | undefined) ?? chooseDriver();

const TOKEN = "dp_demo_full_access_0000000000001";
const ENDPOINT = "wh_demo_shop_events";
const DATASET = "ds_shop_events";
const WORKERS = 24;
const root = new URL("..", import.meta.url).pathname;
const dir = mkdtempSync(join(tmpdir(), "dataport-durability-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

interface Server {
  child: ChildProcess;
  url: string;
}

/** The demo fixture with retention high enough that nothing acknowledged is trimmed during the run. */
function fixtureFile(): string {
  const fixture = JSON.parse(readFileSync(join(root, "examples/demo/space.json"), "utf8")) as {
    connections: { config: Record<string, unknown> }[];
  };
  for (const c of fixture.connections) if (c.config.endpointId === ENDPOINT) c.config.retainRows = 1_000_000;
  const path = join(dir, "fixture.json");
  writeFileSync(path, JSON.stringify(fixture));
  return path;
}

/** How to drive one kind of server through the kill -9 routine. */
interface Target {
  /** The dataset the deliveries land in. */
  datasetId: string;
  /** argv after `node --import tsx` for a server on `db`, on a port the kernel picks (other files run meanwhile). */
  command(db: string): string[];
  post(url: string, seq: number): Promise<Response>;
  /** Every stored `durability_seq`, read after the restart. */
  storedSeqs(url: string): Promise<number[]>;
}

const exampleServer: Target = {
  datasetId: DATASET,
  command: (db) => {
    const fixture = fixtureFile();
    return [
      join(root, "examples/server/main.ts"),
      "--db",
      db,
      "--fixture",
      fixture,
      "--port",
      "0",
      "--webhook-rate",
      "1000000",
    ];
  },
  post: (url, seq) =>
    fetch(`${url}/api/webhooks/${ENDPOINT}`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ durability_seq: seq, note: `payload ${seq}` }),
    }),
  storedSeqs: async (url) => {
    const res = await fetch(`${url}/api/v1/datasets/${DATASET}/rows?columns=durability_seq`, {
      headers: { authorization: `Bearer ${TOKEN}` },
    });
    expect(res.status).toBe(200);
    return seqsOf((await res.json()) as { data: Record<string, unknown>[] });
  },
};

/** The store alone behind bare node:http: proves the SQLite commit path whatever the receiver does. */
const bareStore: Target = {
  datasetId: "ds_conn_hook",
  command: (db) => [join(root, "test/support/sqlite-ingest-server.ts"), db, "0"],
  post: (url, seq) =>
    fetch(url, { method: "POST", body: JSON.stringify({ durability_seq: seq, note: `payload ${seq}` }) }),
  storedSeqs: async (url) => seqsOf((await (await fetch(url)).json()) as { data: Record<string, unknown>[] }),
};

function seqsOf(body: { data: Record<string, unknown>[] }): number[] {
  return body.data.map((r) => r.durability_seq).filter((s): s is number => typeof s === "number");
}

async function startServer(target: Target, db: string): Promise<Server> {
  return startServerProcess(target.command(db));
}

async function stop(server: Server, signal: NodeJS.Signals): Promise<void> {
  await stopProcess(server.child, signal);
}

interface Outcome {
  sent: number;
  acknowledged: number;
  lost: number[];
  unexpected: number[];
  duplicated: number[];
  indeterminate: number;
  indeterminateStored: number;
  refused: number[];
  /** Stored rows without their insert change, and insert changes without their row (both must be none). */
  rowsWithoutChange: number;
  changesWithoutRow: number;
}

/**
 * Post distinct payloads from many concurrent clients, kill -9 the server
 * once writes flow (after a random extra delay), restart it on the same
 * file and check the stored set against what was acknowledged.
 * Returns null when the target answers the probe with 404 (not built yet).
 */
async function killNine(target: Target, name: string): Promise<Outcome | null> {
  const db = join(dir, `${name}.sqlite`);
  let server = await startServer(target, db);
  try {
    const probe = await target.post(server.url, -1);
    await probe.arrayBuffer();
    if (probe.status === 404) return null;
    expect(probe.status).toBe(200);

    const acknowledged = new Set<number>([-1]);
    const indeterminate = new Set<number>();
    const refused: number[] = [];
    let next = 0;
    let killed = false;
    const worker = async () => {
      while (!killed) {
        const seq = next++;
        try {
          const res = await target.post(server.url, seq);
          await res.arrayBuffer();
          if (res.status === 200) acknowledged.add(seq);
          else refused.push(res.status);
        } catch {
          indeterminate.add(seq); // the connection died with the server: no answer
        }
      }
    };
    const workers = Array.from({ length: WORKERS }, worker);
    while (acknowledged.size < 1500) await new Promise((r) => setTimeout(r, 5));
    await new Promise((r) => setTimeout(r, 100 + Math.random() * 400));
    await stop(server, "SIGKILL");
    killed = true;
    await Promise.all(workers);

    server = await startServer(target, db);
    const counts = new Map<number, number>();
    for (const s of await target.storedSeqs(server.url)) counts.set(s, (counts.get(s) ?? 0) + 1);
    // A write and its change are one commit: after the kill, every stored row has its change and no change lacks its
    // row.
    const file = openDatabase(DRIVER, db, { readonly: true });
    const rowIds = new Set(
      (
        file
          .prepare(
            `SELECT json_extract(r.data, '$._id') AS id FROM dataset_rows r JOIN datasets d ON d.seq = r.dataset_seq
              WHERE d.id = ? AND r.position >= d.first_position AND r.position < d.next_position`,
          )
          .all(target.datasetId) as { id: string }[]
      ).map((r) => r.id),
    );
    // An insert change names one row (row_id), or a group commit's rows from row_ref on (row_span of them).
    const changed = (
      file
        .prepare(
          `SELECT row_id AS id FROM changes WHERE feed_id = ? AND op = 'insert' AND row_span IS NULL
           UNION ALL
           SELECT json_extract(r.data, '$._id') FROM changes c
             JOIN dataset_rows r ON r.row_key >= c.row_ref AND r.row_key < c.row_ref + c.row_span
            WHERE c.feed_id = ? AND c.op = 'insert'`,
        )
        .all(target.datasetId, target.datasetId) as { id: string }[]
    ).map((r) => r.id);
    // Positions a range covers whose row is gone: a change without its row.
    const spanned = file
      .prepare("SELECT coalesce(sum(row_span), 0) AS n FROM changes WHERE feed_id = ? AND op = 'insert'")
      .get(target.datasetId) as { n: number };
    const single = file
      .prepare("SELECT count(*) AS n FROM changes WHERE feed_id = ? AND op = 'insert' AND row_span IS NULL")
      .get(target.datasetId) as { n: number };
    const rangesWithoutRows = Number(spanned.n) - (changed.length - Number(single.n));
    file.close();
    const outcome: Outcome = {
      rowsWithoutChange: [...rowIds].filter((id) => !changed.includes(id)).length,
      changesWithoutRow:
        changed.filter((id) => !rowIds.has(id)).length + (changed.length - new Set(changed).size) + rangesWithoutRows,
      sent: next + 1,
      acknowledged: acknowledged.size,
      lost: [...acknowledged].filter((s) => !counts.has(s)),
      unexpected: [...counts.keys()].filter((s) => !acknowledged.has(s) && !indeterminate.has(s)),
      duplicated: [...counts].filter(([, c]) => c > 1).map(([s]) => s),
      indeterminate: indeterminate.size,
      indeterminateStored: [...indeterminate].filter((s) => counts.has(s)).length,
      refused,
    };
    console.log(
      `durability (${name}): sent ${outcome.sent}, acknowledged ${outcome.acknowledged}, lost ${outcome.lost.length}, ` +
        `unexpected ${outcome.unexpected.length}, duplicated ${outcome.duplicated.length}, ` +
        `indeterminate ${outcome.indeterminate} (${outcome.indeterminateStored} of them stored), refused ${refused.length}, ` +
        `rows ${rowIds.size} / insert changes ${changed.length}`,
    );
    return outcome;
  } finally {
    await stop(server, "SIGTERM");
  }
}

function expectExactlyOnce(outcome: Outcome): void {
  expect(outcome.refused).toEqual([]);
  expect(outcome.acknowledged).toBeGreaterThanOrEqual(1500);
  expect(outcome.lost).toEqual([]);
  expect(outcome.unexpected).toEqual([]);
  expect(outcome.duplicated).toEqual([]);
  expect([outcome.rowsWithoutChange, outcome.changesWithoutRow]).toEqual([0, 0]);
}

describe(`durability on SQLite, ${DRIVER} (kill -9)`, () => {
  // No test context parameter: `bun test` (drivers.test.ts) takes a test function's parameter for a done callback.
  it("the example server keeps every acknowledged webhook payload exactly once", async () => {
    const outcome = await killNine(exampleServer, "example-server");
    expect(outcome, "POST /api/webhooks/{id} answers 404: the example server has no webhook receiver").not.toBeNull();
    expectExactlyOnce(outcome!);
  }, 120_000);

  it("the SQLite store's group-commit ingest keeps every acknowledged row exactly once", async () => {
    expectExactlyOnce((await killNine(bareStore, "bare-store"))!);
  }, 120_000);
});

/**
 * What a read records (docs/operating.md, "What a crash can lose"): its
 * `data_access` audit event is committed before the answer is sent, so
 * every answered read is on record after kill -9; its usage counters ride
 * the group commit of the turn that answered, so a kill can lose at most the
 * reads answered in the process's last turn (at most one per client here).
 */
describe(`what reads record on SQLite, ${DRIVER} (kill -9)`, () => {
  it("every answered read's audit event survives kill -9; usage counts lose at most the last turn's reads", async () => {
    const db = join(dir, "reads.sqlite");
    const args = [
      join(root, "examples/server/main.ts"),
      "--db",
      db,
      "--fixture",
      join(root, "examples/demo/space.json"),
      "--api-rate",
      "0",
      // A port the kernel picks: other test files run meanwhile.
      "--port",
      "0",
    ];
    let server = await startServerProcess(args);
    const agent = `durability-reads-${Date.now()}`;
    const clients = 12;
    let sent = 0;
    let answered = 0;
    let stopped = false;
    let killed: Promise<void> | null = null;
    const client = async () => {
      while (!stopped) {
        sent++;
        try {
          const res = await fetch(`${server.url}/api/v1/datasets/ds_orders/rows?maxRows=5`, {
            headers: { authorization: `Bearer ${TOKEN}`, "user-agent": agent },
          });
          const body = (await res.json()) as { success: boolean };
          if (res.status === 200 && body.success && !stopped) answered++;
        } catch {
          // no answer: the server died with this read in flight
        }
        if (answered >= 600 && !stopped) {
          stopped = true;
          killed = stop(server, "SIGKILL");
        }
      }
    };
    await Promise.all(Array.from({ length: clients }, client));
    await killed;

    server = await startServerProcess(args);
    try {
      // Through the driver the servers ran on (the file is read as they wrote it).
      const file = openDatabase(DRIVER, db, { readonly: true });
      const audited = (
        file
          .prepare(
            "SELECT count(*) AS n FROM audit_events WHERE category = 'data_access' AND json_extract(event, '$.userAgent') = ?",
          )
          .get(agent) as { n: number }
      ).n;
      const counted = (
        file.prepare("SELECT reads FROM dataset_reads WHERE dataset_id = 'ds_orders'").get() as { reads: number }
      ).reads;
      file.close();
      console.log(`reads (kill -9): sent ${sent}, answered ${answered}, audited ${audited}, counted ${counted}`);
      expect(answered).toBeGreaterThanOrEqual(600);
      expect(audited).toBeGreaterThanOrEqual(answered);
      expect(audited).toBeLessThanOrEqual(sent);
      expect(counted).toBeGreaterThanOrEqual(answered - clients);
      expect(counted).toBeLessThanOrEqual(sent);
    } finally {
      await stop(server, "SIGTERM");
    }
  }, 120_000);
});
