import type { PoolClient } from "pg";
import type { Actor, AuditEvent, Column, Row, TableRecord } from "../domain/model.js";
import { IDEMPOTENCY_LEASE_MS } from "../domain/idempotency.js";
import type {
  EditLogEntry,
  EditOp,
  IdempotencyKeyUse,
  IdempotentOutcome,
  InsertRowInput,
  RowWriteResult,
  StoredResponse,
  TableStore,
  TableWrites,
  UpdateRowInput,
} from "../ports/storage/tables.js";
import { changedSince, newRow, nextUpdatedAt, patchedRow } from "../domain/table-rows.js";
import { appendAudit } from "./audit.js";
import type { PostgresChangeLog } from "./changes.js";
import { type Db, idPageSql, json, num, PUT_RESULT, putResult } from "./db.js";
import { syncTableIndexes } from "./row-indexes.js";
import { queriedTableRows } from "./row-query-dialect.js";

const TABLE_COLUMNS = "id, team_id, name, columns, row_count, updated_at";
/** Row writes do not queue behind another transaction's locks for longer than the store's lock bound. */
const ROW_WRITE = { waitForLocks: false } as const;
/** Rows read and rewritten per statement while a put reshapes a table's rows. */
const RESHAPE_BATCH = 1000;

export function postgresTables(
  db: Db,
  changes: PostgresChangeLog,
): Omit<TableStore, "aggregateTableRows"> & TableWrites {
  const { t } = db;
  let claims = 0;
  // The edit-log entry and the row's change in one statement: the change costs no round trip of its own.
  const logSql = `with change as (${changes.insertSql("$1::text", { op: "$8", rowId: "$2", row: "$7::json", storedAt: "$9" })})
    insert into ${t("edit_log")} (table_id, row_id, op, actor, at, before, after) values ($1, $2, $3, $4, $5, $6, $7)`;

  /** The row locked for this transaction, or null. */
  const lockRow = async (client: PoolClient, tableId: string, rowId: string) => {
    const found = await client.query<{ row: Row; updated_ms: string }>(
      `select row, updated_ms from ${t("table_rows")} where table_id = $1 and row_id = $2 for update`,
      [tableId, rowId],
    );
    return found.rows[0] ?? null;
  };

  const log = (client: PoolClient, entry: EditLogEntry, storedAt: number) =>
    client.query(logSql, [
      entry.tableId,
      entry.rowId,
      entry.op,
      json(entry.actor),
      entry.at,
      entry.before === null ? null : json(entry.before),
      entry.after === null ? null : json(entry.after),
      entry.op === "create" ? "insert" : entry.op,
      storedAt,
    ]);

  /**
   * Edit log (at the call's `now`) with the row's change, audit event and the table's
   * rowCount/updatedAt (the row's stamp), in the caller's transaction.
   */
  const record = async (
    client: PoolClient,
    input: { tableId: string; rowId: string; actor: Actor; now: number; auditEvent: AuditEvent },
    op: EditOp,
    at: string,
    stamp: string,
    before: Row | null,
    after: Row | null,
  ) => {
    await log(
      client,
      { tableId: input.tableId, rowId: input.rowId, op, actor: input.actor, at, before, after },
      input.now,
    );
    const delta = op === "create" ? 1 : op === "delete" ? -1 : 0;
    await client.query(`update ${t("input_tables")} set row_count = row_count + $2, updated_at = $3 where id = $1`, [
      input.tableId,
      delta,
      stamp,
    ]);
    await appendAudit(client, t, input.auditEvent, input.now);
  };

  /** The row inserted, in the caller's transaction (the table's row locked first: inserts into a table queue there). */
  const insertRow = async (client: PoolClient, input: InsertRowInput): Promise<Row> => {
    const table = await client.query(`select id from ${t("input_tables")} where id = $1 for update`, [input.tableId]);
    if (table.rowCount === 0) throw new Error(`unknown table ${input.tableId}`);
    const stamp = new Date(input.now).toISOString();
    const row = newRow(input.rowId, input.values, stamp);
    // The position is the column's default: the next of a sequence, never a deleted row's again.
    await client.query(`insert into ${t("table_rows")} (table_id, row_id, row, updated_ms) values ($1, $2, $3, $4)`, [
      input.tableId,
      input.rowId,
      json(row),
      input.now,
    ]);
    await record(client, input, "create", stamp, stamp, null, row);
    return row;
  };

  /** The compare-and-set update, in the caller's transaction. */
  const updateRow = async (client: PoolClient, input: UpdateRowInput): Promise<RowWriteResult> => {
    // The row lock makes check-and-write one step: a concurrent update
    // waits here and then sees this one's `_updatedAt`.
    const found = await lockRow(client, input.tableId, input.rowId);
    if (!found) return { status: "not_found" };
    const current = found.row;
    if (input.expectedUpdatedAt !== null && changedSince(current, input.expectedUpdatedAt)) {
      return { status: "conflict", current };
    }
    // Strictly increasing even within one millisecond: at least 1 ms past the last write.
    const stamp = nextUpdatedAt(typeof current._updatedAt === "string" ? current._updatedAt : null, input.now);
    const nextMs = Date.parse(stamp);
    const row = patchedRow(current, input.patch, stamp);
    await client.query(`update ${t("table_rows")} set row = $3, updated_ms = $4 where table_id = $1 and row_id = $2`, [
      input.tableId,
      input.rowId,
      json(row),
      nextMs,
    ]);
    await record(client, input, "update", new Date(input.now).toISOString(), stamp, current, row);
    return { status: "ok", row };
  };

  /**
   * `write` under an Idempotency-Key, in ONE transaction with the key and
   * its answer. The key is inserted first: a concurrent call with the same
   * key (on any instance) waits on it until this transaction ends, then
   * finds the key committed with its answer (and replays it) or absent
   * (and writes itself). A key is therefore never visible without its row
   * and answer, and a transaction that is lost, rolled back or timed out
   * leaves nothing behind. A call that waits past the lock bound
   * (`lock_timeout`) for the key gets `in_progress`; the bound on an idle
   * transaction (`idle_in_transaction_session_timeout`) ends a stalled
   * holder, so the wait is short.
   */
  const once = async <R>(
    input: { now: number; idempotency: IdempotencyKeyUse },
    write: (client: PoolClient) => Promise<{ result: R; answer: Row | null }>,
  ): Promise<IdempotentOutcome<R>> => {
    const { scope, key, fingerprint, status, ttlMs } = input.idempotency;
    const { now } = input;
    // Expired keys are swept now and then (indexed by claimed_ms).
    if (++claims % 256 === 1) {
      await db.query(`delete from ${t("idempotency_keys")} where claimed_ms <= $1::bigint - $2::bigint`, [now, ttlMs]);
    }
    for (let attempt = 1; ; attempt++) {
      let waitingForKey = true;
      try {
        return await db.transaction(async (client): Promise<IdempotentOutcome<R>> => {
          // Inserts the key, or takes over an expired one (or an earlier version's claim past its lease).
          const claimed = await client.query(
            `insert into ${t("idempotency_keys")} as k (scope, key, fingerprint, claimed_ms, response)
               values ($1, $2, $3, $4, null)
             on conflict (scope, key) do update
               set fingerprint = excluded.fingerprint, claimed_ms = excluded.claimed_ms, response = null
               where $4 - k.claimed_ms >= $5 or (k.response is null and $4 - k.claimed_ms >= $6)
             returning 1`,
            [scope, key, fingerprint, now, ttlMs, IDEMPOTENCY_LEASE_MS],
          );
          waitingForKey = false;
          if (claimed.rowCount === 0) {
            const [held] = (
              await client.query<{ fingerprint: string; response: StoredResponse | null }>(
                `select fingerprint, response from ${t("idempotency_keys")} where scope = $1 and key = $2`,
                [scope, key],
              )
            ).rows;
            // Deleted between the two statements (an earlier version released it): try again.
            if (!held) throw new KeyGone();
            return held.response === null
              ? { state: "in_progress", fingerprint: held.fingerprint }
              : { state: "completed", fingerprint: held.fingerprint, response: held.response };
          }
          const { result, answer } = await write(client);
          // Refused (not found, a conflict): the throw rolls the key back with everything else.
          if (answer === null) throw new Refused(result);
          await client.query(`update ${t("idempotency_keys")} set response = $3 where scope = $1 and key = $2`, [
            scope,
            key,
            json({ status, body: answer } satisfies StoredResponse),
          ]);
          return { state: "written", result };
        }, ROW_WRITE);
      } catch (error) {
        if (error instanceof Refused) return { state: "written", result: error.result as R };
        if (error instanceof KeyGone && attempt < 3) continue;
        // Another request's write holds the key and did not end within the lock bound.
        if (waitingForKey && isLockTimeout(error)) return { state: "in_progress", fingerprint: null };
        throw error;
      }
    }
  };

  return {
    async getTable(id) {
      const [row] = await db.query<TableRow>(`select ${TABLE_COLUMNS} from ${t("input_tables")} where id = $1`, [id]);
      return row ? toTable(row) : null;
    },
    async listTables(page) {
      const params: unknown[] = [];
      const rows = await db.query<TableRow>(
        `select ${TABLE_COLUMNS} from ${t("input_tables")}${idPageSql(page, params)}`,
        params,
      );
      return rows.map(toTable);
    },
    async putTable(table, reshape) {
      const result = await db.transaction(async (client) => {
        const dataset = await client.query(`select 1 from ${t("datasets")} where id = $1`, [table.id]);
        if (dataset.rowCount) throw new Error(`${table.id} is a dataset`);
        // rowCount is the store's: 0 for a new table, kept on a replace (its rows stay).
        const rows = await client.query<{ created: boolean }>(
          `insert into ${t("input_tables")} (${TABLE_COLUMNS}) values ($1, $2, $3, $4, 0, $5)
           on conflict (id) do update set team_id = excluded.team_id, name = excluded.name, columns = excluded.columns,
             updated_at = excluded.updated_at
           returning ${PUT_RESULT}`,
          [table.id, table.teamId, table.name, json(table.columns), table.updatedAt],
        );
        // The table's row is locked from here on, so row writes wait; a throw rolls the whole put back.
        if (reshape && (await reshapeRows(client, t, table.id, reshape))) {
          // Rows rewritten: followers start over (the table's `updatedAt` is when the declaration was stored).
          await changes.append(client, table.id, Date.parse(table.updatedAt) || 0, {
            op: "reset",
            at: table.updatedAt,
          });
        }
        return putResult(rows.rows);
      });
      // Declared columns are indexed (row-indexes.ts), after the commit: the builds do not block writers.
      await syncTableIndexes(
        db,
        table.id,
        table.columns.map((c) => c.name),
      );
      return result;
    },
    async deleteTable(id) {
      const deleted = await db.transaction(async (client) => {
        // Deleting the table row first waits for any row write in flight (they lock or update it).
        const deleted = await client.query(`delete from ${t("input_tables")} where id = $1`, [id]);
        if (deleted.rowCount === 0) return false;
        await client.query(`delete from ${t("table_rows")} where table_id = $1`, [id]);
        await client.query(`delete from ${t("edit_log")} where table_id = $1`, [id]);
        for (const sql of changes.forgetSql()) await client.query(sql, [id]);
        return true;
      });
      if (deleted) await syncTableIndexes(db, id, []);
      return deleted;
    },
    async listTableRows(tableId, page) {
      if (page.where || page.sort?.length || page.after) return queriedTableRows(db, tableId, page);
      const [count] =
        page.count === false
          ? [{ n: "-1" }]
          : await db.query<{ n: string }>(`select count(*) as n from ${t("table_rows")} where table_id = $1`, [
              tableId,
            ]);
      const rows = await db.query<{ row: Row; pos: string }>(
        `select row, pos from ${t("table_rows")} where table_id = $1 order by pos offset $2 limit $3`,
        [tableId, page.offset, page.limit],
      );
      const end = rows.at(-1);
      return {
        totalRows: num(count?.n),
        rows: rows.map((r) => r.row),
        lastKey: end ? { values: [], position: Number(end.pos) } : null,
      };
    },
    async getTableRow(tableId, rowId) {
      const [found] = await db.query<{ row: Row }>(
        `select row from ${t("table_rows")} where table_id = $1 and row_id = $2`,
        [tableId, rowId],
      );
      return found?.row ?? null;
    },
    async insertTableRow(input) {
      return db.transaction((client) => insertRow(client, input), ROW_WRITE);
    },
    async updateTableRow(input) {
      return db.transaction((client) => updateRow(client, input), ROW_WRITE);
    },
    async insertTableRowOnce(input) {
      return once(input, async (client) => {
        const row = await insertRow(client, input);
        return { result: row, answer: row };
      });
    },
    async updateTableRowOnce(input) {
      return once(input, async (client) => {
        const result = await updateRow(client, input);
        return { result, answer: result.status === "ok" ? result.row : null };
      });
    },
    async deleteTableRow(input) {
      return db.transaction(async (client) => {
        const found = await lockRow(client, input.tableId, input.rowId);
        if (!found) return { status: "not_found" } as const;
        if (input.expectedUpdatedAt != null && changedSince(found.row, input.expectedUpdatedAt))
          return { status: "conflict", current: found.row } as const;
        await client.query(`delete from ${t("table_rows")} where table_id = $1 and row_id = $2`, [
          input.tableId,
          input.rowId,
        ]);
        const at = new Date(input.now).toISOString();
        await record(client, input, "delete", at, at, found.row, null);
        return { status: "ok", row: found.row } as const;
      }, ROW_WRITE);
    },
    readTableChanges: (tableId, query) => changes.read(tableId, query),
    tableChangesHead: (tableId) => changes.head(tableId),
    trimTableChanges: (storedBefore) => changes.trimChanges(storedBefore),
    watchTableChanges: changes.watch,
    async listEditLog(tableId, page) {
      const rows = await db.query<LogRow>(
        `select table_id, row_id, op, actor, at, before, after from ${t("edit_log")} where table_id = $1 order by seq offset $2 limit $3`,
        [tableId, page?.offset ?? 0, page?.limit ?? null],
      );
      return rows.map((r): EditLogEntry => ({
        tableId: r.table_id,
        rowId: r.row_id,
        op: r.op,
        actor: r.actor,
        at: r.at,
        before: r.before,
        after: r.after,
      }));
    },
  };
}

interface TableRow {
  id: string;
  team_id: string;
  name: string;
  columns: Column[];
  row_count: string;
  updated_at: string;
}

interface LogRow {
  table_id: string;
  row_id: string;
  op: EditOp;
  actor: Actor;
  at: string;
  before: Row | null;
  after: Row | null;
}

export function toTable(r: TableRow): TableRecord {
  return {
    id: r.id,
    teamId: r.team_id,
    name: r.name,
    columns: r.columns,
    rowCount: num(r.row_count),
    updatedAt: r.updated_at,
  };
}

/** Every row of the table as `reshape` makes it, batch by batch in the caller's transaction; whether there was any. */
async function reshapeRows(
  client: PoolClient,
  t: Db["t"],
  tableId: string,
  reshape: (row: Row) => Row,
): Promise<boolean> {
  for (let after = ""; ;) {
    const batch = await client.query<{ row_id: string; row: Row }>(
      `select row_id, row from ${t("table_rows")} where table_id = $1 and row_id > $2 collate "C" order by row_id collate "C" limit $3`,
      [tableId, after, RESHAPE_BATCH],
    );
    if (batch.rows.length > 0) {
      await client.query(
        `update ${t("table_rows")} r set row = u.row from unnest($2::text[], $3::json[]) as u(row_id, row)
          where r.table_id = $1 and r.row_id = u.row_id`,
        [tableId, batch.rows.map((r) => r.row_id), batch.rows.map((r) => json(reshape(r.row)))],
      );
    }
    if (batch.rows.length < RESHAPE_BATCH) return after !== "" || batch.rows.length > 0;
    after = batch.rows[batch.rows.length - 1]!.row_id;
  }
}

/** A write refused (not found, a conflict), thrown to roll its transaction (and the key) back. */
class Refused {
  constructor(readonly result: unknown) {}
}

/** The key was deleted between finding it taken and reading it. */
class KeyGone {}

/** PostgreSQL gave up waiting for a lock (`lock_timeout`). */
function isLockTimeout(error: unknown): boolean {
  return (error as { code?: unknown } | null)?.code === "55P03";
}
