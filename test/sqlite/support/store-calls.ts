/**
 * Another process on a SQLite file, for the visibility tests: opens the
 * store at <db>, makes the storage calls given as JSON
 * (`[{ "method": "identity.putTeam", "args": [...] }, ...]`) one after the other,
 * prints each result as a JSON line and exits.
 *   node --import tsx test/sqlite/support/store-calls.ts <db> '<calls>'
 */
import { createSqliteStorage } from "../../../src/sqlite/index.js";

const [db, calls] = process.argv.slice(2);
const storage = createSqliteStorage({ path: db! });
const areas = storage as unknown as Record<string, Record<string, (...args: unknown[]) => unknown>>;
for (const { method, args } of JSON.parse(calls!) as { method: string; args: unknown[] }[]) {
  const [area, name] = method.split(".") as [string, string];
  const result = await areas[area]![name]!(...args);
  console.log(JSON.stringify(result ?? null));
}
await storage.close();
