import type { z } from "zod";
import { randomId } from "../domain/crypto.js";
import {
  type Column,
  type ConnectionRecord,
  type DatasetRecord,
  isUploadOrConnection,
  type Row,
  type UploadOrConnectionDataset,
} from "../domain/model.js";
import { ApiError, notFound } from "../base/api-error.js";
import { assertWritable } from "../storage/mount.js";
import {
  type AdminDeps,
  actorFor,
  type ChangeOptions,
  checkId,
  isoNow,
  type ListOptions,
  type ListPage,
  listPage,
  type Put,
  putAction,
  recordChange,
  requireRef,
  serialised,
} from "./change.js";
import { isoTime } from "../domain/time.js";
import { PREVIOUS_SECRET, PREVIOUS_SECRET_UNTIL, withoutStalePreviousSecret } from "../domain/webhook-config.js";
import type { WebhookSignature } from "../domain/signature-schemes.js";
import { checkConnectionConfig } from "./connection-config.js";
import {
  checkDeclaredColumns,
  checkDropColumns,
  columnsChanged,
  dropRefused,
  reshapeDatasetRow,
  valuesLost,
} from "./reshape.js";
import { connectionBody, datasetBody, parseBody, signingSecretBody, validationFailed } from "./schemas.js";

export type ConnectionInput = z.input<typeof connectionBody>;
type ConnectionBody = z.output<typeof connectionBody>;
export type DatasetInput = z.input<typeof datasetBody>;
/** `{ secret, overlapSeconds? }`: a webhook connection's new signing secret (null removes every secret). */
export type SigningSecretInput = z.input<typeof signingSecretBody>;

/**
 * A connection as the admin API answers it: secrets are never echoed (a
 * webhook's signing secret becomes `signed`, a URL's password is masked);
 * a webhook connection also answers its `endpointUrl`, and while a
 * rotation's overlap lasts `config.previousSecretValidUntil`.
 */
export interface ConnectionView extends ConnectionRecord {
  endpointUrl?: string;
}

/** Connections, datasets and their rows. */
export interface CatalogAdmin {
  /**
   * Create or replace a connection. Its config is checked by type (SSRF
   * rules for upstream URLs) before anything is stored. A `webhook`
   * connection gets its dataset (`ds_<id>`) and, unless the config names
   * one, a random endpoint id; replacing it keeps its endpoint id and rows.
   * Team and type are fixed once created.
   */
  putConnection(id: string, input: ConnectionInput, options?: ChangeOptions): Promise<Put<ConnectionView>>;
  getConnection(id: string): Promise<ConnectionView>;
  listConnections(options?: ListOptions): Promise<ListPage<ConnectionView>>;
  /** Its datasets and webhook endpoint go with it. */
  deleteConnection(id: string, options?: ChangeOptions): Promise<void>;
  /**
   * A webhook connection's signing secret; null removes every secret. The
   * next delivery is checked against it, and with `overlapSeconds` (at most
   * 7 days) also against the secret it replaces until the overlap ends
   * (`config.previousSecretValidUntil` of the answer; the audit event names it).
   */
  setSigningSecret(id: string, input: SigningSecretInput, options?: ChangeOptions): Promise<ConnectionView>;
  /** Create or replace an upload or connection dataset (its rows are kept; see the row operations). */
  putDataset(id: string, input: DatasetInput, options?: ChangeOptions): Promise<Put<UploadOrConnectionDataset>>;
  getDataset(id: string): Promise<UploadOrConnectionDataset>;
  listDatasets(options?: ListOptions): Promise<ListPage<UploadOrConnectionDataset>>;
  deleteDataset(id: string, options?: ChangeOptions): Promise<void>;
}

export function catalogAdmin(deps: AdminDeps): CatalogAdmin {
  const { storage, connectors } = deps.ports;
  const { settings } = deps;

  function view(connection: ConnectionRecord): ConnectionView {
    const config = { ...connection.config };
    if (connection.type === "webhook") {
      const signed = typeof config.signingSecret === "string" && config.signingSecret !== "";
      delete config.signingSecret;
      delete config[PREVIOUS_SECRET];
      // The overlap's end is shown while it lasts.
      const until = config[PREVIOUS_SECRET_UNTIL];
      if (!signed || typeof until !== "string" || !(Date.parse(until) > deps.ports.clock.now()))
        delete config[PREVIOUS_SECRET_UNTIL];
      config.signed = signed;
      const endpointUrl = `${settings.appUrl}/api/webhooks/${encodeURIComponent(String(config.endpointId))}`;
      return { ...connection, config, endpointUrl };
    }
    if (typeof config.url === "string") config.url = maskPassword(config.url);
    return { ...connection, config };
  }

  async function existingConnection(id: string): Promise<ConnectionRecord> {
    const connection = await storage.catalog.getConnection(id);
    if (!connection) throw notFound("connection");
    return connection;
  }

  /**
   * Create a webhook connection with its endpoint and dataset. null when
   * another instance created the id meanwhile (the put then replaces it);
   * 422 when the endpoint id is taken.
   */
  async function createWebhook(id: string, body: ConnectionBody): Promise<ConnectionRecord | null> {
    const endpointId = typeof body.config.endpointId === "string" ? body.config.endpointId : randomId("whk_", 32);
    const endpointTaken = () => validationFailed("$.config.endpointId", "another connection has this endpoint id");
    const holder = await storage.webhooks.getWebhookEndpoint(endpointId);
    if (holder) {
      if (holder.connectionId === id) return null;
      throw endpointTaken();
    }
    if (await storage.catalog.getDataset(`ds_${id}`)) {
      // Made with the connection by a racing put that won, or another dataset that holds the id.
      if (await storage.catalog.getConnection(id)) return null;
      throw new ApiError(
        409,
        "conflict",
        `dataset ds_${id} already exists; the webhook connection's dataset needs that id`,
      );
    }
    try {
      await storage.webhooks.createWebhookConnection({
        connection: { id, teamId: body.teamId, name: body.name, createdAt: body.createdAt ?? isoNow(deps) },
        endpoint: {
          endpointId,
          signingSecret: typeof body.config.signingSecret === "string" ? body.config.signingSecret : null,
          retainRows: typeof body.config.retainRows === "number" ? body.config.retainRows : null,
          signature: (body.config.signature as WebhookSignature | null | undefined) ?? null,
        },
        dataset: { id: `ds_${id}`, name: body.name },
      });
    } catch (error) {
      // A racing put won: the store refused a second row with one of these keys.
      if (await storage.catalog.getConnection(id)) return null;
      if (await storage.webhooks.getWebhookEndpoint(endpointId)) throw endpointTaken();
      throw error;
    }
    return (await storage.catalog.getConnection(id))!;
  }

  /**
   * Replace a connection (create one of another type). A webhook's config is
   * merged into the stored one: a field the body omits is kept, an explicit
   * null removes it (admin-api.md, Revision 2); its endpoint id cannot be
   * removed, only changed.
   */
  async function replaceConnection(
    id: string,
    body: ConnectionBody,
    current: ConnectionRecord | null,
  ): Promise<{ created: boolean; stored: ConnectionRecord; details: Record<string, unknown> | undefined }> {
    if (current && current.teamId !== body.teamId)
      throw validationFailed("$.teamId", "a connection cannot move to another team");
    if (current && current.type !== body.type)
      throw validationFailed("$.type", "a connection's type cannot change; delete it and create another");
    let config = { ...body.config };
    let details: Record<string, unknown> | undefined;
    if (body.type === "webhook" && current) {
      if (body.config.endpointId === null)
        throw validationFailed(
          "$.config.endpointId",
          "a webhook connection keeps an endpoint id; send a new one or omit it",
        );
      config = { ...current.config };
      for (const [key, value] of Object.entries(body.config)) {
        if (value === null) delete config[key];
        else config[key] = value;
      }
      config = withoutStalePreviousSecret(current.config, config);
      if (config.endpointId !== current.config.endpointId) {
        const taken = await storage.webhooks.getWebhookEndpoint(String(config.endpointId));
        if (taken && taken.connectionId !== id)
          throw validationFailed("$.config.endpointId", "another connection has this endpoint id");
      }
      const before = current.config.signingSecret;
      const after = config.signingSecret;
      if (before !== after) details = { signingSecret: typeof after === "string" ? "set" : "removed" };
    }
    const stored: ConnectionRecord = {
      id,
      teamId: body.teamId,
      name: body.name,
      type: body.type,
      config,
      createdAt: body.createdAt ?? current?.createdAt ?? isoNow(deps),
    };
    const created = (await storage.catalog.putConnection(stored)) === "created";
    return { created, stored, details };
  }

  /**
   * The stored rows rewritten under newly declared columns, in one atomic
   * replace that reads them as it writes (never all in memory); a value that
   * does not convert, or a value in a column left out and not listed in
   * `dropColumns`, refuses it (409) and the rows stay as they were.
   */
  async function reshapeDatasetRows(
    id: string,
    columns: Column[],
    dropColumns: readonly string[],
    updatedAt: string,
  ): Promise<void> {
    const reshape = reshapeDatasetRow(columns);
    const lose = valuesLost(columns, dropColumns, false);
    const page = await storage.rows.readDatasetRows(id, { offset: 0, limit: null, columns: null, filters: null });
    async function* reshaped(): AsyncIterable<Row> {
      let line = 0;
      // Every column that would lose values is named, so the rows are read to the end before refusing.
      const lost = new Set<string>();
      for await (const row of page.rows) {
        for (const name of lose(row)) lost.add(name);
        yield reshape(row, ++line);
      }
      if (lost.size > 0) throw dropRefused([...lost]);
    }
    await storage.rows.writeDatasetRows({
      datasetId: id,
      mode: "replace",
      rows: reshaped(),
      columns: () => columns,
      updatedAt,
    });
  }

  async function existingDataset(id: string): Promise<UploadOrConnectionDataset> {
    const dataset = await storage.catalog.getDataset(id);
    if (!dataset || !isUploadOrConnection(dataset)) throw notFound("dataset");
    return dataset;
  }

  return {
    async putConnection(id, input, options) {
      assertWritable(storage.catalog, "putConnection");
      checkId(id);
      const body = parseBody(connectionBody, input);
      requireRef(await storage.identity.getTeam(body.teamId), "$.teamId", "team", body.teamId);
      checkConnectionConfig(body.type, body.config, connectors, { allowPrivate: settings.allowPrivateUpstreams });
      const actor = await actorFor(storage, options);
      // One put of an id at a time here; a racing create in another instance is caught below.
      const { created, stored, details } = await serialised(storage, `connection:${id}`, async () => {
        const current = await storage.catalog.getConnection(id);
        if (!current && body.type === "webhook") {
          const made = await createWebhook(id, body);
          if (made) return { created: true, stored: made, details: undefined };
        }
        return replaceConnection(id, body, (await storage.catalog.getConnection(id)) ?? current);
      });
      await recordChange(deps, {
        teamIds: [body.teamId],
        action: putAction("connection", created),
        actor,
        target: { type: "connection", id },
        ...(details && { details }),
      });
      return { created, value: view(stored) };
    },

    getConnection: async (id) => view(await existingConnection(id)),
    async listConnections(options) {
      const page = await listPage(options, (p) => storage.catalog.listAllConnections(p));
      return { ...page, data: page.data.map(view) };
    },
    async deleteConnection(id, options) {
      assertWritable(storage.catalog, "deleteConnection");
      const actor = await actorFor(storage, options);
      const connection = await existingConnection(id);
      if (!(await storage.catalog.deleteConnection(id))) throw notFound("connection");
      await recordChange(deps, {
        teamIds: [connection.teamId],
        action: "connection.deleted",
        actor,
        target: { type: "connection", id },
      });
    },

    async setSigningSecret(id, input, options) {
      assertWritable(storage.webhooks, "updateWebhookSettings");
      checkId(id);
      const connection = await existingConnection(id);
      if (connection.type !== "webhook") throw notFound("webhook connection");
      const { secret, overlapSeconds = 0 } = parseBody(signingSecretBody, input);
      if (secret !== null) checkConnectionConfig("webhook", { signingSecret: secret }, connectors);
      else if (overlapSeconds > 0)
        throw validationFailed("$.overlapSeconds", "removing the secret removes every secret; no overlap");
      const actor = await actorFor(storage, options);
      const previousSecretValidUntil =
        overlapSeconds > 0 ? isoTime(deps.ports.clock.now() + overlapSeconds * 1000) : null;
      const updated = await storage.webhooks.updateWebhookSettings(id, {
        signingSecret: secret,
        previousSecretValidUntil,
      });
      if (!updated) throw notFound("webhook connection");
      await recordChange(deps, {
        teamIds: [connection.teamId],
        action: "connection.updated",
        actor,
        target: { type: "connection", id },
        details: {
          signingSecret: secret === null ? "removed" : "set",
          // The overlap's end, when the replaced secret stays valid until then.
          ...(updated.previousSecret && { previousSecretValidUntil: isoTime(updated.previousSecret.validUntilMs) }),
        },
      });
      return view(await existingConnection(id));
    },

    async putDataset(id, input, options) {
      assertWritable(storage.catalog, "putDataset");
      checkId(id);
      const body = parseBody(datasetBody, input);
      requireRef(await storage.identity.getTeam(body.teamId), "$.teamId", "team", body.teamId);
      if (body.connectionId !== null) {
        const connection = requireRef(
          await storage.catalog.getConnection(body.connectionId),
          "$.connectionId",
          "connection",
          body.connectionId,
        );
        if (connection.teamId !== body.teamId)
          throw validationFailed("$.connectionId", `unknown connection ${body.connectionId}`);
      }
      if (body.type === "connection" && body.connectionId === null)
        throw validationFailed("$.connectionId", "a connection dataset needs a connectionId");
      if (body.columns) checkDeclaredColumns(body.columns, false);
      checkDropColumns(body.columns, body.dropColumns);
      const current = await storage.catalog.getDataset(id);
      if (current?.type === "input_table")
        throw new ApiError(409, "conflict", `${id} is an input table; datasets and tables share ids`);
      if (current && current.teamId !== body.teamId)
        throw validationFailed("$.teamId", "a dataset cannot move to another team");
      const actor = await actorFor(storage, options);
      // Omitted keeps the declaration; null removes it (the columns stay as the rows show them, inferred from then on).
      const declared =
        body.columns === undefined ? (current?.columnsDeclared === true ? current.columns : null) : body.columns;
      const dataset: DatasetRecord = {
        id,
        teamId: body.teamId,
        name: body.name,
        type: body.type,
        connectionId: body.connectionId,
        source: body.source,
        columns: declared ?? current?.columns ?? [],
        columnsDeclared: declared !== null,
        rowCount: current?.rowCount ?? 0,
        lastRefreshedAt: body.lastRefreshedAt ?? current?.lastRefreshedAt ?? null,
        updatedAt: isoNow(deps),
      };
      if (
        body.columns &&
        current &&
        current.rowCount > 0 &&
        (current.columnsDeclared !== true || columnsChanged(current.columns, body.columns))
      ) {
        // Rewriting the rows is a replace: deliveries arriving meanwhile, and the duplicate keys of those stored, would
        // be lost.
        const source = current.connectionId === null ? null : await storage.catalog.getConnection(current.connectionId);
        if (source?.type === "webhook") {
          throw new ApiError(
            409,
            "conflict",
            `dataset ${id} receives webhook deliveries and holds rows: its columns cannot be re-declared without losing deliveries; declare them while it is empty`,
            {
              details: { datasetId: id, rowCount: current.rowCount },
            },
          );
        }
        await reshapeDatasetRows(id, body.columns, body.dropColumns ?? [], dataset.updatedAt);
      }
      const created = (await storage.catalog.putDataset(dataset)) === "created";
      const dropped = body.dropColumns?.length ? { details: { dropColumns: body.dropColumns } } : {};
      const target = { type: "dataset", id };
      const action = putAction("dataset", created);
      await recordChange(deps, { teamIds: [body.teamId], action, actor, target, ...dropped });
      return { created, value: await existingDataset(id) };
    },
    getDataset: existingDataset,
    // listAllDatasets lists no input tables (its contract); the filter says so to the types.
    listDatasets: (options) =>
      listPage(options, async (page) => (await storage.catalog.listAllDatasets(page)).filter(isUploadOrConnection)),
    async deleteDataset(id, options) {
      assertWritable(storage.catalog, "deleteDataset");
      const actor = await actorFor(storage, options);
      const dataset = await existingDataset(id);
      if (!(await storage.catalog.deleteDataset(id))) throw notFound("dataset");
      await recordChange(deps, {
        teamIds: [dataset.teamId],
        action: "dataset.deleted",
        actor,
        target: { type: "dataset", id },
      });
    },
  };
}

/** `postgres://user:secret@host/db` → `postgres://user:***@host/db`. */
function maskPassword(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password === "") return url;
    parsed.password = "***";
    return parsed.toString();
  } catch {
    return url;
  }
}
