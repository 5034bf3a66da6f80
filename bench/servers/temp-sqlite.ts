import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";

/**
 * A baseline's SQLite file in a fresh temp directory, with the Dataport
 * store's pragmas (WAL, synchronous=NORMAL), closed and removed when the
 * bench stops the server (SIGTERM/SIGINT).
 */
export function tempSqlite(name: string): Database.Database {
  const dir = mkdtempSync(join(tmpdir(), `dataport-bench-${name}-`));
  const db = new Database(join(dir, `${name}.sqlite`));
  db.pragma("journal_mode = WAL");
  db.pragma("synchronous = NORMAL");
  db.pragma("busy_timeout = 5000");
  const stop = () => {
    db.close();
    rmSync(dir, { recursive: true, force: true });
    process.exit(0);
  };
  process.on("SIGTERM", stop);
  process.on("SIGINT", stop);
  return db;
}
