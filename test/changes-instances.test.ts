import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import type { Change } from "../src/domain/changes.js";
import type { Row } from "../src/domain/model.js";
import { parseFixture } from "../src/fixture/load.js";
import { createPostgresStorage } from "../src/postgres/index.js";
import type { Storage } from "../src/ports/storage.js";
import { createDataApi } from "../src/server/api.js";
import { createSqliteStorage } from "../src/sqlite/index.js";
import { TOKENS, testFixture } from "./support/fixture.js";
import { dropSchemas, POSTGRES_URL, postgresSkipReason, testSchema } from "./support/services.js";

const skipPostgres = await postgresSkipReason();
const schemas: string[] = [];
const dir = mkdtempSync(join(tmpdir(), "dataport-changes-"));
afterAll(async () => {
  await dropSchemas(schemas);
  rmSync(dir, { recursive: true, force: true });
});

/** Two instances (each its own store object, pool or connection) sharing one database, the fixture loaded once. */
async function twoStores(kind: "sqlite" | "postgres"): Promise<[Storage, Storage]> {
  if (kind === "sqlite") {
    const path = join(dir, `changes-${Date.now()}-${Math.random().toString(36).slice(2)}.db`);
    const a = createSqliteStorage({ path });
    await a.seed(parseFixture(testFixture()));
    return [a, createSqliteStorage({ path })];
  }
  const schema = testSchema();
  schemas.push(schema);
  const a = await createPostgresStorage({ connectionString: POSTGRES_URL, schema, maxConnections: 4 });
  await a.seed(parseFixture(testFixture()));
  return [a, await createPostgresStorage({ connectionString: POSTGRES_URL, schema, maxConnections: 4 })];
}

function client(storage: Storage) {
  const api = createDataApi({ storage, auditLagSeconds: 0 });
  const auth = { authorization: `Bearer ${TOKENS.sync}`, "content-type": "application/json" };
  const call = async (method: string, path: string, body?: unknown) => {
    const res = await api.fetch(
      new Request(`http://dataport.test/api/v1${path}`, {
        method,
        headers: auth,
        body: body === undefined ? undefined : JSON.stringify(body),
      }),
    );
    return { status: res.status, json: (await res.json()) as any };
  };
  return { api, call };
}

/** Every row of the table, page by page, and the first page's changesCursor. */
async function readAll(call: ReturnType<typeof client>["call"]): Promise<{ rows: Row[]; from: string }> {
  const first = await call("GET", "/tables/tbl_targets/rows?limit=3");
  const rows: Row[] = [...first.json.data];
  let page = first;
  while (page.json.metadata.nextCursor) {
    page = await call("GET", `/tables/tbl_targets/rows?limit=3&cursor=${page.json.metadata.nextCursor}`);
    rows.push(...page.json.data);
  }
  return { rows, from: first.json.metadata.changesCursor };
}

function apply(rows: Row[], changes: readonly Change[]): Row[] {
  let out = [...rows];
  for (const change of changes) {
    if (change.op === "insert" || change.op === "update") {
      const at = out.findIndex((r) => r._id === change.rowId);
      if (at >= 0) out[at] = change.row;
      else out.push(change.row);
    } else if (change.op === "delete") out = out.filter((r) => r._id !== change.rowId);
    else throw new Error(`unexpected ${change.op}`);
  }
  return out;
}

const byId = (rows: Row[]) => [...rows].sort((x, y) => String(x._id).localeCompare(String(y._id)));

for (const kind of ["sqlite", "postgres"] as const) {
  describe.skipIf(kind === "postgres" && !!skipPostgres)(`change feeds across two instances (${kind})`, () => {
    it("wakes a long-poll on one instance about a second after a write on the other", async () => {
      const [sa, sb] = await twoStores(kind);
      try {
        const a = client(sa);
        const b = client(sb);
        const { from } = await readAll(a.call);
        const waiting = a.call("GET", `/tables/tbl_targets/changes?wait=20&cursor=${from}`);
        await new Promise((resolve) => setTimeout(resolve, 400));
        const written = await b.call("POST", "/tables/tbl_targets/rows", { region: "B", target: 1 });
        const acknowledged = performance.now();
        const page = await waiting;
        const latency = performance.now() - acknowledged;
        expect(page.json.changes).toEqual([
          { op: "insert", rowId: written.json._id, row: written.json, at: expect.any(String) },
        ]);
        // About a second (the watcher looks every 200–250 ms), with room for a loaded machine.
        expect(latency).toBeLessThan(3000);
      } finally {
        await Promise.all([sa.close(), sb.close()]);
      }
    });

    it("keeps an exact copy: one read, then the changes, while writers on both instances insert, update and delete", async () => {
      const [sa, sb] = await twoStores(kind);
      try {
        const a = client(sa);
        const b = client(sb);
        const writer = async (w: ReturnType<typeof client>, name: string) => {
          const mine: string[] = [];
          for (let i = 0; i < 12; i++) {
            const created = await w.call("POST", "/tables/tbl_targets/rows", { region: `${name}${i}`, target: i });
            mine.push(created.json._id);
            if (i % 3 === 1) await w.call("PATCH", `/tables/tbl_targets/rows/${mine[i - 1]}`, { target: 1000 + i });
            if (i % 4 === 3) await w.call("DELETE", `/tables/tbl_targets/rows/${mine[i - 2]}`);
          }
        };
        // Writes before and during the read.
        await a.call("POST", "/tables/tbl_targets/rows", { region: "early", target: 0 });
        const writers = Promise.all([writer(a, "A"), writer(b, "B")]);
        const { rows, from } = await readAll(a.call);
        // Follow with long-polls until the writers are done and the feed is drained.
        const seen: Change[] = [];
        let cursor = from;
        let done = false;
        void writers.then(() => (done = true));
        for (;;) {
          const finished = done;
          const page = await a.call("GET", `/tables/tbl_targets/changes?wait=1&limit=7&cursor=${cursor}`);
          expect(page.status).toBe(200);
          seen.push(...page.json.changes);
          cursor = page.json.cursor;
          if (finished && !page.json.hasMore && page.json.changes.length === 0) break;
        }
        await writers;
        const final = await readAll(b.call);
        expect(byId(apply(rows, seen))).toEqual(byId(final.rows));
        // Nothing repeated: every insert of a row id at most once.
        const inserts = seen.filter((c) => c.op === "insert").map((c) => (c as { rowId: string }).rowId);
        expect(new Set(inserts).size).toBe(inserts.length);
      } finally {
        await Promise.all([sa.close(), sb.close()]);
      }
    });
  });
}
