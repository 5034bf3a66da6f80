export {
  createDataApi,
  DEFAULT_SETTINGS,
  type DataApi,
  type DataApiOptions,
  type RequestContext,
} from "./server/api.js";
export { ApiError, type ErrorCode } from "./base/api-error.js";
export {
  createAdmin,
  type Admin,
  type ApiKeyInfo,
  type AuditAdmin,
  type AuditEventInput,
  type BusinessInput,
  type CatalogAdmin,
  type ChangeOptions,
  type ConnectionAdmin,
  type ConnectionInput,
  type ConnectionView,
  type CreditUsageInput,
  type DashboardAdmin,
  type DashboardVersionInput,
  type DashboardViewInput,
  type DatasetInput,
  type HistoryAdmin,
  type IdentityAdmin,
  type KeyAdmin,
  type ListOptions,
  type ListPage,
  type MembershipInput,
  type Put,
  type RefreshResult,
  type RefreshRunInput,
  type RowsAdmin,
  type RowsWriteMode,
  type SessionInfo,
  type SessionInput,
  type SigningSecretInput,
  type StreamBody,
  type TableAdmin,
  type TableInput,
  type TeamInput,
  type UploadOptions,
  type UploadProgress,
  type UploadProgressOptions,
  type UserInput,
  type WebhookAdmin,
  type WebhookConnectionInfo,
  type WebhookSecretOptions,
} from "./admin/index.js";
export { parseFixture, readFixtureFile, FixtureError, type FixtureFs } from "./fixture/load.js";
export type { SeedSpace } from "./domain/seed-space.js";
export type { ApiRequest, ApiReply } from "./http/types.js";
export type { HeaderReader } from "./base/headers.js";
export type * from "./domain/model.js";
export type { DayWindow } from "./domain/days.js";
export type { WebhookEndpoint, WebhookSettings } from "./domain/webhook-config.js";
export type * from "./ports/storage.js";
export type { Cache } from "./ports/cache.js";
export type { Logger, RequestLogLine, ErrorLogFields } from "./ports/logger.js";
export type { Metrics, CacheResult, UpstreamOutcome, StorageOutcome } from "./ports/metrics.js";
export { createJsonLogger, type JsonLoggerOptions } from "./server/logging.js";
export type { Clock } from "./base/clock.js";
export type { RateLimiter, RateLimit, RateDecision } from "./ports/rate-limiter.js";
export type { SessionAuthenticator } from "./ports/session.js";
export type {
  Connector,
  ConnectorQuery,
  ConnectorResult,
  ConnectorRegistry,
  GuardSettings,
} from "./ports/connector.js";
export { InvalidQueryError, UpstreamThrottledError, UpstreamUnavailableError } from "./ports/connector.js";
export { memoryConnector } from "./connectors/memory.js";
export { postgresConnector, type PostgresConnectorOptions } from "./connectors/postgres.js";
export { arcgisConnector, type ArcgisConnectorOptions } from "./connectors/arcgis.js";
export type { ApiSettings } from "./context/settings.js";
export type { Ports } from "./context/ports.js";
export type { Operations } from "./context/handler.js";
export type { TableSchemas, ValidationIssue } from "./domain/validation.js";
export { SIGNATURE_SCHEMES, type SignatureScheme, type WebhookSignature } from "./domain/signature-schemes.js";
export type { SignatureRefusal, VerifiedBy } from "./domain/signatures.js";
export { endpointFromConnection, newWebhookConfig, webhookConfigWith } from "./domain/webhook-config.js";
export { generateApiKeyToken, isWellFormedApiKeyToken } from "./domain/tokens.js";
export { createOpenApiDocument, type OpenApiDocument, type OpenApiOptions } from "./routes/openapi-document.js";
export { mountStorage, readOnlyArea, type HostAreas, type SuppliedArea } from "./storage/mount.js";
export { headBeforePage } from "./storage/change-feeds.js";
export { STORAGE_AREAS } from "./ports/storage.js";
