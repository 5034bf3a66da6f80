import { utcDay } from "../domain/days.js";
import type { PoolClient } from "pg";
import type { ApiCallRecord, CreditUsage, RefreshRun } from "../domain/model.js";
import {
  type ApiUsageRow,
  type CreditUsageRow,
  type DashboardUsageRow,
  type DatasetUsageRow,
  type RefreshHistoryRow,
  sumCall,
  usageSums,
} from "../ports/storage/usage.js";
import type { StorageAreas } from "../ports/storage.js";
import { type Db, json, num, statement } from "./db.js";
import { millis } from "./identity.js";

/**
 * The space's usage objects, refresh runs, credits and the API usage log. Every
 * figure is a GROUP BY in SQL; text ties are ordered `COLLATE "C"` (binary,
 * as the port asks) with nulls first. Means are rounded half up with
 * `floor(x + 0.5)` (`round()` on a double rounds half to even).
 */
export function postgresUsage(
  db: Db,
  log: (message: string, error: unknown) => void,
): StorageAreas["usage"] & { flushUsage(): Promise<void> } {
  const { t } = db;
  const usage = usageLog(db, log);
  return {
    async spaceDashboardUsage({ teamId, fromDay, toDay }) {
      const rows = await db.query(
        `select v.day, d.id as dashboard_id, d.name as dashboard,
                (select (e ->> 'published')::boolean from json_array_elements(d.versions) e
                  order by (e ->> 'version')::int desc limit 1) as published,
                count(*) as views, count(distinct v.visitor_id) as unique_visitors,
                count(distinct v.user_id) as signed_in_viewers,
                count(*) filter (where v.user_id is null) as anonymous_views
           from ${t("dashboard_views")} v join ${t("dashboards")} d on d.id = v.dashboard_id
          where d.team_id = $1 and not v.editor and v.day between $2 and $3
          group by v.day, d.id, d.name, d.versions::text
          order by v.day desc, d.name collate "C", d.id collate "C"`,
        [teamId, fromDay, toDay],
      );
      return rows.map((r): DashboardUsageRow => ({
        day: r.day,
        dashboard_id: r.dashboard_id,
        dashboard: r.dashboard,
        published: r.published === true,
        views: num(r.views),
        unique_visitors: num(r.unique_visitors),
        signed_in_viewers: num(r.signed_in_viewers),
        anonymous_views: num(r.anonymous_views),
      }));
    },
    async spaceRefreshHistory({ teamId, fromDay, toDay }) {
      const rows = await db.query(
        `select d.id as dataset_id, d.name as dataset, c.name as connection, r.day, count(*) as runs,
                count(*) filter (where r.error is not null) as failures,
                sum(r.rows_processed) as rows_processed, floor(avg(r.duration_ms) + 0.5) as avg_duration_ms,
                (array_agg(r.error order by r.started_ms desc, r.seq desc) filter (where r.error is not null))[1] as last_error
           from ${t("refresh_runs")} r join (${teamDatasets(t)}) d on d.id = r.dataset_id
           left join ${t("connections")} c on c.id = d.connection_id
          where d.team_id = $1 and r.day between $2 and $3
          group by r.day, d.id, d.name, c.name
          order by r.day desc, d.name collate "C", d.id collate "C"`,
        [teamId, fromDay, toDay],
      );
      return rows.map((r): RefreshHistoryRow => ({
        dataset_id: r.dataset_id,
        dataset: r.dataset,
        connection: r.connection ?? null,
        day: r.day,
        runs: num(r.runs),
        failures: num(r.failures),
        rows_processed: num(r.rows_processed),
        avg_duration_ms: num(r.avg_duration_ms),
        last_error: r.last_error ?? null,
      }));
    },
    async spaceCreditUsage({ teamId, fromDay, toDay }) {
      const rows = await db.query(
        `select day, category, sum(credits) as credits, count(*) as uses, count(distinct user_id) as users
           from ${t("credit_usage")}
          where team_id = $1 and day between $2 and $3
          group by day, category
          order by day desc, category collate "C"`,
        [teamId, fromDay, toDay],
      );
      return rows.map((r): CreditUsageRow => ({
        day: r.day,
        category: r.category,
        credits: num(r.credits),
        uses: num(r.uses),
        users: num(r.users),
      }));
    },
    async spaceApiUsage({ teamId, fromDay, toDay }) {
      await usage.settled();
      const rows = await db.query(
        `select day, method, route, credential_kind, credential_id, credential_name, sum(calls) as calls,
                sum(errors) as errors, sum(server_errors) as server_errors,
                floor(sum(latency_sum) / sum(calls) + 0.5) as avg_latency_ms
           from ${t("api_usage")}
          where team_id = $1 and day between $2 and $3
          group by day, method, route, credential_kind, credential_id, credential_name
          order by day desc, route collate "C", method collate "C", credential_kind collate "C",
                   credential_name collate "C" nulls first, credential_id collate "C" nulls first`,
        [teamId, fromDay, toDay],
      );
      return rows.map((r): ApiUsageRow => ({
        day: r.day,
        method: r.method,
        route: r.route,
        credential_kind: r.credential_kind,
        credential_id: r.credential_id ?? null,
        credential: r.credential_name ?? null,
        calls: num(r.calls),
        errors: num(r.errors),
        server_errors: num(r.server_errors),
        avg_latency_ms: num(r.avg_latency_ms),
      }));
    },
    async spaceDatasetUsage({ teamId }) {
      await usage.settled();
      const rows = await db.query(
        `select d.id as dataset_id, d.name as dataset, d.type, c.name as connection, d.row_count,
                json_array_length(d.columns) as column_count, d.last_refreshed_at, d.updated_at,
                (select r.error from ${t("refresh_runs")} r where r.dataset_id = d.id
                  order by r.started_ms desc, r.seq desc limit 1) as last_refresh_error,
                coalesce((select json_agg(b.name order by b.name collate "C") from ${t("dashboards")} b
                           where b.team_id = d.team_id and (b.dataset_ids::jsonb) ? d.id), '[]'::json) as dashboards,
                reads.reads as api_reads, reads.last_at as last_api_read_at
           from (${teamDatasets(t)}) d
           left join ${t("connections")} c on c.id = d.connection_id
           left join ${t("dataset_reads")} reads on reads.dataset_id = d.id
          where d.team_id = $1
          order by d.name collate "C", d.id collate "C"`,
        [teamId],
      );
      return rows.map((r): DatasetUsageRow => ({
        dataset_id: r.dataset_id,
        dataset: r.dataset,
        type: r.type,
        connection: r.connection ?? null,
        row_count: num(r.row_count),
        column_count: num(r.column_count),
        last_refreshed_at: r.last_refreshed_at ?? null,
        updated_at: r.updated_at,
        last_refresh_error: r.last_refresh_error ?? null,
        dashboards: r.dashboards,
        api_reads: num(r.api_reads),
        last_api_read_at: r.last_api_read_at ?? null,
      }));
    },
    async appendRefreshRuns(runs) {
      await insertRefreshRuns(db.pool, t, runs);
    },
    async appendCreditUsage(items) {
      await insertCreditUsage(db.pool, t, items);
    },
    async recordRefreshRun(run) {
      await db.query(
        `insert into ${t("refresh_runs")} (dataset_id, started_at, started_ms, day, duration_ms, rows_processed, error) values ($1, $2, $3, $4, $5, $6, $7)`,
        [
          run.datasetId,
          run.startedAt,
          millis(run.startedAt),
          utcDay(run.startedAt),
          run.durationMs,
          run.rowsProcessed,
          run.error,
        ],
      );
    },
    recordApiCall(call) {
      // Counted in memory at once (the usage reads write pending counters first); written within USAGE_FLUSH_MS.
      usage.record(call);
      return COUNTED;
    },
    flushUsage: () => usage.settled(),
  };
}

/** What `recordApiCall` answers: the call counts for this store's reads before it returns. */
const COUNTED: Promise<void> = Promise.resolve();

/** Calls gathered before a batch is written. */
const USAGE_FLUSH_MS = 100;

/** Counters waiting at most; one more call writes them at once. */
const USAGE_PENDING_LIMIT = 10_000;

/**
 * The usage log as per-day counters, as on SQLite: a call adds to a counter
 * in memory (per day, team, route, method and credential; per dataset for
 * reads), and the counters gathered over USAGE_FLUSH_MS are added to the
 * stored ones by one statement (an UPSERT per table, atomic together), so
 * logging a read costs it no commit of its own. One batch is written at a
 * time; the figures read this instance's pending counters after writing them
 * (`settled`). Counters of a batch that fails are lost and logged: the log
 * never fails a request. Rows are upserted in key order (the order of the
 * array `json_to_recordset` reads), so two instances' batches cannot deadlock.
 */
function usageLog(db: Db, log: (message: string, error: unknown) => void) {
  const { t } = db;
  let sums = usageSums();
  // The counters and the dataset reads of a batch, upserted by one statement (atomic, one round trip and one
  // commit: no BEGIN/COMMIT around it), prepared once per connection. Both data-modifying parts always run.
  const counting = statement(
    `with counted as (
       insert into ${t("api_usage")} as u (key, day, team_id, method, route, credential_kind, credential_id, credential_name,
                                           calls, errors, server_errors, latency_sum)
       select json_build_array(day, "teamId", method, route, "credentialKind", "credentialId", "credentialName")::text,
              day, "teamId", method, route, "credentialKind", "credentialId", "credentialName", calls, errors, "serverErrors", "latencySum"
         from json_to_recordset($1) as x(day text, "teamId" text, method text, route text, "credentialKind" text,
              "credentialId" text, "credentialName" text, calls bigint, errors bigint, "serverErrors" bigint, "latencySum" double precision)
       on conflict (key) do update set calls = u.calls + excluded.calls, errors = u.errors + excluded.errors,
         server_errors = u.server_errors + excluded.server_errors, latency_sum = u.latency_sum + excluded.latency_sum),
     read as (
       insert into ${t("dataset_reads")} as r (dataset_id, reads, last_at, last_ms)
       select "datasetId", reads, "lastAt", "lastMs"
         from json_to_recordset($2) as x("datasetId" text, reads bigint, "lastAt" text, "lastMs" bigint)
       on conflict (dataset_id) do update set reads = r.reads + excluded.reads,
         last_at = case when excluded.last_ms >= r.last_ms then excluded.last_at else r.last_at end,
         last_ms = greatest(r.last_ms, excluded.last_ms))
     select 1`,
  );
  let writing: Promise<void> | null = null;
  let timer: ReturnType<typeof setTimeout> | null = null;

  const write = async () => {
    timer = null;
    const { calls, reads } = sums;
    sums = usageSums();
    // In key order (see above): the counters as they are, the reads with their dataset's id.
    const byKey = <V>(entries: Map<string, V>) => [...entries].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    const batch = byKey(calls).map(([, c]) => c);
    const datasetReads = byKey(reads).map(([datasetId, r]) => ({ datasetId, ...r }));
    if (batch.length === 0 && datasetReads.length === 0) return;
    try {
      await db.query(counting, [json(batch), json(datasetReads)]);
    } catch (error) {
      log("recording API calls failed", error);
    }
  };
  const start = () => {
    timer = null;
    writing = write().finally(() => {
      writing = null;
      if (sums.calls.size > 0 || sums.reads.size > 0) schedule();
    });
  };
  const schedule = () => {
    if (timer || writing) return;
    timer = setTimeout(start, USAGE_FLUSH_MS);
    timer.unref?.();
  };

  return {
    record(call: ApiCallRecord): void {
      sumCall(sums, call);
      if (sums.calls.size + sums.reads.size >= USAGE_PENDING_LIMIT && timer) {
        clearTimeout(timer);
        start();
      } else schedule();
    },
    /** Resolves once every call recorded so far is written (or its batch failed). */
    async settled(): Promise<void> {
      while (writing || timer) {
        if (timer) {
          clearTimeout(timer);
          start();
        }
        await writing;
      }
    },
  };
}

/** A pool or a client in a transaction. */
type Queryable = Pick<PoolClient, "query">;

export async function insertRefreshRuns(client: Queryable, t: Db["t"], runs: readonly RefreshRun[]): Promise<void> {
  if (runs.length === 0) return;
  await client.query(
    `insert into ${t("refresh_runs")} (dataset_id, started_at, started_ms, day, duration_ms, rows_processed, error)
     select "datasetId", "startedAt", ms, day, "durationMs", "rowsProcessed", error from json_to_recordset($1)
       as x("datasetId" text, "startedAt" text, ms bigint, day text, "durationMs" double precision, "rowsProcessed" bigint, error text)`,
    [json(runs.map((r) => ({ ...r, ms: millis(r.startedAt), day: utcDay(r.startedAt) })))],
  );
}

export async function insertCreditUsage(client: Queryable, t: Db["t"], items: readonly CreditUsage[]): Promise<void> {
  if (items.length === 0) return;
  await client.query(
    `insert into ${t("credit_usage")} (team_id, at, day, category, credits, user_id)
     select "teamId", at, day, category, credits, "userId" from json_to_recordset($1)
       as x("teamId" text, at text, day text, category text, credits double precision, "userId" text)`,
    [json(items.map((c) => ({ ...c, day: utcDay(c.at) })))],
  );
}

/** The datasets and input tables of every team, with the fields the aggregates need. */
function teamDatasets(t: Db["t"]): string {
  return `select id, team_id, name, type, connection_id, columns, row_count, last_refreshed_at, updated_at from ${t("datasets")}
    union all
    select id, team_id, name, 'input_table', null, columns, row_count, null, updated_at from ${t("input_tables")}`;
}
