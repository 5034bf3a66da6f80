/** What the bench scripts share: a PostgreSQL database made when missing, and a server process's memory from /proc. */
import { readFileSync, writeFileSync } from "node:fs";
import pg from "pg";

/** Create the database `url` names, through its server's `postgres` database, when it does not exist. */
export async function ensureDatabase(url: string): Promise<void> {
  const admin = new URL(url);
  const name = decodeURIComponent(admin.pathname.slice(1));
  admin.pathname = "/postgres";
  const client = new pg.Client({ connectionString: admin.toString() });
  await client.connect();
  try {
    const found = await client.query("select 1 from pg_database where datname = $1", [name]);
    if (found.rowCount === 0) await client.query(`create database "${name.replaceAll('"', '""')}"`);
  } finally {
    await client.end();
  }
}

/** VmRSS and VmHWM of a process, in bytes. */
export function processMemory(pid: number): { rss: number; hwm: number } {
  const text = readFileSync(`/proc/${pid}/status`, "utf8");
  const kb = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(text)?.[1] ?? 0) * 1024;
  return { rss: kb("VmRSS"), hwm: kb("VmHWM") };
}

/** Reset the process's peak RSS (VmHWM) to its current RSS; false where the kernel does not allow it. */
export function resetPeak(pid: number): boolean {
  try {
    writeFileSync(`/proc/${pid}/clear_refs`, "5");
    return true;
  } catch {
    return false;
  }
}

/** The opt-in scenarios of bench/row-queries.ts (a 1,000,000-row dataset each), as bench/run.ts selects them. */
export const ROW_QUERY_SCENARIOS = [
  "rowquery-sqlite",
  "rowquery-postgres",
  "export-sqlite",
  "export-postgres",
  "export-memory",
  "export-table-sqlite",
  "aggregate-sqlite",
  "aggregate-postgres",
] as const;
