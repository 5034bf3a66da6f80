import type * as Database from "./driver.js";
import { rowChangesColumns, widenColumns } from "../domain/columns.js";
import type { Column, ColumnType, Row } from "../domain/model.js";
import {
  endpointFromConnection,
  newWebhookConfig,
  type WebhookEndpoint,
  type WebhookSettings,
  webhookConfigWith,
} from "../domain/webhook-config.js";
import type { WebhookDelivery, WebhookReceipt, WebhookStore } from "../ports/storage/webhooks.js";
import { groupCommit } from "../sql/group-commit.js";
import { stagingMover } from "./bulk-row-writes.js";
import { appendChangeStatement, appendInsertRangeStatement } from "./changes.js";
import { parseJson, rememberedReads, rowKey, type SqliteHandle, writeTransaction } from "./db.js";
import { reportsOwnFaults } from "../sql/store-calls.js";
import { type SqliteDeliveryLog, sqliteDeliveryLog } from "./webhook-log.js";

interface EndpointRow {
  connection_id: string;
  team_id: string;
  name: string;
  config: string;
  dataset_id: string | null;
}

/** Endpoints remembered at most (found ones only: unknown ids are looked up every time). */
const ENDPOINT_CACHE_SIZE = 1000;
/** Deliveries of one group at most (bounds a transaction under a flood). */
const GROUP_LIMIT = 10_000;

export function sqliteWebhooks(handle: SqliteHandle): WebhookStore & { flush(): void; forget(): void } {
  const { db, faults } = handle;
  // Endpoint lookups (one per delivery) are remembered for as long as nothing
  // can have changed them: every write of this process to connections or
  // datasets (settings, create, seed, and the catalog's put/delete) bumps
  // `handle.catalogVersion`, and `PRAGMA data_version` changes whenever
  // another connection — another process on the same file — commits; either
  // forgets them. So a rotated or removed signing secret applies to the very
  // next delivery, as without the cache. Both checks are a counter read.
  const remembered = rememberedReads<WebhookEndpoint>(db, () => handle.catalogVersion, ENDPOINT_CACHE_SIZE);
  const forget = () => {
    handle.catalogVersion++;
  };
  const endpointBy = (column: "endpoint_id" | "id") =>
    db.prepare<[string], EndpointRow>(
      `SELECT c.id AS connection_id, c.team_id, c.name, c.config,
              (SELECT d.id FROM datasets d WHERE d.connection_id = c.id ORDER BY d.seq LIMIT 1) AS dataset_id
       FROM connections c WHERE c.${column} = ? AND c.type = 'webhook'`,
    );
  const byEndpoint = endpointBy("endpoint_id");
  const byConnection = endpointBy("id");
  const setConfig = db.prepare<[string, string, string]>(
    "UPDATE connections SET config = ?, endpoint_id = ? WHERE id = ?",
  );
  const insertConnection = db.prepare(
    "INSERT INTO connections (id, team_id, name, type, config, created_at, endpoint_id) VALUES (?, ?, ?, " +
      "'webhook', ?, ?, ?)",
  );
  const insertDataset = db.prepare(
    `INSERT INTO datasets (id, team_id, name, type, connection_id, source, columns, last_refreshed_at, updated_at)
     VALUES (?, ?, ?, 'connection', ?, NULL, '[]', NULL, ?)`,
  );
  const log = sqliteDeliveryLog(db);
  const ingestBatch = ingestTransaction(db, log);
  const recordBatch = writeTransaction(db, log.record);

  const trimTo = trimStatement(db);
  const updateSettings = writeTransaction(db, (connectionId: string, settings: WebhookSettings) => {
    const row = byConnection.get(connectionId);
    if (!row || row.dataset_id === null) return null;
    const config = webhookConfigWith(parseJson<Record<string, unknown>>(row.config), settings);
    setConfig.run(JSON.stringify(config), String(config.endpointId), connectionId);
    // Lowering retention trims at once, in the same transaction as the change.
    if (typeof settings.retainRows === "number") trimTo(row.dataset_id, Math.max(1, settings.retainRows));
    return toEndpoint({ ...row, config: JSON.stringify(config) });
  });

  const create = writeTransaction(
    db,
    (input: Parameters<WebhookStore["createWebhookConnection"]>[0]): WebhookEndpoint => {
      const { connection, endpoint, dataset } = input;
      const config = newWebhookConfig(endpoint);
      insertConnection.run(
        connection.id,
        connection.teamId,
        connection.name,
        JSON.stringify(config),
        connection.createdAt,
        endpoint.endpointId,
      );
      insertDataset.run(dataset.id, connection.teamId, dataset.name, connection.id, connection.createdAt);
      return toEndpoint({
        connection_id: connection.id,
        team_id: connection.teamId,
        name: connection.name,
        config: JSON.stringify(config),
        dataset_id: dataset.id,
      });
    },
  );

  // Group commit (sql/group-commit.ts): calls arriving in the same turn of the event loop share one
  // transaction (one WAL commit); each resolves only after that commit. When another process holds the
  // write lock the group waits for it whole, between other requests (`writeTransaction`). One bad delivery
  // does not fail its neighbours: the group is committed again one delivery at a time; a fault of the file
  // fails them all with 503 at once (each alone would meet it too).
  const deliveries = groupCommit<WebhookDelivery, WebhookReceipt>({
    limit: GROUP_LIMIT,
    reported: faults.reported,
    commit: ingestBatch,
  });

  return {
    getWebhookEndpoint: reportsOwnFaults(async (endpointId: string) => {
      try {
        const endpoints = remembered.current();
        const known = endpoints.get(endpointId);
        if (known) return known;
        const row = byEndpoint.get(endpointId);
        if (!row) return null;
        const endpoint = toEndpoint(row);
        endpoints.set(endpointId, endpoint);
        return endpoint;
      } catch (error) {
        throw faults.reported(error);
      }
    }),
    // Settles with its group commit, which reports the store's faults.
    ingestWebhookRow: reportsOwnFaults((input: WebhookDelivery) => deliveries.add(input)),
    async updateWebhookSettings(connectionId, settings) {
      try {
        return await updateSettings(connectionId, settings);
      } finally {
        forget();
      }
    },
    async createWebhookConnection(input) {
      try {
        return await create(input);
      } finally {
        forget();
      }
    },
    async recordWebhookDeliveries(batch) {
      // After what is queued, so a refusal never lands before a delivery answered earlier.
      deliveries.flush();
      await recordBatch(batch);
    },
    listWebhookDeliveries: async (connectionId, query) => log.list(connectionId, query),
    getWebhookDelivery: async (connectionId, deliveryId, keep) => log.get(connectionId, deliveryId, keep),
    webhookDeliveryCounts: async (query) => log.counts(query),
    flush: deliveries.flush,
    forget,
  };
}

interface DatasetState {
  seq: number;
  /** The window's start before this batch: rows from here to `first` are trimmed at the end of the batch. */
  firstBefore: number;
  first: number;
  next: number;
  /** `next` before this batch: the batch's rows are at nextBefore … next - 1. */
  nextBefore: number;
  /** The row key of the batch's first row (null: none stored yet). */
  insertedFrom: bigint | null;
  /** The latest `receivedAt` of the batch's rows, in epoch ms. */
  insertedAt: number;
  /** The `receivedAt` last parsed for `insertedAt` (deliveries of one batch mostly share their millisecond). */
  parsedAt: string | null;
  /** Where a bulk write's staged rows begin (null: none is staging). */
  stageFrom: number | null;
  columns: Column[];
  updatedAt: string;
  /** The dedup keys of the batch's rows of the dataset (not written yet: see `rows` in ingestTransaction). */
  batchKeys: Map<string, PendingRow> | null;
  /** name → type of `columns`, built when first needed in a batch. */
  types: Map<string, ColumnType | null> | null;
  dirty: boolean;
}

/**
 * One transaction for a batch of deliveries, in arrival order: de-duplicate
 * (earlier rows of the same batch are visible, so it stays exact), append at
 * the next position, widen columns, trim beyond retention (dedup keys go
 * with the rows). Dataset metadata is written once per dataset at the end.
 */
function ingestTransaction(db: Database.Database, log: SqliteDeliveryLog) {
  const load = db.prepare<
    [string],
    {
      seq: number;
      first_position: number;
      next_position: number;
      stage_from: number | null;
      columns: string;
      updated_at: string;
    }
  >("SELECT seq, first_position, next_position, stage_from, columns, updated_at FROM datasets WHERE id = ?");
  const makeRoom = stagingMover(db);
  const duplicate = db.prepare<[number, string], { position: number; id: string | null }>(
    "SELECT position, data ->> '$._id' AS id FROM dataset_rows WHERE dataset_seq = ? AND dedup_key = ?",
  );
  // The row stays (a change may name it: see trimming below), its key is free again.
  const forgetKey = db.prepare<[number, string]>(
    "UPDATE dataset_rows SET dedup_key = NULL WHERE dataset_seq = ? AND dedup_key = ?",
  );
  const insertRows = rowsInserter(db);
  const save = db.prepare<[string, string, number, number, number]>(
    "UPDATE datasets SET columns = ?, updated_at = ?, first_position = ?, next_position = ? WHERE seq = ?",
  );
  const change = appendChangeStatement(db);
  const inserted = appendInsertRangeStatement(db);
  const lastTrimmed = lastTrimmedStatement(db);

  return writeTransaction(db, (inputs: readonly WebhookDelivery[]): WebhookReceipt[] => {
    log.beginBatch();
    // The batch's rows, written together before anything reads them back (one statement per ROWS_PER_INSERT rows):
    // each statement runs the typed copy's trigger (dataset-values-sql.ts) with one frame and one statement journal
    // for all its rows, where a statement per row paid both per row.
    const rows: PendingRow[] = [];
    const datasets = new Map<string, DatasetState>();
    const state = (id: string): DatasetState => {
      let found = datasets.get(id);
      if (!found) {
        const row = load.get(id);
        if (!row) throw new Error(`unknown dataset ${id}`);
        found = {
          seq: row.seq,
          firstBefore: row.first_position,
          first: row.first_position,
          next: row.next_position,
          nextBefore: row.next_position,
          insertedFrom: null,
          insertedAt: 0,
          parsedAt: null,
          batchKeys: null,
          stageFrom: row.stage_from,
          columns: parseJson(row.columns),
          updatedAt: row.updated_at,
          types: null,
          dirty: false,
        };
        datasets.set(id, found);
      }
      return found;
    };
    const results = inputs.map((input): WebhookReceipt => {
      const ds = state(input.datasetId);
      if (input.dedupKey !== null) {
        // A row of this batch first: it is not written yet.
        const mine = ds.batchKeys?.get(input.dedupKey);
        if (mine !== undefined) {
          if (mine.position >= ds.first) {
            if (input.log) log.delivered(input.log, "duplicate", mine.id);
            return { id: mine.id, duplicate: true };
          }
          // Below the window already (a small retention): its key is free again, as below.
          mine.dedupKey = null;
          ds.batchKeys!.delete(input.dedupKey);
        }
        const seen = mine === undefined ? duplicate.get(ds.seq, input.dedupKey) : undefined;
        if (seen) {
          if (seen.position >= ds.first) {
            if (input.log) log.delivered(input.log, "duplicate", String(seen.id));
            return { id: String(seen.id), duplicate: true };
          }
          // Below the window: a row a bulk replace took away, not swept yet. Its key goes with it.
          forgetKey.run(ds.seq, input.dedupKey);
        }
      }
      // A bulk write is staging right above the window: move its rows out of the way (rare).
      if (ds.stageFrom !== null && ds.next >= ds.stageFrom) {
        insertRows(rows);
        ds.stageFrom = makeRoom(ds.seq);
      }
      const key = rowKey(ds.seq, ds.next);
      const pendingRow: PendingRow = {
        key,
        seq: ds.seq,
        position: ds.next,
        dedupKey: input.dedupKey,
        data: JSON.stringify(input.row as Row),
        id: String(input.row._id),
      };
      rows.push(pendingRow);
      if (input.dedupKey !== null) (ds.batchKeys ??= new Map()).set(input.dedupKey, pendingRow);
      ds.insertedFrom ??= key;
      if (input.receivedAt !== ds.parsedAt) {
        ds.parsedAt = input.receivedAt;
        ds.insertedAt = Math.max(ds.insertedAt, Date.parse(input.receivedAt));
      }
      ds.next += 1;
      if (rowChangesColumns((ds.types ??= new Map(ds.columns.map((c) => [c.name, c.type] as const))), input.row)) {
        ds.columns = widenColumns(ds.columns, input.columns) ?? ds.columns;
        ds.types = null;
      }
      ds.updatedAt = input.receivedAt;
      // Rows below the window are trimmed once, at the end of the batch (a key met below it is forgotten above).
      ds.first = Math.max(ds.first, ds.next - Math.max(1, input.retainRows));
      ds.dirty = true;
      if (input.log) log.delivered(input.log, "stored", String(input.row._id));
      return { id: String(input.row._id), duplicate: false };
    });
    insertRows(rows);
    for (const [id, ds] of datasets) {
      if (!ds.dirty) continue;
      // The batch's rows of the dataset, at consecutive positions: one change row names them all (changes.ts).
      if (ds.insertedFrom !== null) inserted(id, ds.insertedAt, ds.insertedFrom, ds.next - ds.nextBefore);
      if (ds.first > ds.firstBefore) {
        // One trim change per dataset and batch, after the batch's inserts: a follower ends where the rows do.
        // The rows only leave the window: their insert changes name them, and the change log's retention
        // deletes them with the last change naming them (changes.ts).
        const upTo = lastTrimmed(ds.seq, ds.firstBefore, ds.first);
        if (upTo !== null) change(id, Date.parse(ds.updatedAt), { op: "trim", upTo, at: ds.updatedAt });
      }
      save.run(JSON.stringify(ds.columns), ds.updatedAt, ds.first, ds.next, ds.seq);
    }
    log.endBatch();
    return results;
  });
}

/** A row of the batch under way, written by `rowsInserter` (its dedup key may be freed before). */
interface PendingRow {
  key: bigint;
  seq: number;
  position: number;
  dedupKey: string | null;
  data: string;
  id: string;
}

/** Rows one INSERT statement writes at most. */
const ROWS_PER_INSERT = 32;

/**
 * Write rows of `dataset_rows` in order, ROWS_PER_INSERT to a statement (one prepared statement per count, made when
 * first needed), and empty the list.
 */
function rowsInserter(db: Database.Database): (rows: PendingRow[]) => void {
  const statements = new Map<number, Database.Statement<unknown[]>>();
  const statementFor = (count: number) => {
    let found = statements.get(count);
    if (!found) {
      const values = Array.from({ length: count }, () => "(?, ?, ?, ?, ?)").join(", ");
      found = db.prepare<unknown[]>(
        `INSERT INTO dataset_rows (row_key, dataset_seq, position, dedup_key, data) VALUES ${values}`,
      );
      statements.set(count, found);
    }
    return found;
  };
  return (rows) => {
    for (let from = 0; from < rows.length; from += ROWS_PER_INSERT) {
      const count = Math.min(ROWS_PER_INSERT, rows.length - from);
      const params: unknown[] = [];
      for (let i = from; i < from + count; i++) {
        const r = rows[i]!;
        params.push(r.key, r.seq, r.position, r.dedupKey, r.data);
      }
      statementFor(count).run(...params);
    }
    rows.length = 0;
  };
}

/**
 * The `_id` of the last row stored from position `from` to below `below` (a trim's `upTo`), or null when none is left.
 */
function lastTrimmedStatement(db: Database.Database): (seq: number, from: number, below: number) => string | null {
  const last = db
    .prepare<[number, bigint, bigint], string | null>(
      "SELECT data ->> '$._id' FROM dataset_rows WHERE dataset_seq = ? AND row_key >= ? AND row_key < ? ORDER BY " +
        "row_key DESC LIMIT 1",
    )
    .pluck();
  return (seq, from, below) => {
    const id = last.get(seq, rowKey(seq, from), rowKey(seq, below));
    return id === undefined || id === null ? null : String(id);
  };
}

/** Delete the oldest rows of a dataset beyond `retainRows` (their dedup keys go with them), recording the trim. */
function trimStatement(db: Database.Database): (datasetId: string, retainRows: number) => void {
  const load = db.prepare<[string], { seq: number; first_position: number; next_position: number }>(
    "SELECT seq, first_position, next_position FROM datasets WHERE id = ?",
  );
  const save = db.prepare<[number, number]>("UPDATE datasets SET first_position = ? WHERE seq = ?");
  const change = appendChangeStatement(db);
  const lastTrimmed = lastTrimmedStatement(db);
  return (datasetId, retainRows) => {
    const at = load.get(datasetId);
    if (!at) return;
    const keepFrom = at.next_position - retainRows;
    if (keepFrom <= at.first_position) return;
    // The rows leave the window (deleted by the change log's retention, as a delivery's trim).
    const upTo = lastTrimmed(at.seq, at.first_position, keepFrom);
    save.run(keepFrom, at.seq);
    // The settings carry no time: the trim is stored at the store's clock.
    const now = Date.now();
    if (upTo !== null) change(datasetId, now, { op: "trim", upTo, at: new Date(now).toISOString() });
  };
}

function toEndpoint(row: EndpointRow): WebhookEndpoint {
  return endpointFromConnection(
    {
      id: row.connection_id,
      teamId: row.team_id,
      name: row.name,
      type: "webhook",
      config: parseJson(row.config),
      createdAt: "",
    },
    row.dataset_id ?? `ds_${row.connection_id}`,
  );
}
