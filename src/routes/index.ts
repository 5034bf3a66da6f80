import { arcgisConnector } from "../connectors/arcgis.js";
import { memoryConnector } from "../connectors/memory.js";
import { postgresConnector } from "../connectors/postgres.js";
import type { ApiSettings } from "../context/settings.js";
import type { ConnectorRegistry } from "../ports/connector.js";
import type { RouteDef } from "./route-def.js";
import { adminRoutes } from "./admin.js";
import { auditRoutes } from "./audit.js";
import { changeRoutes } from "./changes.js";
import { connectionRoutes } from "./connections.js";
import { dashboardRoutes } from "./dashboards.js";
import { datasetRoutes } from "./datasets.js";
import { docsRoutes } from "./docs.js";
import { identityRoutes } from "./identity.js";
import { adminOpenapiRoutes, openapiRoutes } from "./openapi.js";
import { operationsRoutes } from "./operations.js";
import { tableRoutes } from "./tables.js";
import { webhookReceiverRoutes } from "./webhooks.js";

/**
 * The route table. Each mount is a prefix; a future `/api/v2` mounts its
 * own list beside `/api/v1`. The webhook receiver has no version prefix.
 */
export const apiV1Routes: RouteDef[] = [
  ...identityRoutes,
  ...datasetRoutes,
  ...connectionRoutes,
  ...dashboardRoutes,
  ...tableRoutes,
  ...changeRoutes,
  ...auditRoutes,
  ...openapiRoutes(() => mounts),
  ...docsRoutes,
];

export const webhookRoutes: RouteDef[] = [...webhookReceiverRoutes];

export const mounts: ReadonlyArray<{ base: string; routes: readonly RouteDef[] }> = [
  { base: "/api/v1", routes: apiV1Routes },
  { base: "/api", routes: [...webhookRoutes, ...operationsRoutes] },
];

/** The admin HTTP API, mounted only when an admin token is configured (see `createDataApi`). */
export const adminMount: { base: string; routes: readonly RouteDef[] } = {
  base: "/api/admin/v1",
  routes: [...adminRoutes, ...adminOpenapiRoutes(() => adminMount)],
};

export { WEBHOOK_ROUTE } from "./webhooks.js";

/** Connectors available without configuration (the upstream address rule from the settings). */
export function defaultConnectors(settings: Pick<ApiSettings, "allowPrivateUpstreams">): ConnectorRegistry {
  const allowPrivateAddresses = settings.allowPrivateUpstreams;
  return {
    memory: memoryConnector(),
    postgres: postgresConnector({ allowPrivateAddresses }),
    arcgis: arcgisConnector({ allowPrivateAddresses }),
  };
}
