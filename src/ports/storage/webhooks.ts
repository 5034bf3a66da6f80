import type { Column, Row } from "../../domain/model.js";
import type { WebhookSignature } from "../../domain/signature-schemes.js";
import type { WebhookEndpoint, WebhookSettings } from "../../domain/webhook-config.js";
import type {
  DeliveryCount,
  DeliveryLogEntry,
  DeliveryLogInput,
  DeliveryLogQuery,
  InboxKeep,
  RefusalLogInput,
} from "../../domain/webhook-inbox.js";

/**
 * Webhook endpoints and the rows delivered to them (de-duplication, retention).
 * A fault of the store answers 503 `storage_unavailable` (the fault clause on `Storage`).
 */
export interface WebhookStore {
  /** The endpoint with this path segment, or null. Called on every delivery: keep it an indexed lookup. */
  getWebhookEndpoint(endpointId: string): Promise<WebhookEndpoint | null>;
  /**
   * Store one delivery. MUST be ONE atomic operation (a transaction or a
   * single statement), because it is the whole of de-duplication:
   *
   * - when `dedupKey` is non-null and a retained row of this dataset was
   *   stored with that key, nothing is written and that row's `_id` is
   *   returned with `duplicate: true` — 20 concurrent calls with one key
   *   store exactly one row and all return its `_id`;
   * - otherwise `row` is appended after every retained row (its `_id` is in
   *   `row`; read order is arrival order) and `{ id: row._id, duplicate: false }`
   *   is returned;
   * - the dataset's columns become `widenColumns(current, columns)` (see
   *   `src/domain/columns.ts`: new names appended, types widened, at most
   *   MAX_DATASET_COLUMNS; the schema never narrows), `rowCount` becomes the
   *   retained row count and `updatedAt` becomes `receivedAt`;
   * - the oldest rows beyond `retainRows` (>= 1) are deleted with their dedup
   *   keys, so a key is remembered exactly as long as its row is retained.
   *
   * `row` is flat: every value is a string, number, boolean or null, and
   * keys such as `__proto__` are ordinary column names (it is a
   * null-prototype object). `columns` are the row's names and types, in
   * row order. Dedup keys are at most 200 characters. Resolves only once the
   * row is durable. Throws when the dataset does not exist.
   */
  ingestWebhookRow(input: WebhookDelivery): Promise<WebhookReceipt>;
  /**
   * Change the secrets, the retention and/or the signature scheme of a
   * webhook connection (see `WebhookSettings`) in ONE atomic write: the
   * config becomes `webhookConfigWith(current config, settings)`
   * (src/domain/webhook-config.ts), so two rotations at once each keep the
   * secret the other replaced or its own, never a mix. Lowering `retainRows`
   * below the stored row count trims the oldest rows (and their dedup keys)
   * at once, atomically with the change. Returns the updated endpoint, or
   * null when no webhook connection has this id.
   */
  updateWebhookSettings(connectionId: string, settings: WebhookSettings): Promise<WebhookEndpoint | null>;
  /**
   * Create a webhook connection (type `webhook`, config
   * `newWebhookConfig(endpoint)`: `{ endpointId, signingSecret, retainRows }`
   * and `signature` when given) and its empty dataset (type
   * `connection`, no source, no columns, rowCount 0, lastRefreshedAt null,
   * updatedAt = createdAt) in one transaction. Throws when the connection id,
   * dataset id or endpointId is already taken.
   */
  createWebhookConnection(input: {
    connection: { id: string; teamId: string; name: string; createdAt: string };
    endpoint: {
      endpointId: string;
      signingSecret: string | null;
      retainRows: number | null;
      signature?: WebhookSignature | null;
    };
    dataset: { id: string; name: string };
  }): Promise<WebhookEndpoint>;

  /**
   * The delivery log (webhook-inbox.md). Append refused deliveries (outcome
   * `refused`, their reason and status) and add `counts` to the daily
   * counters (`DeliveryCount`: n added to the counter of its connection,
   * day and kind), in one write. Then the log of each connection named
   * keeps only what `keep` says (the newest `keep.size` entries, none
   * received before `keep.afterMs`); a store MAY trim lazily (every so many
   * writes, holding at most 128 entries per connection past the bounds) as
   * long as its reads apply `keep` exactly. Entries are never
   * updated. Entries of connections that are gone are still written (they
   * are unreachable and trimmed by age).
   */
  recordWebhookDeliveries(batch: {
    refusals: readonly RefusalLogInput[];
    counts: readonly DeliveryCount[];
    keep: InboxKeep;
  }): Promise<void>;
  /**
   * An endpoint's log entries matching `query`, at most `query.limit`,
   * newest (highest `seq`) or oldest first, within `query.keep`. `seq`
   * increases with each entry appended for a connection, across instances
   * sharing the store.
   */
  listWebhookDeliveries(connectionId: string, query: DeliveryLogQuery): Promise<DeliveryLogEntry[]>;
  /** One entry of the connection's log (within `keep`), or null. */
  getWebhookDelivery(connectionId: string, deliveryId: string, keep: InboxKeep): Promise<DeliveryLogEntry | null>;
  /**
   * The daily counters of the team's connections (`connection`: the
   * connection's name) whose day is within the window, in any order.
   * Counters of deleted connections are not answered.
   */
  webhookDeliveryCounts(query: {
    teamId: string;
    fromDay: string;
    toDay: string;
  }): Promise<Array<DeliveryCount & { connection: string }>>;
}

/**
 * The log entry of a delivery handed to `ingestWebhookRow`: appended in the
 * same commit as the delivery (its outcome `stored` or `duplicate`, status
 * 200, `rowId` the receipt's id), its counter moved by one, the connection's
 * log then kept to `keep` (as `recordWebhookDeliveries`).
 */
export interface IngestLog extends DeliveryLogInput {
  keep: InboxKeep;
}

/** One delivery as the receiver hands it to `ingestWebhookRow`. */
export interface WebhookDelivery {
  datasetId: string;
  dedupKey: string | null;
  row: Row;
  columns: Column[];
  retainRows: number;
  receivedAt: string;
  /**
   * The delivery's log entry, when the log records it (webhook-inbox.md); `receivedAt` is the
   * delivery's. The caller hands it over: it does not change it after the call (a store may keep it).
   */
  log?: IngestLog | undefined;
}

/** What `ingestWebhookRow` answers: the row's id (the first delivery's, for a duplicate). */
export interface WebhookReceipt {
  id: string;
  duplicate: boolean;
}
