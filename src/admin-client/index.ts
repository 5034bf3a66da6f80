export {
  createAdminClient,
  type AdminClient,
  type AdminClientOptions,
  type ChangeRequestOptions,
  type IterateOptions,
  type ListRequestOptions,
  type UploadRequestOptions,
} from "./client.js";
export type { EncodedRows, RowsUpload, UploadSent } from "./rows.js";
// The admin functions' own types: what the client takes and answers.
export type { ConnectionInput, ConnectionView, DatasetInput, SigningSecretInput } from "../admin/catalog.js";
export type { SignatureScheme, WebhookSignature } from "../domain/signature-schemes.js";
export type { ChangeOptions, ListOptions, ListPage, Put } from "../admin/change.js";
export type { RefreshResult } from "../admin/connections.js";
export type { DashboardVersionInput } from "../admin/dashboards.js";
export type { AuditEventInput, CreditUsageInput, DashboardViewInput, RefreshRunInput } from "../admin/history.js";
export type {
  BusinessInput,
  MembershipInput,
  SessionInfo,
  SessionInput,
  TeamInput,
  UserInput,
} from "../admin/identity.js";
export type { ApiKeyInfo } from "../admin/keys.js";
export type { TableInput } from "../admin/tables.js";
export type {
  Business,
  DashboardRecord,
  DatasetRecord,
  Membership,
  Row,
  TableRecord,
  Team,
  UploadOrConnectionDataset,
  User,
} from "../domain/model.js";
// The transport is dataport/client's: its errors, hooks and options are the same.
export {
  AuthenticationError,
  BadRequestError,
  ConflictError,
  DataportError,
  NetworkError,
  NotFoundError,
  PermissionDeniedError,
  RateLimitError,
  ServerError,
  TimeoutError,
  UnprocessableEntityError,
  type DataportErrorCode,
  type ErrorCode,
  type ErrorEnvelope,
  type RateLimitInfo,
  type ResponseMeta,
} from "../client/errors.js";
export { collect, type CollectOptions, type Paged } from "../client/paging.js";
export type { RequestOptions } from "../client/client.js";
export type { FetchLike, RequestInfo, RetryOptions, TransportConfig } from "../client/transport.js";
