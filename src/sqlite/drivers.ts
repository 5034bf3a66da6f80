import { createRequire } from "node:module";
import type { Database, HostDatabase, SqliteDriverName } from "./driver.js";
import { bunDatabase, type BunSqliteDatabase, type BunSqliteModule } from "./driver-bun.js";
import { nodeDatabase, type NodeSqliteDatabase, type NodeSqliteModule } from "./driver-node.js";

/*
 * Which SQLite binding a store opens, and opening it (the interface:
 * driver.ts). A binding is loaded when a store opens, and only the one
 * chosen: a runtime without better-sqlite3 never tries to load it unless
 * asked to. Loaded with a synchronous require (createSqliteStorage answers
 * a store, not a promise; all three are built-in modules or CommonJS).
 */

export interface OpenOptions {
  readonly?: boolean;
  /** Fail when the file does not exist (readers: the writer created it). */
  fileMustExist?: boolean;
}

const require = createRequire(import.meta.url);

/** `path` opened with `driver`. */
export function openDatabase(driver: SqliteDriverName, path: string, options: OpenOptions = {}): Database {
  switch (driver) {
    case "better-sqlite3": {
      const BetterSqlite3 = loadBetterSqlite3();
      return new BetterSqlite3(path, options);
    }
    case "node:sqlite": {
      const { DatabaseSync } = loadNodeSqlite();
      if (options.fileMustExist && path !== ":memory:") assertExists(path);
      return nodeDatabase(new DatabaseSync(path, { readOnly: options.readonly === true }));
    }
    case "bun:sqlite": {
      const { Database: BunDatabase } = loadBunSqlite();
      const flags = options.readonly ? { readonly: true } : { create: !options.fileMustExist, readwrite: true };
      return bunDatabase(new BunDatabase(path, { ...flags, strict: true }));
    }
  }
}

/**
 * The binding a connection opened by a host belongs to, wrapped as a
 * `Database`, or a TypeError saying what was expected.
 */
export function adoptDatabase(database: HostDatabase): { driver: SqliteDriverName; db: Database; path: string } {
  const d = database as Record<string, unknown>;
  if (typeof d?.pragma === "function" && typeof d.transaction === "function" && typeof d.name === "string") {
    return { driver: "better-sqlite3", db: database as Database, path: d.name };
  }
  if (typeof d?.query === "function" && typeof d.transaction === "function" && typeof d.filename === "string") {
    return { driver: "bun:sqlite", db: bunDatabase(database as BunSqliteDatabase), path: d.filename };
  }
  if (typeof d?.location === "function" && typeof d.prepare === "function" && typeof d.function === "function") {
    const location = (database as NodeSqliteDatabase).location() ?? ":memory:";
    return { driver: "node:sqlite", db: nodeDatabase(database as NodeSqliteDatabase), path: location };
  }
  throw new TypeError(
    "createSqliteStorage: database must be an open connection of better-sqlite3 (new Database(path)), node:sqlite " +
      "(new DatabaseSync(path)) or bun:sqlite (new Database(path))",
  );
}

/**
 * The binding named by the environment variable DATAPORT_SQLITE_DRIVER (an
 * operator's choice for a store whose code names none), or undefined. On
 * Deno without --allow-env: undefined.
 */
export function driverFromEnvironment(): unknown {
  try {
    const value = (globalThis as { process?: { env?: Record<string, string | undefined> } }).process?.env
      ?.DATAPORT_SQLITE_DRIVER;
    return value === undefined || value === "" ? undefined : value;
  } catch {
    return undefined;
  }
}

/**
 * The binding a store uses when none is named: bun:sqlite on Bun,
 * node:sqlite on Deno, and on Node better-sqlite3 when it loads (its reads of
 * many rows are about twice as fast), else node:sqlite where Node has it
 * (22.13 and later). Neither: an error saying what to install.
 */
export function chooseDriver(): SqliteDriverName {
  if (isBun()) return "bun:sqlite";
  if (isDeno()) return "node:sqlite";
  let betterSqlite3Failure: unknown;
  try {
    usableBetterSqlite3();
    return "better-sqlite3";
  } catch (error) {
    betterSqlite3Failure = error;
  }
  const nodeSqlite = nodeSqliteUnavailable();
  if (nodeSqlite === null) return "node:sqlite";
  throw new Error(
    `dataport/sqlite: no SQLite driver on Node ${process.versions.node}: ${describe(betterSqlite3Failure)}, and ${nodeSqlite}. ` +
      "Install better-sqlite3 (npm install better-sqlite3; it builds a native addon where no prebuilt one fits), " +
      "or run on Node 22.13 or later, Bun or Deno.",
    { cause: betterSqlite3Failure },
  );
}

/** A named driver, checked against what this runtime has. */
export function checkedDriver(driver: unknown): SqliteDriverName {
  if (driver === "better-sqlite3" || driver === "node:sqlite" || driver === "bun:sqlite") {
    if (driver === "bun:sqlite" && !isBun()) throw new Error('dataport/sqlite: driver "bun:sqlite" runs on Bun only');
    if (driver === "node:sqlite") {
      const why = nodeSqliteUnavailable();
      if (why !== null) throw new Error(`dataport/sqlite: driver "node:sqlite" is not available: ${why}`);
    }
    if (driver === "better-sqlite3") {
      try {
        usableBetterSqlite3();
      } catch (error) {
        const missing = describe(error) === NOT_INSTALLED;
        throw new Error(
          `dataport/sqlite: driver "better-sqlite3" is not available: ${describe(error)}${missing ? " (npm install better-sqlite3)" : ""}`,
          { cause: error },
        );
      }
    }
    return driver;
  }
  throw new TypeError(
    `createSqliteStorage: driver must be "better-sqlite3", "node:sqlite" or "bun:sqlite" (got ${JSON.stringify(driver) ?? String(driver)})`,
  );
}

type BetterSqlite3Constructor = new (path: string, options?: OpenOptions) => Database;

function loadBetterSqlite3(): BetterSqlite3Constructor {
  const loaded = require("better-sqlite3") as BetterSqlite3Constructor | { default: BetterSqlite3Constructor };
  return "default" in loaded ? loaded.default : loaded;
}

/**
 * better-sqlite3 loaded with its native addon (which it loads at the first
 * connection: one built for another Node fails there).
 */
function usableBetterSqlite3(): void {
  const BetterSqlite3 = loadBetterSqlite3();
  new BetterSqlite3(":memory:").close();
}

function loadNodeSqlite(): NodeSqliteModule {
  const loaded = builtin<NodeSqliteModule>("node:sqlite");
  if (!loaded) throw new Error(`dataport/sqlite: node:sqlite is not available: ${nodeSqliteUnavailable()}`);
  return loaded;
}

function loadBunSqlite(): BunSqliteModule {
  const loaded = builtin<BunSqliteModule>("bun:sqlite");
  if (!loaded) throw new Error("dataport/sqlite: bun:sqlite runs on Bun only");
  // SQL functions (the statement deadline, row queries' JSON equality):
  // Database.function, in recent Bun (1.4.5 has it).
  if (typeof (loaded.Database as { prototype?: { function?: unknown } }).prototype?.function !== "function") {
    throw new Error(
      `dataport/sqlite: bun:sqlite of Bun ${process.versions.bun} has no SQL functions (Database.function): upgrade Bun`,
    );
  }
  return loaded;
}

/** Why node:sqlite cannot serve the store here, or null when it can. */
function nodeSqliteUnavailable(): string | null {
  const loaded = builtin<NodeSqliteModule>("node:sqlite");
  if (!loaded) return "this Node has no node:sqlite (Node 22.13 and later have it)";
  // SQL functions (the statement deadline, row queries' JSON equality) came in 22.13 / 23.5.
  if (typeof loaded.DatabaseSync?.prototype?.function !== "function")
    return `node:sqlite of Node ${process.versions.node} has no SQL functions (Node 22.13 and later)`;
  return null;
}

/** A built-in module, or undefined where the runtime has none by that name (never a load of a package). */
function builtin<T>(name: string): T | undefined {
  const get = (process as { getBuiltinModule?: (id: string) => unknown }).getBuiltinModule;
  if (typeof get === "function") return get(name) as T | undefined;
  try {
    return require(name) as T;
  } catch {
    return undefined;
  }
}

function assertExists(path: string): void {
  const fs = builtin<typeof import("node:fs")>("node:fs") ?? (require("node:fs") as typeof import("node:fs"));
  if (!fs.existsSync(path)) throw Object.assign(new Error("unable to open database file"), { code: "SQLITE_CANTOPEN" });
}

const NOT_INSTALLED = "better-sqlite3 is not installed";

/** Why better-sqlite3 cannot serve, in a line. */
function describe(error: unknown): string {
  const { code, message } = (error ?? {}) as { code?: unknown; message?: unknown };
  if (code === "MODULE_NOT_FOUND" || code === "ERR_MODULE_NOT_FOUND") return NOT_INSTALLED;
  if (code === "ERR_DLOPEN_FAILED") {
    return `better-sqlite3's native addon does not load here (built for another Node or system: npm rebuild better-sqlite3)`;
  }
  const text = typeof message === "string" ? message.replace(/\s+/g, " ").slice(0, 200) : String(error);
  return `better-sqlite3 does not load (${text})`;
}

function isBun(): boolean {
  return typeof (globalThis as { Bun?: unknown }).Bun !== "undefined";
}

function isDeno(): boolean {
  return typeof (globalThis as { Deno?: unknown }).Deno !== "undefined";
}
