import { widenColumns } from "../domain/columns.js";
import { endpointFromConnection } from "../domain/webhook-config.js";
import type { Column } from "../domain/model.js";
import type { WebhookEndpoint, WebhookStore } from "../ports/storage/webhooks.js";
import { makeRoomForDeliveries } from "./dataset-rows.js";
import { type Db, json, num } from "./db.js";

export function postgresWebhooks(db: Db): WebhookStore {
  const { t } = db;
  const endpointSql = `select c.id, c.team_id, c.name, c.config,
      (select d.id from ${t("datasets")} d where d.connection_id = c.id order by d.id collate "C" limit 1) as dataset_id
    from ${t("connections")} c`;

  return {
    async getWebhookEndpoint(endpointId) {
      const [row] = await db.query<EndpointRow>(`${endpointSql} where c.endpoint_id = $1 and c.type = 'webhook'`, [endpointId]);
      return row ? toEndpoint(row) : null;
    },
    async ingestWebhookRow(input) {
      return db.transaction(async (client) => {
        // Locking the dataset row serialises ingests of one dataset (across
        // instances too): positions stay contiguous, columns merge without
        // lost updates, and the window moves as one.
        const locked = await client.query<{ first_pos: string; next_pos: string; stage_from: string | null; columns: Column[] }>(
          `select first_pos, next_pos, stage_from, columns from ${t("datasets")} where id = $1 for update`,
          [input.datasetId],
        );
        const dataset = locked.rows[0];
        if (!dataset) throw new Error(`unknown dataset ${input.datasetId}`);
        const first = num(dataset.first_pos);
        const next = num(dataset.next_pos);
        if (input.dedupKey !== null) {
          const held = await client.query<{ pos: string; id: string | null }>(
            `select pos, row ->> '_id' as id from ${t("dataset_rows")} where dataset_id = $1 and dedup_key = $2`,
            [input.datasetId, input.dedupKey],
          );
          const holder = held.rows[0];
          if (holder && num(holder.pos) >= first) return { id: holder.id ?? "", duplicate: true };
          // Below the window (trimmed or replaced, not deleted yet): forgotten, and the key goes with its row.
          if (holder) await client.query(`delete from ${t("dataset_rows")} where dataset_id = $1 and pos = $2`, [input.datasetId, holder.pos]);
        }
        // A bulk write staging right above the window: move its rows out of the way (rare).
        let stageFrom = dataset.stage_from === null ? null : num(dataset.stage_from);
        if (stageFrom !== null && next >= stageFrom) stageFrom = await makeRoomForDeliveries(client, t, input.datasetId, 1);
        await client.query(`insert into ${t("dataset_rows")} (dataset_id, pos, row, dedup_key) values ($1, $2, $3, $4)`, [
          input.datasetId,
          next,
          json(input.row),
          input.dedupKey,
        ]);
        const keepFrom = Math.max(first, next + 1 - Math.max(1, Math.floor(input.retainRows)));
        if (keepFrom > first) {
          await client.query(`delete from ${t("dataset_rows")} where dataset_id = $1 and pos >= $2 and pos < $3`, [input.datasetId, first, keepFrom]);
        }
        // The schema only changes when a payload brings a new column or type.
        const widened = widenColumns(dataset.columns, input.columns);
        await client.query(
          `update ${t("datasets")} set first_pos = $2, next_pos = $3, row_count = $3::bigint - $2::bigint, swept_below = greatest(swept_below, $2),
             stage_from = $4, columns = coalesce($5, columns), updated_at = $6
           where id = $1`,
          [input.datasetId, keepFrom, next + 1, stageFrom, widened === null ? null : json(widened), input.receivedAt],
        );
        return { id: String(input.row._id ?? ""), duplicate: false };
      });
    },
    async updateWebhookSettings(connectionId, settings) {
      return db.transaction(async (client) => {
        const found = await client.query<{ config: Record<string, unknown> }>(
          `select config from ${t("connections")} where id = $1 and type = 'webhook' for update`,
          [connectionId],
        );
        const current = found.rows[0];
        if (!current) return null;
        const config = { ...current.config };
        if (settings.signingSecret !== undefined) config.signingSecret = settings.signingSecret;
        if (settings.retainRows !== undefined) config.retainRows = settings.retainRows;
        await client.query(`update ${t("connections")} set config = $2 where id = $1`, [connectionId, json(config)]);
        const result = await client.query<EndpointRow>(`${endpointSql} where c.id = $1`, [connectionId]);
        const endpoint = result.rows[0] ? toEndpoint(result.rows[0]) : null;
        if (endpoint && typeof settings.retainRows === "number" && endpoint.datasetId) {
          // Lowering retention trims at once, in this transaction: the window's start moves up.
          await client.query(
            `update ${t("datasets")} set first_pos = greatest(first_pos, next_pos - $2::bigint),
               row_count = next_pos - greatest(first_pos, next_pos - $2::bigint)
             where id = $1`,
            [endpoint.datasetId, Math.max(1, Math.floor(settings.retainRows))],
          );
          await client.query(
            `delete from ${t("dataset_rows")} where dataset_id = $1 and pos < (select first_pos from ${t("datasets")} where id = $1)`,
            [endpoint.datasetId],
          );
          await client.query(`update ${t("datasets")} set swept_below = first_pos where id = $1`, [endpoint.datasetId]);
        }
        return endpoint;
      });
    },
    async createWebhookConnection({ connection, endpoint, dataset }) {
      return db.transaction(async (client) => {
        const table = await client.query(`select 1 from ${t("input_tables")} where id = $1`, [dataset.id]);
        if (table.rowCount) throw new Error(`dataset ${dataset.id} exists`);
        const config = { endpointId: endpoint.endpointId, signingSecret: endpoint.signingSecret, retainRows: endpoint.retainRows };
        await client.query(
          `insert into ${t("connections")} (id, team_id, name, type, config, created_at, endpoint_id) values ($1, $2, $3, 'webhook', $4, $5, $6)`,
          [connection.id, connection.teamId, connection.name, json(config), connection.createdAt, endpoint.endpointId],
        );
        await client.query(
          `insert into ${t("datasets")} (id, team_id, name, type, connection_id, source, columns, row_count, last_refreshed_at, updated_at)
           values ($1, $2, $3, 'connection', $4, null, '[]', 0, null, $5)`,
          [dataset.id, connection.teamId, dataset.name, connection.id, connection.createdAt],
        );
        return {
          connectionId: connection.id,
          teamId: connection.teamId,
          name: connection.name,
          datasetId: dataset.id,
          endpointId: endpoint.endpointId,
          signingSecret: endpoint.signingSecret,
          retainRows: endpoint.retainRows,
        };
      });
    },
  };
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
