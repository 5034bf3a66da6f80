/**
 * Two processes on one SQLite file: SQLite serialises their write
 * transactions (IMMEDIATE + busy timeout), so concurrent deliveries through
 * both are all stored, and one delivery sent to both is stored once.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";

const root = new URL("../..", import.meta.url).pathname;
const dir = mkdtempSync(join(tmpdir(), "dataport-sqlite-processes-"));
const children: ChildProcess[] = [];
afterAll(async () => {
  await Promise.all(
    children.map((child) => {
      if (child.exitCode !== null || child.signalCode !== null) return null;
      const exited = new Promise((r) => child.once("exit", r));
      child.kill("SIGTERM");
      return exited;
    }),
  );
  rmSync(dir, { recursive: true, force: true });
});

/** A server on `db`, on a port the kernel picks (other test files run at the same time); its URL. */
async function start(db: string): Promise<string> {
  const child = spawn(
    process.execPath,
    ["--import", "tsx", join(root, "test/support/sqlite-ingest-server.ts"), db, "0"],
    {
      cwd: root,
      stdio: ["ignore", "pipe", "pipe"],
    },
  );
  children.push(child);
  let output = "";
  return new Promise<string>((resolve, reject) => {
    const onData = (d: Buffer) => {
      output += d.toString();
      const match = /listening on (http:\/\/\S+)/.exec(output);
      if (match) resolve(match[1]!);
    };
    child.stdout!.on("data", onData);
    child.stderr!.on("data", onData);
    child.once("exit", (code) => reject(new Error(`server exited with ${code}:\n${output}`)));
  });
}

async function post(url: string, body: object, dedup?: string): Promise<{ id: string; duplicate: boolean }> {
  const res = await fetch(url, {
    method: "POST",
    body: JSON.stringify(body),
    headers: dedup ? { "x-dedup": dedup } : {},
  });
  expect(res.status).toBe(200);
  return (await res.json()) as { id: string; duplicate: boolean };
}

describe("sqlite: two processes on one file", () => {
  it("stores every concurrent delivery and de-duplicates one delivery sent to both", async () => {
    const db = join(dir, "shared.sqlite");
    const a = await start(db);
    const b = await start(db);
    const distinct = Array.from({ length: 300 }, (_, i) => post(i % 2 ? a : b, { n: i }));
    const copies = Array.from({ length: 20 }, (_, i) => post(i % 2 ? a : b, { n: "copy" }, "delivery-1"));
    await Promise.all(distinct);
    const results = await Promise.all(copies);
    expect(results.filter((r) => !r.duplicate)).toHaveLength(1);
    expect(new Set(results.map((r) => r.id)).size).toBe(1);

    const rows = ((await (await fetch(a)).json()) as { data: { n: number | string }[] }).data;
    expect(rows).toHaveLength(301);
    expect(new Set(rows.map((r) => r.n)).size).toBe(301);
  }, 60_000);
});
