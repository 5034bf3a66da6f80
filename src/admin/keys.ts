import { planRequired } from "../core/auth.js";
import { eventId, randomId, sha256Hex } from "../domain/crypto.js";
import type { Allowlist, ApiKeyRecord, AuditEvent, Scope } from "../domain/model.js";
import { isoTime } from "../domain/time.js";
import { generateApiKeyToken } from "../domain/tokens.js";
import { notFound } from "../base/api-error.js";
import { parseFixture } from "../fixture/load.js";
import { assertWritable } from "../storage/mount.js";
import { type AdminDeps, actorFor, type ChangeOptions, checkId, recordChange, requireRef } from "./change.js";
import { apiKeyBody, parseBody, validationFailed } from "./schemas.js";

/** An API key as the host sees it: never the hash, never the token. */
export type ApiKeyInfo = Omit<ApiKeyRecord, "tokenHash" | "creatorDeleted">;

/** Seeding, API keys and host-written audit events. */
export interface KeyAdmin {
  /**
   * Load a fixture (JSON value) into an empty store; `kept` when the store
   * already holds a space. Relative fixture times (docs/fixtures.md) resolve
   * against the API's clock.
   */
  seed(fixture: unknown, options?: { env?: Record<string, string | undefined> }): Promise<"loaded" | "kept">;
  /**
   * Create an API key. The plaintext token is returned once and only its
   * SHA-256 is stored. Unknown team: 404; Free-plan team: 403
   * `plan_required`; an unknown creator, scope or allowlist entry (or one of
   * another team): 422 `validation_failed` naming it in `details.path`.
   */
  createApiKey(input: {
    teamId: string;
    name: string;
    createdBy: string;
    scopes: Scope[];
    allowlist?: Partial<Allowlist>;
  }): Promise<{ key: ApiKeyInfo; token: string }>;
  /** Keys of a team, newest first, without tokens. Unknown team: 404. */
  listApiKeys(teamId: string): Promise<ApiKeyInfo[]>;
  getApiKey(id: string): Promise<ApiKeyInfo>;
  /** Revoke a key; later calls with it answer 401 (action `api_key.revoked`). */
  revokeApiKey(id: string, by?: { userId: string }): Promise<ApiKeyInfo>;
  /** DELETE /api-keys/{id}: revoke it (action `api_key.deleted`); unknown: 404. */
  deleteApiKey(id: string, options?: ChangeOptions): Promise<void>;
  /** Record a host-written audit event (stored now, at the next feed position). */
  recordAuditEvent(event: Omit<AuditEvent, "id" | "time"> & { id?: string; time?: string }): Promise<AuditEvent>;
}

export function keyAdmin(deps: AdminDeps): KeyAdmin {
  const { storage, clock } = deps.ports;
  const isoNow = () => isoTime(clock.now());

  async function recordAuditEvent(
    input: Omit<AuditEvent, "id" | "time"> & { id?: string; time?: string },
  ): Promise<AuditEvent> {
    const event: AuditEvent = { ...input, id: input.id ?? eventId(), time: input.time ?? isoNow() };
    await storage.audit.appendAuditEvent(event, clock.now());
    return event;
  }

  /** Every allowlist entry must name an object of the key's team (422 naming the entry otherwise). */
  async function checkAllowlist(teamId: string, allowlist: Allowlist): Promise<void> {
    const teamDatasets = new Map((await storage.catalog.listDatasets({ teamId })).map((d) => [d.id, d]));
    allowlist.datasets.forEach((id, i) => {
      if (!teamDatasets.has(id)) throw validationFailed(`$.allowlist.datasets[${i}]`, `unknown dataset ${id}`);
    });
    allowlist.tables.forEach((id, i) => {
      if (teamDatasets.get(id)?.type !== "input_table")
        throw validationFailed(`$.allowlist.tables[${i}]`, `unknown table ${id}`);
    });
    const connections = new Set((await storage.catalog.listConnections(teamId)).map((c) => c.id));
    allowlist.connections.forEach((id, i) => {
      if (!connections.has(id)) throw validationFailed(`$.allowlist.connections[${i}]`, `unknown connection ${id}`);
    });
  }

  const info = ({ tokenHash: _hash, creatorDeleted: _gone, ...key }: ApiKeyRecord): ApiKeyInfo => key;

  return {
    async seed(fixture, options = {}) {
      return storage.seed(parseFixture(fixture, { clock, ...options }));
    },

    async createApiKey({ teamId, ...input }) {
      assertWritable(storage.credentials, "insertApiKey");
      checkId(teamId, "$.teamId");
      const team = await storage.identity.getTeam(teamId);
      if (!team) throw notFound("team");
      if (team.plan === "free") throw planRequired("API keys need the Pro, Team or Business plan");
      const body = parseBody(apiKeyBody, input);
      const creator = requireRef(await storage.identity.getUser(body.createdBy), "$.createdBy", "user", body.createdBy);
      await checkAllowlist(team.id, body.allowlist);
      const token = generateApiKeyToken();
      const record: ApiKeyRecord = {
        id: randomId("key_"),
        name: body.name,
        teamId: team.id,
        tokenHash: sha256Hex(token),
        createdBy: creator.id,
        scopes: [...new Set(body.scopes)],
        allowlist: body.allowlist,
        createdAt: isoNow(),
        revokedAt: null,
      };
      await storage.credentials.insertApiKey(record);
      await recordChange(deps, {
        teamIds: [team.id],
        action: "api_key.created",
        actor: { type: "user", id: creator.id, email: creator.email },
        target: { type: "api_key", id: record.id },
        details: { name: record.name, scopes: record.scopes },
      });
      return { key: info(record), token };
    },

    async listApiKeys(teamId) {
      if (!(await storage.identity.getTeam(teamId))) throw notFound("team");
      return (await storage.credentials.listApiKeys(teamId)).map(info);
    },

    async getApiKey(id) {
      const key = await storage.credentials.getApiKey(id);
      if (!key) throw notFound("api key");
      return info(key);
    },

    async revokeApiKey(id, by) {
      assertWritable(storage.credentials, "revokeApiKey");
      const actor = await actorFor(storage, { actorUserId: by?.userId ?? null });
      const revoked = await storage.credentials.revokeApiKey(id, isoNow());
      if (!revoked) throw notFound("api key");
      await recordChange(deps, {
        teamIds: [revoked.teamId],
        action: "api_key.revoked",
        actor,
        target: { type: "api_key", id },
      });
      return info(revoked);
    },

    async deleteApiKey(id, options) {
      assertWritable(storage.credentials, "revokeApiKey");
      const actor = await actorFor(storage, options);
      const revoked = await storage.credentials.revokeApiKey(id, isoNow());
      if (!revoked) throw notFound("api key");
      await recordChange(deps, {
        teamIds: [revoked.teamId],
        action: "api_key.deleted",
        actor,
        target: { type: "api_key", id },
      });
    },

    recordAuditEvent,
  };
}
