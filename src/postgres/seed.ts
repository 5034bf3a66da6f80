import type { PoolClient } from "pg";
import type { SeedSpace } from "../domain/seed-space.js";
import { insertDashboardViews, upsertDashboard } from "./dashboards.js";
import { insertCreditUsage, insertRefreshRuns } from "./usage.js";
import { appendAudit } from "./audit.js";
import { webhookEndpointId } from "./catalog.js";
import { insertDatasetRows } from "./rows.js";
import { type Db, json } from "./db.js";
import { apiKeyParams, millis } from "./identity.js";
import { syncDatasetValues } from "./dataset-values.js";
import { syncDatasetIndexes, syncTableIndexes } from "./row-indexes.js";

/**
 * Load a space into an empty store in one transaction. The `seeded` marker
 * is claimed first with ON CONFLICT: of instances seeding at once, one loads
 * and the others wait for it and then keep what it loaded.
 */
export async function seedSpace(db: Db, space: SeedSpace): Promise<"loaded" | "kept"> {
  const { t } = db;
  const outcome = await db.transaction(async (client) => {
    const claimed = await client.query(
      `insert into ${t("meta")} (key, value) values ('seeded', now()::text) on conflict (key) do nothing returning key`,
    );
    if (claimed.rowCount === 0) return "kept";
    await load(client, t, space);
    for (const d of space.datasets) if (d.columnsDeclared === true) await syncDatasetValues(client, t, d.id, d.columns);
    return "loaded";
  });
  // Row indexes of declared columns, built after the commit (CONCURRENTLY, outside any transaction).
  if (outcome === "loaded") {
    for (const d of space.datasets)
      if (d.columnsDeclared === true)
        await syncDatasetIndexes(
          db,
          d.id,
          d.columns.map((c) => c.name),
        );
    for (const table of space.tables)
      await syncTableIndexes(
        db,
        table.id,
        table.columns.map((c) => c.name),
      );
  }
  return outcome;
}

/** Insert `items` through one `json_to_recordset` statement. */
async function bulk(client: PoolClient, sql: string, items: readonly unknown[], ...extra: unknown[]): Promise<void> {
  if (items.length === 0) return;
  await client.query(sql, [json(items), ...extra]);
}

async function load(client: PoolClient, t: Db["t"], space: SeedSpace): Promise<void> {
  await bulk(
    client,
    `insert into ${t("businesses")} (id, name) select id, name from json_to_recordset($1) as x(id text, name text)`,
    space.businesses,
  );
  await bulk(
    client,
    `insert into ${t("teams")} (id, name, plan, business_id, is_personal)
     select id, name, plan, "businessId", "isPersonal" from json_to_recordset($1) as x(id text, name text, plan text, "businessId" text, "isPersonal" boolean)`,
    space.teams,
  );
  await bulk(
    client,
    `insert into ${t("users")} (id, email, name, business_admin)
     select id, email, name, "businessAdmin" from json_to_recordset($1) as x(id text, email text, name text, "businessAdmin" boolean)`,
    space.users,
  );
  await bulk(
    client,
    `insert into ${t("memberships")} (user_id, team_id, role)
     select "userId", "teamId", role from json_to_recordset($1) as x("userId" text, "teamId" text, role text)`,
    space.memberships,
  );
  await bulk(
    client,
    `insert into ${t("sessions")} (id, token_hash, user_id, expires_at, expires_ms)
     select id, "tokenHash", "userId", "expiresAt", "expiresMs" from json_to_recordset($1)
       as x(id text, "tokenHash" text, "userId" text, "expiresAt" text, "expiresMs" bigint)`,
    space.sessions.map((s) => ({ ...s, expiresMs: s.expiresAt === null ? null : millis(s.expiresAt) })),
  );
  for (const key of space.apiKeys) {
    await client.query(
      `insert into ${t("api_keys")} (id, name, team_id, token_hash, created_by, scopes, allowlist, created_at, revoked_at, created_ms)
       values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
      apiKeyParams(key),
    );
  }
  for (const c of space.connections) {
    await client.query(
      `insert into ${t("connections")} (id, team_id, name, type, config, created_at, endpoint_id) values ($1, $2, $3, $4, $5, $6, $7)`,
      [c.id, c.teamId, c.name, c.type, json(c.config), c.createdAt, webhookEndpointId(c)],
    );
  }
  for (const { rows, ...d } of space.datasets) {
    await client.query(
      `insert into ${t("datasets")} (id, team_id, name, type, connection_id, source, columns, row_count, last_refreshed_at, updated_at, first_pos, next_pos)
       values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, 1, $8::bigint + 1)`,
      [
        d.id,
        d.teamId,
        d.name,
        d.type,
        d.connectionId,
        d.source,
        json(d.columns),
        rows.length,
        d.lastRefreshedAt,
        d.updatedAt,
      ],
    );
    await insertDatasetRows(client, t, d.id, rows, 1);
  }
  for (const { rows, ...table } of space.tables) {
    await client.query(
      `insert into ${t("input_tables")} (id, team_id, name, columns, row_count, updated_at) values ($1, $2, $3, $4, $5, $6)`,
      [table.id, table.teamId, table.name, json(table.columns), rows.length, table.updatedAt],
    );
    const items = rows.map((row, i) => ({
      rowId: String(row._id),
      pos: i + 1,
      row,
      updatedMs: millis(String(row._updatedAt ?? row._createdAt ?? "")),
    }));
    await bulk(
      client,
      `insert into ${t("table_rows")} (table_id, row_id, pos, row, updated_ms)
       select $2, "rowId", pos, row, "updatedMs" from json_to_recordset($1) as x("rowId" text, pos bigint, row json, "updatedMs" bigint)`,
      items,
      table.id,
    );
  }
  // Rows inserted later take positions after the fixture's.
  const positions = t("table_row_positions");
  await client.query(`select setval($1::regclass, max(pos)) from ${t("table_rows")} having count(*) > 0`, [positions]);
  for (const dashboard of space.dashboards) await upsertDashboard(client, t, dashboard);
  await insertDashboardViews(client, t, space.dashboardViews);
  await insertRefreshRuns(client, t, space.refreshRuns);
  await insertCreditUsage(client, t, space.creditUsage);
  // Fixture events are stored in file order, all at the start of time, one
  // after the other, so their positions keep the file order.
  for (const event of space.auditEvents) await appendAudit(client, t, event, 0);
}
