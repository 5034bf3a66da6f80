/**
 * A script's \`open(path)\`, for another process on a store's file: the file
 * through better-sqlite3, or where that does not load (another Node, Bun:
 * see test/sqlite/drivers.test.ts) through the runtime's own SQLite, so the
 * other process runs on whatever runs the test.
 */
export const OPEN_FILE = `const open = (path) => {
    try { return new (require("better-sqlite3"))(path); } catch {}
    const node = process.getBuiltinModule?.("node:sqlite");
    if (node) return new node.DatabaseSync(path);
    return new (require("bun:sqlite").Database)(path);
  };`;
