import { sqliteAggregates } from "./aggregate.js";
import type * as Database from "./driver.js";
import type { Actor, AuditEvent, Column, Row, TableRecord } from "../domain/model.js";
import type { PutResult } from "../ports/storage/identity.js";
import { IDEMPOTENCY_LEASE_MS } from "../domain/idempotency.js";
import type {
  EditLogEntry,
  EditOp,
  IdempotencyKeyUse,
  IdempotentOutcome,
  InsertRowInput,
  RowWriteResult,
  DeleteRowInput,
  StoredResponse,
  TableStore,
  TableWrites,
  UpdateRowInput,
} from "../ports/storage/tables.js";
import { changedSince, newRow, nextUpdatedAt, patchedRow } from "../domain/table-rows.js";
import { appendAuditStatement } from "./audit.js";
import { appendChangeStatement, forgetFeedStatement, sqliteChangeFeeds } from "./changes.js";
import { parseJson, parseJsonOrNull, type SqliteHandle, writeTransaction } from "./db.js";
import { idPageQuery } from "./identity.js";
import { syncTableIndexes } from "./row-indexes.js";
import { queriedTableReads } from "./row-reads.js";

interface TableRow {
  id: string;
  team_id: string;
  name: string;
  columns: string;
  row_count: number;
  updated_at: string;
}

interface EditLogRow {
  table_id: string;
  row_id: string;
  op: string;
  actor: string;
  at: string;
  before: string | null;
  after: string | null;
}

/** How often (by the clock) expired idempotency keys are deleted. */
const SWEEP_EVERY_MS = 60 * 60 * 1000;
/** Rows read per statement while a put reshapes a table's rows. */
const RESHAPE_BATCH = 1000;

interface ClaimRow {
  fingerprint: string;
  claimed_at: number;
  response: string | null;
}

export function sqliteTables(handle: SqliteHandle): TableStore & TableWrites {
  const { db } = handle;
  const table = db.prepare<[string], TableRow>("SELECT * FROM input_tables WHERE id = ?");
  const count = db.prepare<[string], { n: number }>("SELECT count(*) AS n FROM table_rows WHERE table_id = ?");
  const page = db.prepare<[string, number, number], { seq: number; data: string }>(
    "SELECT seq, data FROM table_rows WHERE table_id = ? ORDER BY seq LIMIT +? OFFSET ?",
  );
  const editLog = db.prepare<[string, number, number], EditLogRow>(
    "SELECT * FROM edit_log WHERE table_id = ? ORDER BY seq LIMIT +? OFFSET ?",
  );
  const one = db.prepare<[string, string], { data: string }>(
    "SELECT data FROM table_rows WHERE table_id = ? AND row_id = ?",
  );
  const writes = rowWrites(db);
  const tablePage = idPageQuery<TableRow>(db, "SELECT * FROM input_tables");
  const tableWrites = tableChanges(db);
  const changes = sqliteChangeFeeds(handle);

  const aggregates = sqliteAggregates(handle);
  // Pages with where, sort or after: on the event loop while short, else on a reader thread (see row-reads.ts).
  const queried = queriedTableReads(handle);
  const once = idempotentWrites(db);
  const insertOnce = once((input: InsertRowInput) => {
    // Inside the key's transaction, which holds the write lock: the row write answers at once, never a promise.
    const row = writes.insert(input) as Row;
    return { result: row, answer: row };
  });
  const updateOnce = once((input: UpdateRowInput) => {
    const result = writes.update(input) as RowWriteResult;
    return { result, answer: result.status === "ok" ? result.row : null };
  });

  return {
    async getTable(id) {
      const row = table.get(id);
      return row ? toTable(row) : null;
    },
    async listTables(page) {
      return tablePage(page).map(toTable);
    },
    async putTable(table, reshape) {
      return tableWrites.put(table, reshape);
    },
    async deleteTable(id) {
      return tableWrites.remove(id);
    },
    async aggregateTableRows(tableId, query) {
      return aggregates.aggregateTableRows(tableId, query);
    },
    async listTableRows(tableId, query) {
      const { offset, limit } = query;
      if (query.where || query.sort?.length || query.after) return queried(tableId, query);
      return db.transaction(() => {
        const found = page.all(tableId, Math.max(0, limit), Math.max(0, offset));
        const end = found.at(-1);
        return {
          totalRows: query.count === false ? -1 : (count.get(tableId)?.n ?? 0),
          rows: found.map((r) => parseJson<Row>(r.data)),
          lastKey: end ? { values: [], position: end.seq } : null,
        };
      })();
    },
    async getTableRow(tableId, rowId) {
      const row = one.get(tableId, rowId);
      return row ? parseJson<Row>(row.data) : null;
    },
    async insertTableRow(input) {
      return writes.insert(input);
    },
    async updateTableRow(input) {
      return writes.update(input);
    },
    async deleteTableRow(input) {
      return writes.remove(input);
    },
    async listEditLog(tableId, range) {
      return editLog
        .all(tableId, range ? Math.max(0, range.limit) : -1, range ? Math.max(0, range.offset) : 0)
        .map(toEntry);
    },
    async insertTableRowOnce(input) {
      return insertOnce(input);
    },
    async readTableChanges(tableId, query) {
      return changes.read(tableId, query);
    },
    async tableChangesHead(tableId) {
      return changes.head(tableId);
    },
    async trimTableChanges(storedBefore) {
      return changes.trimChanges(storedBefore);
    },
    watchTableChanges: changes.watch,
    async updateTableRowOnce(input) {
      return updateOnce(input);
    },
  };
}

/**
 * The three row writes, each ONE transaction over the row, the table's
 * rowCount/updatedAt, the edit log and the audit event. better-sqlite3 runs a
 * transaction to completion synchronously and SQLite serialises writers
 * across processes, so the compare-and-set in `update` is atomic.
 */
function rowWrites(db: Database.Database) {
  const current = db.prepare<[string, string], { data: string }>(
    "SELECT data FROM table_rows WHERE table_id = ? AND row_id = ?",
  );
  const insertRow = db.prepare<[string, string, string]>(
    "INSERT INTO table_rows (table_id, row_id, data) VALUES (?, ?, ?)",
  );
  const updateRow = db.prepare<[string, string, string]>(
    "UPDATE table_rows SET data = ? WHERE table_id = ? AND row_id = ?",
  );
  const deleteRow = db.prepare<[string, string]>("DELETE FROM table_rows WHERE table_id = ? AND row_id = ?");
  const touchTable = db.prepare<[number, string, string]>(
    "UPDATE input_tables SET row_count = row_count + ?, updated_at = ? WHERE id = ?",
  );
  const log = db.prepare(
    "INSERT INTO edit_log (table_id, row_id, op, actor, at, before, after) VALUES (?, ?, ?, ?, ?, ?, ?)",
  );
  const audit = appendAuditStatement(db);
  const change = appendChangeStatement(db);

  const record = (
    tableId: string,
    rowId: string,
    op: EditOp,
    actor: Actor,
    at: string,
    before: Row | null,
    after: Row | null,
    event: AuditEvent,
    now: number,
  ) => {
    log.run(
      tableId,
      rowId,
      op,
      JSON.stringify(actor),
      at,
      before ? JSON.stringify(before) : null,
      after ? JSON.stringify(after) : null,
    );
    change(
      tableId,
      now,
      after === null
        ? { op: "delete", rowId, at }
        : { op: op === "create" ? "insert" : "update", rowId, row: after, at },
    );
    audit(event, now);
  };

  const insert = writeTransaction(
    db,
    (input: {
      tableId: string;
      rowId: string;
      values: Row;
      actor: Actor;
      now: number;
      auditEvent: AuditEvent;
    }): Row => {
      const stamp = nextUpdatedAt(null, input.now);
      const row = newRow(input.rowId, input.values, stamp);
      insertRow.run(input.tableId, input.rowId, JSON.stringify(row));
      touchTable.run(1, stamp, input.tableId);
      record(
        input.tableId,
        input.rowId,
        "create",
        input.actor,
        new Date(input.now).toISOString(),
        null,
        row,
        input.auditEvent,
        input.now,
      );
      return row;
    },
  );

  const update = writeTransaction(
    db,
    (input: {
      tableId: string;
      rowId: string;
      patch: Row;
      expectedUpdatedAt: string | null;
      actor: Actor;
      now: number;
      auditEvent: AuditEvent;
    }): RowWriteResult => {
      const found = current.get(input.tableId, input.rowId);
      if (!found) return { status: "not_found" };
      const before = parseJson<Row>(found.data);
      if (input.expectedUpdatedAt !== null && changedSince(before, input.expectedUpdatedAt)) {
        return { status: "conflict", current: before };
      }
      const stamp = nextUpdatedAt(String(before._updatedAt), input.now);
      const after = patchedRow(before, input.patch, stamp);
      updateRow.run(JSON.stringify(after), input.tableId, input.rowId);
      touchTable.run(0, stamp, input.tableId);
      record(
        input.tableId,
        input.rowId,
        "update",
        input.actor,
        new Date(input.now).toISOString(),
        before,
        after,
        input.auditEvent,
        input.now,
      );
      return { status: "ok", row: after };
    },
  );

  const remove = writeTransaction(db, (input: DeleteRowInput): RowWriteResult => {
    const found = current.get(input.tableId, input.rowId);
    if (!found) return { status: "not_found" };
    const before = parseJson<Row>(found.data);
    if (input.expectedUpdatedAt != null && changedSince(before, input.expectedUpdatedAt))
      return { status: "conflict", current: before };
    const stamp = new Date(input.now).toISOString();
    deleteRow.run(input.tableId, input.rowId);
    touchTable.run(-1, stamp, input.tableId);
    record(input.tableId, input.rowId, "delete", input.actor, stamp, before, null, input.auditEvent, input.now);
    return { status: "ok", row: before };
  });

  return { insert, update, remove };
}

/** Tables themselves: a put keeps the rows and the store's rowCount; a delete takes rows and edit log with it. */
function tableChanges(db: Database.Database) {
  const exists = db.prepare<[string], number>("SELECT 1 FROM input_tables WHERE id = ?").pluck();
  const upsert = db.prepare<[string, string, string, string, string]>(
    `INSERT INTO input_tables (id, team_id, name, columns, row_count, updated_at) VALUES (?, ?, ?, ?, 0, ?)
     ON CONFLICT (id) DO UPDATE SET team_id = excluded.team_id, name = excluded.name, columns = excluded.columns, updated_at = excluded.updated_at`,
  );
  const removeTable = db.prepare<[string]>("DELETE FROM input_tables WHERE id = ?");
  const removeRows = db.prepare<[string]>("DELETE FROM table_rows WHERE table_id = ?");
  const removeLog = db.prepare<[string]>("DELETE FROM edit_log WHERE table_id = ?");
  const rowsAfter = db.prepare<[string, string, number], { row_id: string; data: string }>(
    "SELECT row_id, data FROM table_rows WHERE table_id = ? AND row_id > ? ORDER BY row_id LIMIT +?",
  );
  const rewrite = db.prepare<[string, string, string]>(
    "UPDATE table_rows SET data = ? WHERE table_id = ? AND row_id = ?",
  );
  const change = appendChangeStatement(db);
  const forgetFeed = forgetFeedStatement(db);
  const put = writeTransaction(db, (table: TableRecord, reshape?: (row: Row) => Row): PutResult => {
    const created = exists.get(table.id) === undefined;
    upsert.run(table.id, table.teamId, table.name, JSON.stringify(table.columns), table.updatedAt);
    syncTableIndexes(
      db,
      table.id,
      table.columns.map((c) => c.name),
    );
    // In this transaction, batch by batch (no statement stays open across the updates): a throw rolls it all back.
    for (let after = ""; reshape;) {
      const batch = rowsAfter.all(table.id, after, RESHAPE_BATCH);
      for (const { row_id, data } of batch)
        rewrite.run(JSON.stringify(reshape(parseJson<Row>(data))), table.id, row_id);
      // Rows rewritten: followers start over (the table's `updatedAt` is when the declaration was stored).
      if (after === "" && batch.length > 0)
        change(table.id, Date.parse(table.updatedAt) || 0, { op: "reset", at: table.updatedAt });
      if (batch.length < RESHAPE_BATCH) break;
      after = batch[batch.length - 1]!.row_id;
    }
    return created ? "created" : "updated";
  });
  const remove = writeTransaction(db, (id: string): boolean => {
    if (removeTable.run(id).changes === 0) return false;
    syncTableIndexes(db, id, []);
    removeRows.run(id);
    removeLog.run(id);
    forgetFeed(id);
    return true;
  });
  return { put, remove };
}

/**
 * A row write made once per Idempotency-Key: the key's check, the write and
 * its answer in ONE write transaction (IMMEDIATE: SQLite's write lock is
 * taken at BEGIN, so processes sharing the file check and write the key
 * one after another, and no key is ever seen before its row). The write
 * runs nested (a savepoint); a refused write (not found, a conflict)
 * records nothing.
 */
function idempotentWrites(db: Database.Database) {
  const existing = db.prepare<[string, string], ClaimRow>(
    "SELECT fingerprint, claimed_at, response FROM idempotency_keys WHERE scope = ? AND key = ?",
  );
  const record = db.prepare<[string, string, string, number, string]>(
    `INSERT INTO idempotency_keys (scope, key, fingerprint, claimed_at, response) VALUES (?, ?, ?, ?, ?)
     ON CONFLICT (scope, key) DO UPDATE
       SET fingerprint = excluded.fingerprint, claimed_at = excluded.claimed_at, response = excluded.response`,
  );
  // Expired keys are swept now and then (by the clock), so the table holds about one TTL of keys.
  const sweep = db.prepare<[number]>("DELETE FROM idempotency_keys WHERE claimed_at <= ?");
  let lastSweep = Number.NEGATIVE_INFINITY;
  return <I extends { now: number }, R>(write: (input: I) => { result: R; answer: Row | null }) =>
    writeTransaction(db, (input: I & { idempotency: IdempotencyKeyUse }): IdempotentOutcome<R> => {
      const { scope, key, fingerprint, status, ttlMs } = input.idempotency;
      const { now } = input;
      if (now - lastSweep >= SWEEP_EVERY_MS) {
        lastSweep = now;
        sweep.run(now - ttlMs);
      }
      const held = existing.get(scope, key);
      if (held && now - held.claimed_at < ttlMs) {
        const { fingerprint: heldBy, response } = held;
        if (response !== null) {
          return { state: "completed", fingerprint: heldBy, response: parseJson<StoredResponse>(response) };
        }
        // An earlier version's claim, recorded before its write: in progress until its lease runs out.
        if (now - held.claimed_at < IDEMPOTENCY_LEASE_MS) return { state: "in_progress", fingerprint: heldBy };
      }
      const { result, answer } = write(input);
      if (answer !== null) {
        record.run(scope, key, fingerprint, now, JSON.stringify({ status, body: answer } satisfies StoredResponse));
      }
      return { state: "written", result };
    });
}

export function insertTableStatement(db: Database.Database): (table: TableRecord & { rows: Row[] }) => void {
  const meta = db.prepare(
    "INSERT INTO input_tables (id, team_id, name, columns, row_count, updated_at) VALUES (?, ?, ?, ?, ?, ?)",
  );
  const row = db.prepare("INSERT INTO table_rows (table_id, row_id, data) VALUES (?, ?, ?)");
  return (table) => {
    meta.run(table.id, table.teamId, table.name, JSON.stringify(table.columns), table.rows.length, table.updatedAt);
    syncTableIndexes(
      db,
      table.id,
      table.columns.map((c) => c.name),
    );
    for (const r of table.rows) row.run(table.id, String(r._id), JSON.stringify(r));
  };
}

function toTable(row: TableRow): TableRecord {
  return {
    id: row.id,
    teamId: row.team_id,
    name: row.name,
    columns: parseJson<Column[]>(row.columns),
    rowCount: row.row_count,
    updatedAt: row.updated_at,
  };
}

function toEntry(row: EditLogRow): EditLogEntry {
  return {
    tableId: row.table_id,
    rowId: row.row_id,
    op: row.op as EditOp,
    actor: parseJson<Actor>(row.actor),
    at: row.at,
    before: parseJsonOrNull<Row>(row.before),
    after: parseJsonOrNull<Row>(row.after),
  };
}
