import { LRUCache } from "lru-cache";
import type { PoolClient } from "pg";
import { rowChangesColumns, widenColumns } from "../domain/columns.js";
import type { Column, ColumnType } from "../domain/model.js";
import {
  endpointFromConnection,
  newWebhookConfig,
  type WebhookEndpoint,
  webhookConfigWith,
} from "../domain/webhook-config.js";
import type { WebhookDelivery, WebhookReceipt, WebhookStore } from "../ports/storage/webhooks.js";
import { type GroupOutcome, groupCommit } from "../sql/group-commit.js";
import type { CatalogWatch } from "./catalog-events.js";
import type { PostgresChangeLog } from "./changes.js";
import { type Db, json, num, type Statement, statement, storeFault } from "./db.js";
import { makeRoomForDeliveries } from "./dataset-rows.js";
import { copyInsertedSql } from "./dataset-values-sql.js";
import { type PostgresDeliveryLog, postgresDeliveryLog } from "./webhook-log.js";

/** Endpoints remembered at most (found ones only: unknown ids are looked up every time). */
const ENDPOINT_CACHE_SIZE = 1000;
/** Deliveries per transaction at most; more wait for the next. */
const BATCH_DELIVERIES = 1000;
/** Trimmed rows stay (invisible, below the window) until this many have gathered; then one DELETE takes them. */
const SWEEP_AFTER_ROWS = 256;
/** Positions one sweep covers at most, so a sweep stays short after a large replace left many rows below. */
const SWEEP_MAX_ROWS = 5000;

/**
 * Webhook endpoints and deliveries on PostgreSQL.
 *
 * Endpoint lookups are remembered between catalog changes (see
 * `CatalogWatch`): deliveries to a known endpoint arriving together share
 * one `select 1` on the listening connection instead of a lookup each, and
 * a rotated or removed secret applies to the next delivery on every
 * instance.
 *
 * Deliveries are stored by group commit (sql/group-commit.ts): those
 * arriving while this instance's previous group commits (or in the same
 * turn of the event loop) share one autocommit statement (`fastIngest`) or
 * one transaction: the dataset rows locked once (`FOR UPDATE`,
 * in id order, which also serialises the batches of every instance for a
 * dataset), their dedup keys looked up in one statement, their rows
 * inserted in one multi-row INSERT at the next positions, and each dataset's
 * window, columns and updatedAt written once. Each delivery is answered
 * only after that COMMIT. Retention moves the window's start (rows below it
 * are invisible, and their dedup keys count as forgotten); the rows go in
 * one DELETE per SWEEP_AFTER_ROWS trimmed.
 */
export function postgresWebhooks(
  db: Db,
  watch: CatalogWatch,
  changes: PostgresChangeLog,
): WebhookStore & { settled(): Promise<void> } {
  const { t } = db;
  const batchSql = ingestBatchSql(t, changes);
  const endpointSql = `select c.id, c.team_id, c.name, c.config,
      (select d.id from ${t("datasets")} d where d.connection_id = c.id order by d.id collate "C" limit 1) as dataset_id
    from ${t("connections")} c`;
  const endpointById = statement(`${endpointSql} where c.endpoint_id = $1 and c.type = 'webhook'`);
  const log = postgresDeliveryLog(db);
  const fastStatement = fastIngestStatement(t, log, changes);
  const endpoints = new LRUCache<string, WebhookEndpoint>({ max: ENDPOINT_CACHE_SIZE });
  let endpointsVersion: number | null = null;

  /**
   * Each dataset's columns as stored (JSON text) when this instance last wrote or read them: the fast path's
   * expectation.
   */
  const knownColumns: KnownColumns = new LRUCache({ max: ENDPOINT_CACHE_SIZE });
  const deliveries = groupCommit<WebhookDelivery, WebhookReceipt>({
    limit: BATCH_DELIVERIES,
    reported: storeFault,
    // The deliveries whose dataset this instance knows, in one autocommit statement. When it fails (a dedup
    // key stored meanwhile by another instance, or any other failure), the transaction decides them all.
    async shortcut(inputs) {
      const outcomes: Array<WebhookReceipt | undefined> = new Array(inputs.length);
      const plan = planFastIngest(inputs, knownColumns);
      if (plan.length === 0) return outcomes;
      const decided = await fastIngest(
        db,
        fastStatement,
        plan.map((i) => inputs[i]!),
        knownColumns,
        log,
      );
      // Not decided (null): its dataset was not applied, and the transaction decides it.
      plan.forEach((i, k) => (outcomes[i] = decided[k] ?? undefined));
      return outcomes;
    },
    // The rest in one transaction that locks their datasets first.
    commit: (inputs) => db.transaction((client) => ingestBatch(client, t, batchSql, inputs, knownColumns, log)),
  });

  return {
    async getWebhookEndpoint(endpointId) {
      // Answered from memory once every change committed before this request is known (a round trip shared by the
      // lookups meanwhile).
      if (watch.version() !== null && endpoints.has(endpointId)) await watch.sync();
      const version = watch.version();
      if (version !== endpointsVersion) {
        endpoints.clear();
        endpointsVersion = version;
      }
      const known = version === null ? undefined : endpoints.get(endpointId);
      if (known) return known;
      const [row] = await db.query<EndpointRow>(endpointById, [endpointId]);
      if (!row) return null;
      const endpoint = toEndpoint(row);
      // Only when nothing changed while the row was read: else it may predate the change.
      if (version !== null && watch.version() === version) endpoints.set(endpointId, endpoint);
      return endpoint;
    },
    ingestWebhookRow(input) {
      const receipt = deliveries.add(input);
      const logged = input.log;
      if (logged === undefined) return receipt;
      return receipt.then((r) => {
        log.wrote(logged.connectionId, logged.keep);
        return r;
      });
    },
    recordWebhookDeliveries: (batch) => log.record(batch),
    listWebhookDeliveries: (connectionId, query) => log.list(connectionId, query),
    getWebhookDelivery: (connectionId, deliveryId, keep) => log.get(connectionId, deliveryId, keep),
    webhookDeliveryCounts: (query) => log.counts(query),
    async updateWebhookSettings(connectionId, settings) {
      try {
        return await db.transaction(async (client) => {
          const found = await client.query<{ config: Record<string, unknown> }>(
            `select config from ${t("connections")} where id = $1 and type = 'webhook' for update`,
            [connectionId],
          );
          const current = found.rows[0];
          if (!current) return null;
          const config = webhookConfigWith(current.config, settings);
          await client.query(`update ${t("connections")} set config = $2 where id = $1`, [connectionId, json(config)]);
          const result = await client.query<EndpointRow>(`${endpointSql} where c.id = $1`, [connectionId]);
          const endpoint = result.rows[0] ? toEndpoint(result.rows[0]) : null;
          if (endpoint && typeof settings.retainRows === "number" && endpoint.datasetId) {
            // Lowering retention trims at once, in this transaction: the window's start moves up.
            const moved = await client.query<{ trim_from: string; first_pos: string }>(
              `update ${t("datasets")} set first_pos = greatest(first_pos, next_pos - $2::bigint),
                 row_count = next_pos - greatest(first_pos, next_pos - $2::bigint), trim_from = first_pos
               where id = $1 returning trim_from, first_pos`,
              [endpoint.datasetId, Math.max(1, Math.floor(settings.retainRows))],
            );
            const window = moved.rows[0];
            if (window && num(window.first_pos) > num(window.trim_from)) {
              const [last] = (
                await client.query<{ id: string | null }>(
                  `select row ->> '_id' as id from ${t("dataset_rows")} where dataset_id = $1 and pos >= $2 and pos < $3 order by pos desc limit 1`,
                  [endpoint.datasetId, window.trim_from, window.first_pos],
                )
              ).rows;
              // The settings carry no time: the trim is stored at the store's clock.
              const now = Date.now();
              if (last?.id)
                await changes.append(client, endpoint.datasetId, now, {
                  op: "trim",
                  upTo: last.id,
                  at: new Date(now).toISOString(),
                });
            }
          }
          return endpoint;
        });
      } finally {
        watch.changed();
      }
    },
    async createWebhookConnection({ connection, endpoint, dataset }) {
      try {
        return await db.transaction(async (client) => {
          const table = await client.query(`select 1 from ${t("input_tables")} where id = $1`, [dataset.id]);
          if (table.rowCount) throw new Error(`dataset ${dataset.id} exists`);
          const config = newWebhookConfig(endpoint);
          await client.query(
            `insert into ${t("connections")} (id, team_id, name, type, config, created_at, endpoint_id) values ($1, $2, $3, 'webhook', $4, $5, $6)`,
            [
              connection.id,
              connection.teamId,
              connection.name,
              json(config),
              connection.createdAt,
              endpoint.endpointId,
            ],
          );
          await client.query(
            `insert into ${t("datasets")} (id, team_id, name, type, connection_id, source, columns, row_count, last_refreshed_at, updated_at)
             values ($1, $2, $3, 'connection', $4, null, '[]', 0, null, $5)`,
            [dataset.id, connection.teamId, dataset.name, connection.id, connection.createdAt],
          );
          return endpointFromConnection({ ...connection, type: "webhook", config }, dataset.id);
        });
      } finally {
        watch.changed();
      }
    },
    /** Resolves once every delivery received so far is answered. */
    settled: deliveries.settled,
  };
}

/** A delivery's outcome within its batch: stored, a duplicate, or refused on its own. */
type Outcome = GroupOutcome<WebhookReceipt>;

interface DatasetState {
  id: string;
  /** The window's start when the batch began (the rows from here to `first` are its trim). */
  firstBefore: number;
  first: number;
  next: number;
  sweptBelow: number;
  stageFrom: number | null;
  columns: Column[];
  /** `columns` as stored. */
  columnsText: string;
  /** name → type of `columns`, built when first needed. */
  types: Map<string, ColumnType | null> | null;
  columnsChanged: boolean;
  updatedAt: string | null;
}

interface StoredKey {
  pos: number;
  id: string;
  /** Index in the batch's inserts when the row is this batch's own. */
  insert: number | null;
}

/**
 * One batch of deliveries in the caller's transaction, in arrival order, as
 * if one after the other: de-duplicate (against stored rows and earlier
 * deliveries of the batch), append at the next position, widen columns,
 * trim beyond retention. Returns one outcome per input.
 */
async function ingestBatch(
  client: PoolClient,
  t: Db["t"],
  batchSql: string,
  inputs: readonly WebhookDelivery[],
  knownColumns: KnownColumns,
  log: PostgresDeliveryLog,
): Promise<Outcome[]> {
  const ids = [...new Set(inputs.map((i) => i.datasetId))].sort();
  // Locked in id order (the same in every instance, so batches never deadlock).
  const locked = await client.query<{
    id: string;
    first_pos: string;
    next_pos: string;
    swept_below: string;
    stage_from: string | null;
    columns: string;
  }>(
    `select id, first_pos, next_pos, swept_below, stage_from, columns::text as columns from ${t("datasets")} where id = any($1) order by id for update`,
    [ids],
  );
  const datasets = new Map<string, DatasetState>();
  for (const r of locked.rows) {
    datasets.set(r.id, {
      id: r.id,
      firstBefore: num(r.first_pos),
      first: num(r.first_pos),
      next: num(r.next_pos),
      sweptBelow: num(r.swept_below),
      stageFrom: r.stage_from === null ? null : num(r.stage_from),
      columns: JSON.parse(r.columns) as Column[],
      columnsText: r.columns,
      types: null,
      columnsChanged: false,
      updatedAt: null,
    });
  }

  // The stored holders of the batch's dedup keys, read after the locks: every batch before this one has committed.
  const keyed = inputs.filter((i) => i.dedupKey !== null && datasets.has(i.datasetId));
  const stored = new Map<string, StoredKey>();
  if (keyed.length > 0) {
    const found = await client.query<{ dataset_id: string; dedup_key: string; pos: string; id: string | null }>(
      `select r.dataset_id, r.dedup_key, r.pos, r.row ->> '_id' as id
         from unnest($1::text[], $2::text[]) as k(dataset_id, dedup_key)
         join ${t("dataset_rows")} r on r.dataset_id = k.dataset_id and r.dedup_key = k.dedup_key`,
      [keyed.map((i) => i.datasetId), keyed.map((i) => i.dedupKey)],
    );
    for (const r of found.rows)
      stored.set(keyOf(r.dataset_id, r.dedup_key), { pos: num(r.pos), id: String(r.id ?? ""), insert: null });
  }

  const inserts: Array<{
    datasetId: string;
    pos: number;
    key: string | null;
    text: string;
    id: string;
    storedAt: number;
  }> = [];
  const forgotten: Array<{ datasetId: string; pos: number }> = [];
  const outcomes = inputs.map((input): Outcome => {
    const ds = datasets.get(input.datasetId);
    if (!ds) return new Error(`unknown dataset ${input.datasetId}`);
    const key = input.dedupKey === null ? null : keyOf(input.datasetId, input.dedupKey);
    if (key !== null) {
      const holder = stored.get(key);
      if (holder && holder.pos >= ds.first) return { id: holder.id, duplicate: true };
      if (holder) {
        // Below the window (trimmed or replaced, not swept yet): forgotten, and the key goes with its row.
        if (holder.insert === null) forgotten.push({ datasetId: ds.id, pos: holder.pos });
        else inserts[holder.insert]!.key = null;
      }
    }
    const id = String(input.row._id ?? "");
    if (key !== null) stored.set(key, { pos: ds.next, id, insert: inserts.length });
    inserts.push({
      datasetId: ds.id,
      pos: ds.next,
      key: input.dedupKey,
      text: JSON.stringify(input.row),
      id,
      storedAt: Date.parse(input.receivedAt),
    });
    ds.next += 1;
    if (rowChangesColumns((ds.types ??= new Map(ds.columns.map((c) => [c.name, c.type] as const))), input.row)) {
      const widened = widenColumns(ds.columns, input.columns);
      if (widened) {
        ds.columns = widened;
        ds.columnsChanged = true;
      }
      ds.types = null;
    }
    ds.updatedAt = input.receivedAt;
    ds.first = Math.max(ds.first, ds.next - Math.max(1, Math.floor(input.retainRows)));
    return { id, duplicate: false };
  });

  if (forgotten.length > 0) {
    await client.query(
      `delete from ${t("dataset_rows")} r using unnest($1::text[], $2::bigint[]) as f(dataset_id, pos)
        where r.dataset_id = f.dataset_id and r.pos = f.pos`,
      [forgotten.map((f) => f.datasetId), forgotten.map((f) => f.pos)],
    );
  }
  for (const ds of datasets.values()) {
    if (ds.columnsChanged) ds.columnsText = JSON.stringify(ds.columns);
    knownColumns.set(ds.id, knownFrom(ds.columnsText, ds.columns));
  }
  // The log entries of the decided deliveries, in this transaction.
  const decided: Parameters<PostgresDeliveryLog["logDelivered"]>[1][number][] = [];
  inputs.forEach((input, i) => {
    const outcome = outcomes[i]!;
    if (input.log && !(outcome instanceof Error))
      decided.push({ log: input.log, outcome: outcome.duplicate ? "duplicate" : "stored", rowId: outcome.id });
  });
  await log.logDelivered(client, decided);
  const changed = [...datasets.values()].filter((ds) => ds.updatedAt !== null);
  if (changed.length === 0) return outcomes;
  // A bulk write staging right above the window: move its rows out of the way (rare).
  for (const ds of changed) {
    if (ds.stageFrom !== null && ds.next > ds.stageFrom)
      ds.stageFrom = await makeRoomForDeliveries(client, t, ds.id, ds.next - ds.stageFrom);
  }
  const sweeps = changed.filter((ds) => ds.first - ds.sweptBelow >= SWEEP_AFTER_ROWS);
  const sweepTo = sweeps.map((ds) => Math.min(ds.first, ds.sweptBelow + SWEEP_MAX_ROWS));
  const changes = changesOf(inserts, changed);
  // The rows, their changes, every dataset's new window, and the amortised sweep: one statement.
  await client.query(batchSql, [
    inserts.map((i) => i.datasetId),
    inserts.map((i) => i.pos),
    inserts.map((i) => i.key),
    `[${inserts.map((i) => i.text).join(",")}]`,
    sweeps.map((ds) => ds.id),
    sweeps.map((ds) => ds.sweptBelow),
    sweepTo,
    json(
      changed.map((ds) => ({
        id: ds.id,
        first_pos: ds.first,
        next_pos: ds.next,
        updated_at: ds.updatedAt,
        swept_below: sweeps.includes(ds) ? sweepTo[sweeps.indexOf(ds)] : null,
        stage_from: ds.stageFrom,
        columns: ds.columnsChanged ? ds.columnsText : null,
      })),
    ),
    changes.map((c) => c.feedId),
    changes.map((c) => c.op),
    changes.map((c) => c.rowId),
    changes.map((c) => c.rowN),
    changes.map((c) => c.storedAt),
    changes.map((c) => c.lo),
    changes.map((c) => c.hi),
  ]);
  return outcomes;
}

interface BatchChange {
  feedId: string;
  op: "insert" | "trim";
  rowId: string | null;
  /** The row's index (1-based) in the batch's rows; null for a trim. */
  rowN: number | null;
  storedAt: number;
  lo: number | null;
  hi: number | null;
}

/**
 * The batch's changes, in the order they are positioned: every row's insert
 * in arrival order, then one trim per dataset whose window moved, naming
 * the last row below the new window (a row of this batch, or, looked up by
 * the statement, a stored one between `lo` and `hi`).
 */
function changesOf(
  inserts: ReadonlyArray<{ datasetId: string; pos: number; id: string; storedAt: number }>,
  datasets: readonly DatasetState[],
): BatchChange[] {
  const out = inserts.map((i, k): BatchChange => ({
    feedId: i.datasetId,
    op: "insert",
    rowId: i.id,
    rowN: k + 1,
    storedAt: i.storedAt,
    lo: null,
    hi: null,
  }));
  for (const ds of datasets) {
    if (ds.first <= ds.firstBefore) continue;
    let own: (typeof inserts)[number] | undefined;
    for (const i of inserts) if (i.datasetId === ds.id && i.pos < ds.first) own = i;
    const storedAt = Date.parse(ds.updatedAt ?? "") || 0;
    out.push({
      feedId: ds.id,
      op: "trim",
      rowId: own?.id ?? null,
      rowN: null,
      storedAt,
      lo: own ? null : ds.firstBefore,
      hi: own ? null : ds.first,
    });
  }
  return out;
}

/**
 * The statement of a batch's transaction: its rows, their changes (in the
 * order `changesOf` gives, positioned in that order under each dataset's
 * feed), every dataset's new window, and the amortised sweep.
 */
function ingestBatchSql(t: Db["t"], changes: PostgresChangeLog): string {
  return `with rows as materialized (
       select value, n from json_array_elements($4::json) with ordinality as r(value, n)
     ), batch as not materialized (
       select x.dataset_id, x.pos, x.dedup_key, r.value as row
         from unnest($1::text[], $2::bigint[], $3::text[]) with ordinality as x(dataset_id, pos, dedup_key, n)
         join rows r using (n)
     ), inserted as (
       insert into ${t("dataset_rows")} (dataset_id, pos, dedup_key, row) select dataset_id, pos, dedup_key, row from batch
     ), copied as (
       ${copyInsertedSql("batch", t)}
     ), changed as (
       insert into ${t("changes")} (feed_id, position, op, row_id, row, stored_at)
       select q.feed_id, ${changes.positionSql("q.feed_id")}, q.op, q.row_id, q.row, q.stored_at
         from (select c.feed_id, c.op, c.stored_at, r.value as row,
                      coalesce(c.row_id, (select s.row ->> '_id' from ${t("dataset_rows")} s
                                           where s.dataset_id = c.feed_id and s.pos >= c.lo and s.pos < c.hi
                                           order by s.pos desc limit 1)) as row_id
                 from unnest($9::text[], $10::text[], $11::text[], $12::bigint[], $13::bigint[], $14::bigint[], $15::bigint[])
                      with ordinality as c(feed_id, op, row_id, row_n, stored_at, lo, hi, k)
                 left join rows r on r.n = c.row_n
                order by c.k) q
        where q.row_id is not null
     ), swept as (
       delete from ${t("dataset_rows")} r using unnest($5::text[], $6::bigint[], $7::bigint[]) as s(dataset_id, lo, hi)
        where r.dataset_id = s.dataset_id and r.pos >= s.lo and r.pos < s.hi
     )
     update ${t("datasets")} d
        set first_pos = w.first_pos, next_pos = w.next_pos, row_count = w.next_pos - w.first_pos, updated_at = w.updated_at,
            swept_below = coalesce(w.swept_below, d.swept_below), stage_from = w.stage_from, columns = coalesce(w.columns::json, d.columns)
       from json_to_recordset($8::json) as w(id text, first_pos bigint, next_pos bigint, updated_at text, swept_below bigint, stage_from bigint, columns text)
      where d.id = w.id
        -- copied is a plain query (not a data-modifying one): PostgreSQL runs it only where it is referenced.
        and (select count(*) from copied) >= 0`;
}

/** Datasets' columns as stored (JSON text) and as a name → type map, by dataset id. */
type KnownColumns = LRUCache<string, { text: string; types: Map<string, ColumnType | null> }>;

function knownFrom(text: string, columns: readonly Column[]): { text: string; types: Map<string, ColumnType | null> } {
  return { text, types: new Map(columns.map((c) => [c.name, c.type] as const)) };
}

/**
 * Which deliveries of a batch the one-statement path can decide alone (their
 * indexes): those of datasets whose columns this instance knows and that no
 * row of the batch widens, with one retention for the dataset and no dedup
 * key twice. The rest take the transaction.
 */
function planFastIngest(inputs: readonly WebhookDelivery[], knownColumns: KnownColumns): number[] {
  const groups = new Map<string, number[]>();
  inputs.forEach((input, i) => {
    const group = groups.get(input.datasetId);
    if (group) group.push(i);
    else groups.set(input.datasetId, [i]);
  });
  const fast: number[] = [];
  for (const [datasetId, group] of groups) {
    const known = knownColumns.get(datasetId);
    if (known === undefined) continue;
    const { types } = known;
    const retain = inputs[group[0]!]!.retainRows;
    const keys = new Set<string>();
    const simple = group.every((i) => {
      const input = inputs[i]!;
      if (input.retainRows !== retain || rowChangesColumns(types, input.row)) return false;
      if (input.dedupKey === null) return true;
      if (keys.has(input.dedupKey)) return false;
      keys.add(input.dedupKey);
      return true;
    });
    if (simple) fast.push(...group);
  }
  return fast.sort((a, b) => a - b);
}

/**
 * Deliveries planned by `planFastIngest` in ONE autocommit statement: no
 * transaction held open across round trips, so a dataset row is locked only
 * while the statement runs and commits. Per dataset, the UPDATE of its row
 * is the lock and allocates the positions (under READ COMMITTED it waits for
 * another batch holding the row and then works on the row as that batch
 * left it); its WHERE clause applies the batch only when the statement can
 * decide it exactly: the stored columns are those this instance planned
 * with, no bulk write's staged rows are in the way, and no dedup key is
 * held by a row below the window as it will be after the batch. The rows
 * of the datasets it applied to are inserted from the UPDATE's RETURNING.
 *
 * The holders of the batch's dedup keys are read in the statement's
 * snapshot: a key stored by another instance while this statement waited
 * for the lock makes the INSERT fail on the unique index, and the caller
 * takes the transaction path. Returns, per delivery, its outcome, or null
 * when its dataset was not applied (the transaction path decides it).
 */
async function fastIngest(
  db: Db,
  sql: Statement,
  inputs: readonly WebhookDelivery[],
  knownColumns: KnownColumns,
  log: PostgresDeliveryLog,
): Promise<Array<WebhookReceipt | null>> {
  const datasets = new Map<string, { id: string; retain: number; expect: string }>();
  for (const input of inputs) {
    if (!datasets.has(input.datasetId)) {
      datasets.set(input.datasetId, {
        id: input.datasetId,
        retain: Math.max(1, Math.floor(input.retainRows)),
        expect: knownColumns.get(input.datasetId)!.text,
      });
    }
  }
  const rows = await db.query<{ n: string; applied: boolean; dup_id: string | null }>(sql, [
    inputs.map((i) => i.datasetId),
    inputs.map((i) => i.dedupKey),
    `[${inputs.map((i) => JSON.stringify(i.row)).join(",")}]`,
    json([...datasets.values()]),
    inputs.map((i) => i.receivedAt),
    ...log.fastLogParams(inputs),
    inputs.map((i) => Date.parse(i.receivedAt)),
  ]);
  const outcomes: Array<WebhookReceipt | null> = inputs.map(() => null);
  for (const r of rows) {
    if (!r.applied) continue;
    const i = num(r.n) - 1;
    outcomes[i] =
      r.dup_id !== null
        ? { id: r.dup_id, duplicate: true }
        : { id: String(inputs[i]!.row._id ?? ""), duplicate: false };
  }
  return outcomes;
}

/** The statement of `fastIngest` (prepared: it runs once per batch, and planning it costs more than running it). */
function fastIngestStatement(t: Db["t"], log: PostgresDeliveryLog, changes: PostgresChangeLog): Statement {
  return statement(
    `with w as (
       select * from json_to_recordset($4::json) as w(id text, retain bigint, expect text)
     ), x as (
       select * from unnest($1::text[], $2::text[], $5::text[], $7::bigint[]) with ordinality as x(dataset_id, dedup_key, received_at, stored_at, n)
     ), rows as materialized (
       select value, n from json_array_elements($3::json) with ordinality as r(value, n)
     ), held as materialized (
       select x.n, x.dataset_id, r.pos, r.row ->> '_id' as id
         from x join ${t("dataset_rows")} r on r.dataset_id = x.dataset_id and r.dedup_key = x.dedup_key
     ), fresh as materialized (
       select x.n, x.dataset_id, x.dedup_key, x.received_at, x.stored_at, row_number() over (partition by x.dataset_id order by x.n) as k
         from x where not exists (select 1 from held h where h.n = x.n)
     ), counts as (
       select w.id, w.retain, w.expect, count(f.n) as added, (array_agg(f.received_at order by f.n desc))[1] as updated_at
         from w left join fresh f on f.dataset_id = w.id
        group by w.id, w.retain, w.expect
     ), before as (
       select id, swept_below from ${t("datasets")} where id in (select id from w)
     ), applied as (
       update ${t("datasets")} d
          set next_pos = d.next_pos + c.added,
              first_pos = greatest(d.first_pos, d.next_pos + c.added - c.retain),
              row_count = c.added + d.next_pos - greatest(d.first_pos, d.next_pos + c.added - c.retain),
              updated_at = coalesce(c.updated_at, d.updated_at),
              trim_from = d.first_pos,
              swept_below = case when greatest(d.first_pos, d.next_pos + c.added - c.retain) - d.swept_below >= ${SWEEP_AFTER_ROWS}
                then least(greatest(d.first_pos, d.next_pos + c.added - c.retain), d.swept_below + ${SWEEP_MAX_ROWS}) else d.swept_below end
         from counts c
        where d.id = c.id and d.columns::text = c.expect
          and (d.stage_from is null or d.next_pos + c.added <= d.stage_from)
          and not exists (select 1 from held h where h.dataset_id = d.id and h.pos < greatest(d.first_pos, d.next_pos + c.added - c.retain))
       returning d.id, d.next_pos - c.added as base, d.swept_below, d.trim_from, d.first_pos
     ), stored as not materialized (
       select f.dataset_id, a.base + f.k - 1 as pos, f.dedup_key, r.value as row
         from fresh f join applied a on a.id = f.dataset_id
         join rows r on r.n = f.n
     ), inserted as (
       insert into ${t("dataset_rows")} (dataset_id, pos, dedup_key, row) select dataset_id, pos, dedup_key, row from stored
     ), copied as (
       ${copyInsertedSql("stored", t)}
     ), trims as (
       -- The last row below the moved window: one of this statement's, or a stored one. A stored row this
       -- statement cannot see (committed by another instance while it waited) leaves upTo null, which the
       -- change log's check refuses: the deliveries then take the transaction path.
       select a.id, (select max(f.stored_at) from fresh f where f.dataset_id = a.id) as stored_at,
              coalesce((select r.value ->> '_id' from fresh f join rows r on r.n = f.n
                         where f.dataset_id = a.id and a.base + f.k - 1 < a.first_pos order by f.k desc limit 1),
                       (select s.row ->> '_id' from ${t("dataset_rows")} s
                         where s.dataset_id = a.id and s.pos >= a.trim_from and s.pos < least(a.first_pos, a.base)
                         order by s.pos desc limit 1)) as up_to
         from applied a where a.first_pos > a.trim_from
     ), changed as (
       -- Each row's insert in arrival order, then each dataset's trim, positioned in that order.
       insert into ${t("changes")} (feed_id, position, op, row_id, row, stored_at)
       select q.feed_id, ${changes.positionSql("q.feed_id")}, q.op, q.row_id, q.row, q.stored_at
         from (select f.dataset_id as feed_id, 'insert' as op, r.value ->> '_id' as row_id, r.value as row, f.stored_at, 0 as g, f.n as k
                 from fresh f join applied a on a.id = f.dataset_id join rows r on r.n = f.n
               union all
               select id, 'trim', up_to, null, stored_at, 1, 0 from trims
                order by g, k) q
     ), sweeps as materialized (
       -- From the sweep mark as this statement's snapshot saw it: at or below the current one, so nothing is missed.
       -- Both bounds in one relation, so the delete's index scan is bounded by both (with them from two, the
       -- planner bounded it below only and filtered the dataset's whole window).
       select a.id, b.swept_below as lo, a.swept_below as hi from applied a join before b on b.id = a.id
        where a.swept_below > b.swept_below
     ), swept as (
       delete from ${t("dataset_rows")} r using sweeps s where r.dataset_id = s.id and r.pos >= s.lo and r.pos < s.hi
     )${log.fastLogSql(6)}
     select x.n, a.id is not null as applied, h.id as dup_id
       from x left join applied a on a.id = x.dataset_id left join held h on h.n = x.n
      -- copied is a plain query (not a data-modifying one): PostgreSQL runs it only where it is referenced.
      where (select count(*) from copied) >= 0`,
  );
}

function keyOf(datasetId: string, dedupKey: string): string {
  return `${datasetId}\u0000${dedupKey}`;
}

interface EndpointRow {
  id: string;
  team_id: string;
  name: string;
  config: Record<string, unknown>;
  dataset_id: string | null;
}

/** The endpoint view of the connection's config (the same rule as every store: `endpointFromConnection`). */
function toEndpoint(r: EndpointRow): WebhookEndpoint {
  return endpointFromConnection(
    { id: r.id, teamId: r.team_id, name: r.name, type: "webhook", config: r.config, createdAt: "" },
    r.dataset_id ?? "",
  );
}
